"""`htc validate` end to end on both real haproxy binaries: exit codes 0/1/2 and the formats."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from controller.cli import main

GOOD = """\
global
    maxconn 100

defaults
    mode http
    timeout connect 5s
    timeout client 30s
    timeout server 30s

frontend fe
    bind 127.0.0.1:18080
    http-request set-var(txn.be) req.hdr(host),lower,map(maps/hosts.map,be_default)
    use_backend %[var(txn.be)]
    default_backend be_default

backend be_default
    http-request return status 404 content-type text/plain string "no such host"

backend be_echo
    server s1 127.0.0.1:18081
"""

# Valid for HAProxy, but it warns: a frontend and backend without any timeout.
WARNS = """\
global
    maxconn 100

defaults
    mode http

frontend fe
    bind 127.0.0.1:18080
    default_backend be

backend be
    server s1 127.0.0.1:18081
"""

# HAProxy refuses it: the backend name is unknown.
BROKEN = GOOD.replace("default_backend be_default", "default_backend be_missing")


def invoke(*args: str) -> Result:
    return CliRunner().invoke(main, ["validate", *args], catch_exceptions=False)


@pytest.fixture
def raw_dir(tmp_path: Path) -> Path:
    (tmp_path / "maps").mkdir()
    (tmp_path / "maps" / "hosts.map").write_text("echo.local be_echo\n")
    return tmp_path


def write(tmp: Path, name: str, text: str) -> Path:
    p = tmp / name
    p.write_text(text)
    return p


def test_raw_valid_is_exit_0(raw_dir: Path, haproxy_bin: str) -> None:
    cfg = write(raw_dir, "haproxy.cfg", GOOD)
    r = invoke("--raw", str(cfg), "--aux", str(raw_dir), "--haproxy", haproxy_bin)
    assert r.exit_code == 0, r.output
    assert r.stdout.splitlines()[-1].startswith("valid: 0 errors")


def test_raw_missing_map_is_exit_1(raw_dir: Path, haproxy_bin: str) -> None:
    cfg = write(raw_dir, "haproxy.cfg", GOOD)
    r = invoke("--raw", str(cfg), "--haproxy", haproxy_bin)  # no --aux: the map is absent
    assert r.exit_code == 1, r.output
    assert "maps/hosts.map" in r.stdout


def test_raw_analysis_incomplete_is_exit_1(raw_dir: Path, haproxy_bin: str) -> None:
    """A check that never finishes is no pass: haproxy -c spins in Lua until the timeout."""
    (raw_dir / "files").mkdir()
    (raw_dir / "files" / "spin.lua").write_text("while true do end\n")
    cfg = write(
        raw_dir, "haproxy.cfg", GOOD.replace("global\n", "global\n    lua-load files/spin.lua\n")
    )
    settings = write(raw_dir, "settings.yaml", "validation:\n  timeout: 1s\n")
    r = invoke(
        "--raw", str(cfg), "--aux", str(raw_dir), "--settings", str(settings),
        "--allow", "lua-load", "--haproxy", haproxy_bin, "--format", "json",
    )  # fmt: skip
    assert r.exit_code == 1, r.output
    doc = json.loads(r.stdout)
    assert doc["valid"] is False and doc["status"] == "analysis_incomplete"
    assert doc["metadata"]["budgetExhaustions"][0]["budget"] == "timeout"


def test_disable_builtin_rules_leaves_the_verdict_to_haproxy(
    raw_dir: Path, haproxy_bin: str
) -> None:
    # HAProxy takes "maxconn -5"; our schema warns that it may be misread (W3017).
    cfg = write(
        raw_dir, "haproxy.cfg", GOOD.replace("127.0.0.1:18081", "127.0.0.1:18081 maxconn -5")
    )
    base = ("--raw", str(cfg), "--aux", str(raw_dir), "--haproxy", haproxy_bin, "--strict")
    strict = invoke(*base, "--format", "json")
    assert strict.exit_code == 1 and "W3017" in strict.stdout, strict.output
    off = invoke(*base, "--disable-builtin-rules", "--format", "json")
    assert off.exit_code == 0, off.output
    doc = json.loads(off.stdout)
    assert doc["diagnostics"] == [] and doc["metadata"]["suppressed"] == 1
    assert doc["metadata"]["stagesRun"] == ["syntax", "schema", "haproxy"]


def test_raw_rejected_by_haproxy_is_exit_1(raw_dir: Path, haproxy_bin: str) -> None:
    cfg = write(raw_dir, "haproxy.cfg", BROKEN)
    r = invoke(
        "--raw", str(cfg), "--aux", str(raw_dir), "--haproxy", haproxy_bin, "--format", "json"
    )
    assert r.exit_code == 1, r.output
    doc = json.loads(r.stdout)
    assert doc["valid"] is False and doc["status"] == "error"
    assert any("be_missing" in d["message"] for d in doc["diagnostics"])


def test_warnings_pass_unless_strict(tmp_path: Path, haproxy_bin: str) -> None:
    cfg = write(tmp_path, "haproxy.cfg", WARNS)
    lenient = invoke("--raw", str(cfg), "--haproxy", haproxy_bin, "--format", "json")
    assert lenient.exit_code == 0, lenient.output
    doc = json.loads(lenient.stdout)
    assert doc["valid"] and doc["metadata"]["counts"]["warning"] >= 1
    strict = invoke("--raw", str(cfg), "--haproxy", haproxy_bin, "--strict")
    assert strict.exit_code == 1, strict.output
    assert "(strict, was warning)" in strict.stdout
    quiet = invoke(
        "--raw", str(cfg), "--haproxy", haproxy_bin, "--severity", "error", "--format", "json"
    )
    doc = json.loads(quiet.stdout)
    assert doc["diagnostics"] == [] and doc["metadata"]["suppressed"] >= 1


@pytest.mark.parametrize("fmt", ["sarif", "junit"])
def test_formats_and_output_file(raw_dir: Path, haproxy_bin: str, fmt: str) -> None:
    cfg = write(raw_dir, "haproxy.cfg", BROKEN)
    out = raw_dir / f"report.{fmt}"
    r = invoke(
        "--raw",
        str(cfg),
        "--aux",
        str(raw_dir),
        "--haproxy",
        haproxy_bin,
        "--format",
        fmt,
        "-o",
        str(out),
    )
    assert r.exit_code == 1
    assert r.stdout == ""
    assert "invalid" in r.stderr and str(out) in r.stderr
    text = out.read_text()
    if fmt == "sarif":
        log = json.loads(text)
        assert log["version"] == "2.1.0" and log["runs"][0]["results"]
    else:
        root = ET.fromstring(text)
        assert int(root.get("failures", "0")) >= 1


def test_usage_errors_are_exit_2(tmp_path: Path) -> None:
    cfg = write(tmp_path, "haproxy.cfg", GOOD)
    assert invoke().exit_code == 2
    assert invoke("config.yaml", "--raw", str(cfg)).exit_code == 2
    assert invoke("--raw", str(cfg), "--format", "yaml").exit_code == 2
    assert invoke("--raw", str(cfg), "--severity", "loud").exit_code == 2


def test_unreadable_input_is_exit_2(tmp_path: Path) -> None:
    r = invoke("--raw", str(tmp_path / "nope.cfg"))
    assert r.exit_code == 2
    assert "E8002" in r.stderr
    (tmp_path / "maps").mkdir()
    (tmp_path / "maps" / "not deployable.map").write_text("a b\n")  # a name no file can take
    cfg = write(tmp_path, "haproxy.cfg", GOOD)
    r = invoke("--raw", str(cfg), "--aux", str(tmp_path))
    assert r.exit_code == 2 and "not deployable.map" in r.stderr


def test_missing_binary_is_exit_2(tmp_path: Path) -> None:
    cfg = write(tmp_path, "haproxy.cfg", GOOD)
    r = invoke("--raw", str(cfg), "--haproxy", str(tmp_path / "no-haproxy"))
    assert r.exit_code == 2
    assert "E4011" in r.stderr


def test_unwritable_output_is_exit_2(tmp_path: Path, haproxy_bin: str) -> None:
    cfg = write(tmp_path, "haproxy.cfg", WARNS)
    r = invoke(
        "--raw", str(cfg), "--haproxy", haproxy_bin, "-o", str(tmp_path / "no" / "dir" / "r.txt")
    )
    assert r.exit_code == 2


def test_installed_entry_point_runs(tmp_path: Path, haproxy_bin: str) -> None:
    """The real `htc` console script, as a separate process."""
    htc = shutil.which("htc", path=str(Path(sys.executable).parent))
    assert htc is not None
    cfg = write(tmp_path, "haproxy.cfg", WARNS)
    proc = subprocess.run(
        [htc, "validate", "--raw", str(cfg), "--haproxy", haproxy_bin],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert "valid:" in proc.stdout


# --- the config + resources form, on the quickstart ------------------------------------------


def test_quickstart_is_valid(quickstart_dir: Path, haproxy_bin: str) -> None:
    r = invoke(
        str(quickstart_dir / "config.yaml"),
        "--resources",
        str(quickstart_dir / "resources"),
        "--haproxy",
        haproxy_bin,
        "--format",
        "json",
    )
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)  # nothing but the report on stdout
    assert doc["valid"] and doc["metadata"]["stagesRun"] == ["syntax", "schema", "haproxy", "rules"]


def test_several_resource_paths_after_one_flag(quickstart_dir: Path, haproxy_bin: str) -> None:
    res = quickstart_dir / "resources"
    files = sorted(str(p) for p in res.iterdir())
    r = invoke(str(quickstart_dir / "config.yaml"), "--resources", *files, "--haproxy", haproxy_bin)
    assert r.exit_code == 0, r.output


def test_template_error_is_exit_1_with_template_line(tmp_path: Path, quickstart_dir: Path) -> None:
    text = (quickstart_dir / "config.yaml").read_text()
    assert "  haproxyConfig:\n    template: |\n" in text
    broken = text.replace(
        "  haproxyConfig:\n    template: |\n",
        "  haproxyConfig:\n    template: |\n      {{ no_such_variable.attr }}\n",
    )
    cfg = write(tmp_path, "config.yaml", broken)
    r = invoke(str(cfg), "--resources", str(quickstart_dir / "resources"))
    assert r.exit_code == 1, r.output
    assert "E1002" in r.stdout
    assert "skipped syntax, schema, haproxy" in r.stdout


def test_bad_config_or_resources_are_exit_2(tmp_path: Path, quickstart_dir: Path) -> None:
    cfg = write(
        tmp_path,
        "config.yaml",
        "apiVersion: haproxy-template.dev/v1alpha1\nkind: HAProxyTemplateConfig\nmetadata: {name: x}\nspec: {bogus: 1}\n",
    )
    r = invoke(str(cfg), "--resources", str(quickstart_dir / "resources"))
    assert r.exit_code == 2 and "E8001" in r.stderr
    bad = write(tmp_path, "bad.yaml", "kind: [unclosed\n")
    r = invoke(str(quickstart_dir / "config.yaml"), "--resources", str(bad))
    assert r.exit_code == 2 and "E8002" in r.stderr
    r = invoke(str(quickstart_dir / "config.yaml"), "--resources", str(tmp_path / "missing"))
    assert r.exit_code == 2 and "E8002" in r.stderr
    assert invoke(str(tmp_path / "nope.yaml")).exit_code == 2
