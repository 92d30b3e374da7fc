"""One finding per cause: a mistake inside a template loop is reported once, with the number of
rendered lines it reaches; HAProxy's summaries and its echo of a schema finding are not
findings of their own. Real templates, real `htc validate`, both binaries."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner, Result

from controller.cli import main
from controller.diagnostics import Location, Phase, Severity, TemplateLocation, make
from controller.validation.collapse import SHOWN_OCCURRENCES, collapse

CONFIG = """\
apiVersion: haproxy-template.dev/v1alpha1
kind: HAProxyTemplateConfig
metadata:
  name: loop
spec:
  watchedResources:
    services:
      apiVersion: v1
      kind: Service
  haproxyConfig:
    template: |
      defaults
          mode http
          timeout connect 5s
          timeout client 30s
          timeout server 30s
      frontend fe
          bind 127.0.0.1:18080
          default_backend be_svc-0
      {% for svc in resources.services.list() %}
      backend be_{{ svc.metadata.name }}
          LINE
          server s1 10.0.{{ loop.index0 // 250 }}.{{ loop.index0 % 250 + 1 }}:80
      {% endfor %}
"""


def invoke(*args: str) -> Result:
    return CliRunner().invoke(main, ["validate", *args], catch_exceptions=False)


def write_case(tmp: Path, n: int, line: str) -> tuple[Path, Path]:
    config = tmp / "config.yaml"
    config.write_text(CONFIG.replace("LINE", line))
    services = [
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": f"svc-{i}", "namespace": "default"},
            "spec": {"ports": [{"port": 80}]},
        }
        for i in range(n)
    ]
    res = tmp / "services.yaml"
    res.write_text(yaml.safe_dump_all(services))
    return config, res


def test_misspelt_keyword_in_a_loop_is_one_finding(tmp_path: Path, haproxy_bin: str) -> None:
    n = 300
    config, res = write_case(tmp_path, n, "balanse roundrobin")
    text = invoke(str(config), "-r", str(res), "--haproxy", haproxy_bin)
    assert text.exit_code == 1
    lines = text.stdout.splitlines()
    assert len(lines) <= 15, text.stdout
    assert f"and {n - 1} more rendered lines like it" in text.stdout
    assert "Error(s) found" not in text.stdout and "Fatal errors" not in text.stdout
    assert "too many fatal errors" not in text.stdout
    doc = json.loads(
        invoke(str(config), "-r", str(res), "--haproxy", haproxy_bin, "--format", "json").stdout
    )
    [finding] = [d for d in doc["diagnostics"] if d["severity"] == "error"]
    # HAProxy's error and the schema's warning about 'balanse' are one finding: HAProxy's,
    # with the schema's columns, counting every rendered line of the template line
    assert finding["ruleId"] == "E4001" and "balanse" in finding["message"]
    assert finding["location"]["column"] == 5
    assert finding["occurrences"]["count"] == n
    shown = finding["occurrences"]["locations"]
    assert len(shown) == SHOWN_OCCURRENCES and shown[0] == finding["location"]
    assert [x["line"] for x in shown] == sorted(x["line"] for x in shown)
    assert finding["templateLocation"]["template"] == "haproxy.cfg"
    assert not [d for d in doc["diagnostics"] if d["ruleId"] == "W3015"]
    sarif = json.loads(
        invoke(str(config), "-r", str(res), "--haproxy", haproxy_bin, "--format", "sarif").stdout
    )
    [result] = [r for r in sarif["runs"][0]["results"] if r["ruleId"] == "E4001"]
    assert result["properties"]["occurrences"] == n
    also = [r for r in result["relatedLocations"] if r["message"]["text"] == "also rendered here"]
    assert len(also) == SHOWN_OCCURRENCES - 1
    junit = invoke(str(config), "-r", str(res), "--haproxy", haproxy_bin, "--format", "junit")
    assert f"[{n} rendered lines]" in junit.stdout


def test_timer_warnings_of_schema_and_haproxy_are_one(tmp_path: Path, haproxy_bin: str) -> None:
    # HAProxy prints the second timer's warning without a line; it still joins ours
    config, res = write_case(tmp_path, 40, "default-server inter 1s[ fastinter 2sx")
    r = invoke(str(config), "-r", str(res), "--haproxy", haproxy_bin, "--format", "json")
    assert r.exit_code == 0, r.stdout
    doc = json.loads(r.stdout)
    warnings = [d for d in doc["diagnostics"] if d["severity"] == "warning"]
    assert sorted(d["ruleId"] for d in warnings) == ["W3017", "W3017"], warnings
    assert {d["occurrences"]["count"] for d in warnings} == {40}
    text = invoke(str(config), "-r", str(res), "--haproxy", haproxy_bin)
    assert len(text.stdout.splitlines()) <= 15, text.stdout


@pytest.mark.slow
def test_loop_target_at_2000_ingresses_prints_at_most_15_lines(
    tmp_path: Path, quickstart_dir: Path, haproxy_bin: str
) -> None:
    """Issue 19's measure: the quickstart with one misspelt keyword in its backend loop,
    2,000 Ingresses (12,265 lines of text before one finding per cause)."""
    from bench.pipeline import endpoint_slice, ingress, service

    n = 2000
    res = tmp_path / "res"
    res.mkdir()
    for name, fn in (("i", ingress), ("s", service), ("e", endpoint_slice)):
        (res / f"{name}.yaml").write_text(yaml.safe_dump_all([fn(i) for i in range(n)]))
    text = (quickstart_dir / "config.yaml").read_text()
    anchor = "      backend {{ name | haproxy_arg }}\n"
    assert anchor in text
    config = tmp_path / "config.yaml"
    config.write_text(text.replace(anchor, anchor + "          balanse roundrobin\n", 1))
    r = invoke(str(config), "-r", str(res), "--haproxy", haproxy_bin)
    lines = r.stdout.splitlines()
    print(f"\nloop case, {n} Ingresses: {len(lines)} lines of text")
    assert r.exit_code == 1 and len(lines) <= 15, r.stdout


# --- the folding rules themselves -----------------------------------------------------------


def _at(rule: str, phase: Phase, line: int | None, msg: str, tline: int | None = 7) -> object:
    return make(
        rule,  # type: ignore[arg-type]
        phase,
        msg,
        location=Location(file="haproxy.cfg", line=line) if line else None,
        template_location=TemplateLocation(template="haproxy.cfg", line=tline)
        if line and tline
        else None,
    )


def test_different_rules_or_template_lines_stay_apart() -> None:
    given = [
        _at("W3015", Phase.SCHEMA, 10, "unknown keyword 'a'"),
        _at("W3015", Phase.SCHEMA, 20, "unknown keyword 'a'"),
        _at("W3016", Phase.SCHEMA, 30, "unknown option 'b'"),
        _at("W3015", Phase.SCHEMA, 40, "unknown keyword 'a'", tline=9),
    ]
    _, out = collapse(given)  # type: ignore[arg-type]
    assert [(d.rule_id, d.occurrences.count if d.occurrences else 1) for d in out] == [
        ("W3015", 2),
        ("W3016", 1),
        ("W3015", 1),
    ]


def test_haproxy_error_outranks_the_schema_warning_and_keeps_its_lines() -> None:
    given = [
        _at("W3015", Phase.SCHEMA, 10, "unknown keyword 'balanse' in a 'backend' section"),
        _at("E4001", Phase.HAPROXY, 10, "unknown keyword 'balanse' in 'backend' section"),
        _at("E4001", Phase.HAPROXY, 12, "unknown keyword 'other' in 'backend' section", 8),
    ]
    _, out = collapse(given)  # type: ignore[arg-type]
    assert [d.rule_id for d in out] == ["E4001", "E4001"]
    assert all(d.severity is Severity.ERROR for d in out)


def test_unlocated_haproxy_warning_needs_a_distinctive_word() -> None:
    given = [
        _at("W3017", Phase.SCHEMA, 10, "option 'fastinter': after the timer value '2sx'"),
        _at("W4003", Phase.HAPROXY, None, "unexpected character 'x' after the timer value '2sx'"),
        _at("W4003", Phase.HAPROXY, None, "proxy 'backend' has no server"),
    ]
    _, out = collapse(given)  # type: ignore[arg-type]
    assert [d.rule_id for d in out] == ["W3017", "W4003"]
    assert out[1].message == "proxy 'backend' has no server"


def test_outputs_not_rendered_for_one_root_cause_are_one_finding() -> None:
    cause = "root cause: E5003 ingresses rule hosts on default/echo: bad host"
    given = [
        make(
            "E1008",
            Phase.RENDER,
            f"certificates['tls-{i:02}.pem'] was not rendered: {cause}",
            location=Location(file=f"certs/tls-{i:02}.pem"),
        )
        for i in range(30)
    ]
    other = "root cause: E1004 something else"
    given.append(make("E1008", Phase.RENDER, f"x: {other}", location=Location(file="maps/x.map")))
    _, out = collapse(given)
    assert len(out) == 2
    assert out[0].occurrences is not None and out[0].occurrences.count == 30
    assert [x.file for x in out[0].occurrences.locations][:2] == [
        "certs/tls-00.pem",
        "certs/tls-01.pem",
    ]
    assert out[1].occurrences is None
