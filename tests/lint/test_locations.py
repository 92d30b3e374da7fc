"""Lint and validate findings point at the config file's YAML lines, which a repository has."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

from click.testing import CliRunner, Result

from controller.cli import main

CONFIG = """\
apiVersion: haproxy-template.dev/v1alpha1
kind: HAProxyTemplateConfig
metadata:
  name: t
spec:
  templateSnippets:
    evil:
      template: "    lua-load /tmp/x.lua\\n"
  maps:
    a.map:
      template: "{{ outputs['nope.map'].path }}"
  haproxyConfig:
    template: |
      global
          maxconn 100
          lua-load /tmp/y.lua
      {% include 'evil' %}
    validate:
      rules:
        - name: typo
          expression: selff.content != ''
"""


def invoke(*args: str) -> Result:
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def _write(tmp_path: Path, body: str = CONFIG) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(textwrap.dedent(body))
    return path


def test_lint_findings_carry_the_config_file_and_yaml_line(tmp_path: Path) -> None:
    path = _write(tmp_path)
    doc = json.loads(invoke("lint", str(path), "--format", "json").stdout)
    where = {
        (d["ruleId"], (d.get("templateLocation") or {}).get("template")): d["location"]
        for d in doc["diagnostics"]
    }
    file = str(path)
    # a literal block: template line 3 is the third line after `template: |` (line 13)
    assert where[("W8051", "haproxy.cfg")] == {"file": file, "line": 16}
    # a quoted template: the key's line
    assert where[("W8051", "evil")] == {"file": file, "line": 8}
    assert where[("E1006", "a.map")] == {"file": file, "line": 11}
    assert where[("E5001", None)] == {"file": file, "line": 21}


def test_lint_sarif_annotates_the_config_file(tmp_path: Path) -> None:
    path = _write(tmp_path)
    log = json.loads(invoke("lint", str(path), "--format", "sarif").stdout)
    results = log["runs"][0]["results"]
    primary = {r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for r in results}
    assert primary == {str(path)}
    [w] = [r for r in results if r["ruleId"] == "W8051" and "haproxy.cfg" in r["message"]["text"]]
    assert w["locations"][0]["physicalLocation"]["region"] == {"startLine": 16}
    [related] = w["relatedLocations"]
    assert related["physicalLocation"]["artifactLocation"] == {
        "uri": "haproxy.cfg",
        "uriBaseId": "TEMPLATES",
    }


def test_validate_reports_a_rule_error_at_its_yaml_line(tmp_path: Path) -> None:
    body = CONFIG.split("  templateSnippets:")[0] + CONFIG.split("      {% include 'evil' %}\n")[1]
    body = body.replace("spec:\n", "spec:\n  haproxyConfig:\n    template: |\n      global\n", 1)
    path = _write(tmp_path, body)
    result = invoke("validate", str(path), "--format", "json")
    assert result.exit_code == 1, result.output
    [d] = [d for d in json.loads(result.stdout)["diagnostics"] if d["ruleId"] == "E5001"]
    assert d["location"] == {"file": str(path), "line": 12}
