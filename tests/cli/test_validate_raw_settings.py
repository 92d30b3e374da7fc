"""`htc validate --raw` with settings, input errors as reports, and bytes that are not UTF-8.

All runs are real: the click command, both haproxy binaries, files on disk.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from controller.cli import main

CORPUS = Path(__file__).resolve().parents[1] / "corpus"

BASE = """\
global
    maxconn 100
defaults
    mode http
    timeout connect 5s
    timeout client 30s
    timeout server 30s
frontend fe
    bind 127.0.0.1:18080
    default_backend be
backend be
    server s1 127.0.0.1:18081
"""
SETENV = BASE.replace("    maxconn 100\n", "    maxconn 100\n    setenv GREETING hello\n")


def invoke(*args: str) -> Result:
    return CliRunner().invoke(main, ["validate", *args], catch_exceptions=False)


def write(tmp: Path, name: str, data: str | bytes) -> Path:
    p = tmp / name
    if isinstance(data, bytes):
        p.write_bytes(data)
    else:
        p.write_text(data)
    return p


# --- bytes that are not UTF-8 -----------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["text", "json", "sarif", "junit"])
def test_latin1_byte_in_a_keyword_is_a_finding_not_a_crash(
    tmp_path: Path, haproxy_bin: str, fmt: str
) -> None:
    cfg = write(
        tmp_path, "haproxy.cfg", BASE.encode().replace(b"    maxconn 100", b"    caf\xe9 1")
    )
    r = invoke("--raw", str(cfg), "--haproxy", haproxy_bin, "--format", fmt)
    assert r.exit_code == 1, r.output
    assert "Traceback" not in r.output
    if fmt == "sarif":
        results = json.loads(r.stdout)["runs"][0]["results"]
        assert "F0001" not in {x["ruleId"] for x in results} and results
    else:
        assert "F0001" not in r.stdout  # (SARIF lists every rule, so it names F0001 too)
    shown = r.stdout
    if fmt in ("json", "sarif"):
        json.loads(r.stdout)  # still a valid document
        shown = r.stdout.replace("\\\\", "\\")  # JSON writes the escape's backslash twice
    assert "caf\\xe9" in shown  # the byte, shown as an escape in every format
    if fmt == "json":
        doc = json.loads(r.stdout)
        # Which stage refuses the keyword is theirs to say; that it is a finding is ours.
        named = [d for d in doc["diagnostics"] if "caf\\xe9" in d["message"]]
        assert named and all(d["ruleId"][0] in "EW" for d in named)


def test_latin1_corpus_case_passes_end_to_end(haproxy_bin: str) -> None:
    case = CORPUS / "valid" / "41-latin1-byte.cfg"
    assert b"\xe9" in case.read_bytes()
    r = invoke("--raw", str(case), "--aux", str(CORPUS / "aux"), "--haproxy", haproxy_bin)
    assert r.exit_code == 0, r.output


# --- settings for a raw file set ------------------------------------------------------------


def test_policy_exception_from_a_settings_file(tmp_path: Path, haproxy_bin: str) -> None:
    cfg = write(tmp_path, "haproxy.cfg", SETENV)
    denied = invoke("--raw", str(cfg), "--haproxy", haproxy_bin)
    assert denied.exit_code == 1 and "E2105" in denied.stdout
    settings = write(tmp_path, "v.yaml", "validation:\n  policy:\n    allowDirectives: [setenv]\n")
    r = invoke("--raw", str(cfg), "--settings", str(settings), "--haproxy", haproxy_bin)
    assert r.exit_code == 0, r.output


def test_allow_flag_adds_to_the_settings(tmp_path: Path, haproxy_bin: str) -> None:
    cfg = write(tmp_path, "haproxy.cfg", SETENV)
    r = invoke("--raw", str(cfg), "--allow", "setenv", "--haproxy", haproxy_bin)
    assert r.exit_code == 0, r.output
    typo = invoke("--raw", str(cfg), "--allow", "setenf", "--haproxy", haproxy_bin)
    assert typo.exit_code == 1 and "W2019" in typo.stdout and "E2105" in typo.stdout


def test_settings_strictness_and_filters_apply(tmp_path: Path, haproxy_bin: str) -> None:
    warns = BASE.replace("    timeout client 30s\n", "")  # HAProxy warns: missing timeout
    cfg = write(tmp_path, "haproxy.cfg", warns)
    assert invoke("--raw", str(cfg), "--haproxy", haproxy_bin).exit_code == 0
    strict = write(tmp_path, "s.yaml", "validation:\n  strict: true\n")
    r = invoke("--raw", str(cfg), "--settings", str(strict), "--haproxy", haproxy_bin)
    assert r.exit_code == 1 and "(strict, was warning)" in r.stdout
    # A whole HAProxyTemplateConfig works as a settings file too (its spec.validation).
    whole = write(
        tmp_path,
        "config.yaml",
        "apiVersion: haproxy-template.dev/v1alpha1\nkind: HAProxyTemplateConfig\n"
        "metadata: {name: x}\nspec:\n  validation:\n    strict: true\n"
        "    filters: {exclude: [W4003]}\n",
    )
    r = invoke("--raw", str(cfg), "--settings", str(whole), "--haproxy", haproxy_bin)
    assert r.exit_code == 0, r.output


def test_bad_settings_are_exit_2_with_lines(tmp_path: Path) -> None:
    cfg = write(tmp_path, "haproxy.cfg", BASE)
    bad = write(tmp_path, "v.yaml", "validation:\n  strickt: true\n  timeout: soon\n")
    r = invoke("--raw", str(cfg), "--settings", str(bad))
    assert r.exit_code == 2
    assert "v.yaml:2: E8001" in r.stderr and "did you mean strict" in r.stderr
    assert "v.yaml:3: E8001" in r.stderr
    other = write(tmp_path, "o.yaml", "validation: {}\npolicy: {}\n")
    r = invoke("--raw", str(cfg), "--settings", str(other))
    assert r.exit_code == 2 and "o.yaml:2: E8001" in r.stderr
    broken = write(tmp_path, "b.yaml", "validation: [\n")
    assert "E8002" in invoke("--raw", str(cfg), "--settings", str(broken)).stderr


def test_settings_and_allow_only_go_with_raw(tmp_path: Path) -> None:
    settings = write(tmp_path, "v.yaml", "validation: {}\n")
    assert invoke("config.yaml", "--settings", str(settings)).exit_code == 2
    assert invoke("config.yaml", "--allow", "setenv").exit_code == 2


# --- input errors as reports ----------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["json", "sarif", "junit"])
def test_input_error_is_an_error_report_on_stdout(tmp_path: Path, fmt: str) -> None:
    r = invoke("--raw", str(tmp_path / "missing.cfg"), "--format", fmt)
    assert r.exit_code == 2
    assert "E8002" in r.stderr  # still told to a person, too
    if fmt == "json":
        doc = json.loads(r.stdout)
        assert doc["valid"] is False and doc["status"] == "error"
        assert [d["ruleId"] for d in doc["diagnostics"]] == ["E8002"]
        assert doc["metadata"]["counts"]["error"] == 1 and doc["metadata"]["stagesRun"] == []
    elif fmt == "sarif":
        log = json.loads(r.stdout)
        assert [x["ruleId"] for x in log["runs"][0]["results"]] == ["E8002"]
        assert log["runs"][0]["invocations"][0]["executionSuccessful"] is False
    else:
        root = ET.fromstring(r.stdout)
        assert int(root.get("failures", "0")) + int(root.get("errors", "0")) >= 1
        assert "E8002" in r.stdout


def test_input_error_report_goes_to_the_output_file(tmp_path: Path) -> None:
    cfg = write(tmp_path, "haproxy.cfg", BASE)
    bad = write(tmp_path, "v.yaml", "validation:\n  strict: maybe\n")
    out = tmp_path / "report.json"
    r = invoke("--raw", str(cfg), "--settings", str(bad), "--format", "json", "-o", str(out))
    assert r.exit_code == 2 and r.stdout == ""
    doc = json.loads(out.read_text())
    assert doc["status"] == "error" and doc["diagnostics"][0]["ruleId"] == "E8001"
    assert doc["diagnostics"][0]["location"] == {"file": str(bad), "line": 2}


def test_setup_error_is_a_report_too(tmp_path: Path) -> None:
    cfg = write(tmp_path, "haproxy.cfg", BASE)
    r = invoke("--raw", str(cfg), "--haproxy", str(tmp_path / "nope"), "--format", "json")
    assert r.exit_code == 2
    assert [d["ruleId"] for d in json.loads(r.stdout)["diagnostics"]] == ["E4011"]


def test_text_format_keeps_input_errors_on_stderr(tmp_path: Path) -> None:
    r = invoke("--raw", str(tmp_path / "missing.cfg"))
    assert r.exit_code == 2 and r.stdout == "" and "E8002" in r.stderr
