"""`htc validate` names the line of the file the user edits, not only the template line."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from controller.cli import main

CONFIG = """\
apiVersion: haproxy-template.dev/v1alpha1
kind: HAProxyTemplateConfig
metadata:
  name: where
spec:
  templateSnippets:
    backend-extras:
      template: |
        # a comment
            balanse roundrobin
  haproxyConfig:
    template: |
      defaults
          mode http
          timeout connect 5s
          timeout client 30s
          timeout server 30s
      frontend fe
          bind 127.0.0.1:18080
          default_backend be
      backend be
          server s1 10.0.0.1:80
          retries abc
      {% include 'backend-extras' %}
"""


def invoke(*args: str) -> Result:
    return CliRunner().invoke(main, ["validate", *args], catch_exceptions=False)


def line_of(text: str, needle: str) -> int:
    [n] = [i for i, line in enumerate(text.splitlines(), start=1) if needle in line]
    return n


def test_template_locations_carry_the_config_file_line(tmp_path: Path, haproxy_bin: str) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(CONFIG)
    retries, balanse = line_of(CONFIG, "retries abc"), line_of(CONFIG, "balanse")
    doc = json.loads(invoke(str(config), "--haproxy", haproxy_bin, "--format", "json").stdout)
    where = {
        d["message"].split("'")[1]: d["templateLocation"]
        for d in doc["diagnostics"]
        if d.get("templateLocation") and "'" in d["message"]
    }
    assert where["balanse"] == {
        "template": "backend-extras",
        "line": 2,
        "file": str(config),
        "fileLine": balanse,
    }
    retries_at = next(t for d, t in where.items() if "retries" in d)
    assert retries_at["file"] == str(config) and retries_at["fileLine"] == retries
    text = invoke(str(config), "--haproxy", haproxy_bin).stdout
    assert f"template: backend-extras:2, in {config}:{balanse}" in text
    sarif = json.loads(invoke(str(config), "--haproxy", haproxy_bin, "--format", "sarif").stdout)
    [result] = [r for r in sarif["runs"][0]["results"] if "balanse" in r["message"]["text"]]
    primary = result["locations"][0]["physicalLocation"]
    assert primary["artifactLocation"]["uri"] == "file://" + str(config)
    assert "uriBaseId" not in primary["artifactLocation"]
    assert primary["region"] == {"startLine": balanse}
    kinds = {r["message"]["text"] for r in result["relatedLocations"]}
    assert {"template", "rendered output"} <= kinds
    junit = invoke(str(config), "--haproxy", haproxy_bin, "--format", "junit").stdout
    assert f"in {config}:{balanse}" in "".join(ET.fromstring(junit).itertext())


def test_a_relative_config_path_stays_relative(
    tmp_path: Path, haproxy_bin: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "config.yaml").write_text(CONFIG)
    monkeypatch.chdir(tmp_path)
    sarif = json.loads(invoke("config.yaml", "--haproxy", haproxy_bin, "--format", "sarif").stdout)
    uris = {
        r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
        for r in sarif["runs"][0]["results"]
        if r.get("locations")
    }
    assert "config.yaml" in uris
