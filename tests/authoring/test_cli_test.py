"""`htc test` end to end: the quickstart suite passes; failures, filters and formats."""

from __future__ import annotations

import json
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

from click.testing import CliRunner, Result

from controller.cli import main


def invoke(*args: str) -> Result:
    return CliRunner().invoke(main, ["test", *args], catch_exceptions=False)


def test_the_quickstart_suite_passes(quickstart_dir: Path) -> None:
    result = invoke(str(quickstart_dir / "config.yaml"), "--workers", "2")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    n = len(lines) - 1  # one line per embedded test, then the summary
    assert n >= 7 and [x.split()[0] for x in lines[:-1]] == ["PASS"] * n
    assert lines[-1].startswith(f"{n} tests: {n} passed, 0 failed")


def test_filter_and_junit(quickstart_dir: Path) -> None:
    result = invoke(str(quickstart_dir / "config.yaml"), "--filter", "hostile", "--format", "junit")
    assert result.exit_code == 0, result.output
    suite = ET.fromstring(result.stdout)
    names = [c.get("name") for c in suite.iter("testcase")]
    assert names == ["hostile-host-rejected", "hostile-path-refused"]
    none = invoke(str(quickstart_dir / "config.yaml"), "--filter", "no-such-test")
    assert none.exit_code == 2 and "no tests matching" in none.stderr


FAILING = """\
apiVersion: haproxy-template.dev/v1alpha1
kind: HAProxyTemplateConfig
metadata:
  name: failing
spec:
  haproxyConfig:
    template: |
      global
          maxconn 10
  tests:
    wrong:
      assertions:
        - type: equals
          value: |
            global
                maxconn 20
"""


def test_a_failing_suite_exits_1_with_a_diff_and_a_location(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(textwrap.dedent(FAILING))
    text = invoke(str(path))
    assert text.exit_code == 1
    assert "FAIL wrong" in text.stdout and "-    maxconn 20" in text.stdout
    doc = json.loads(invoke(str(path), "--format", "json").stdout)
    [d] = doc["tests"][0]["diagnostics"]
    assert d["ruleId"] == "E8060" and d["location"] == {"file": str(path), "line": 13}


def test_no_tests_is_a_usage_error(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(FAILING.split("  tests:")[0])
    result = invoke(str(path))
    assert result.exit_code == 2 and "no tests in spec.tests" in result.stderr


LINT_FAILS = """\
apiVersion: haproxy-template.dev/v1alpha1
kind: HAProxyTemplateConfig
metadata:
  name: broken-rules
spec:
  haproxyConfig:
    template: |
      global
          maxconn 10
    validate:
      rules:
        - name: typo
          expression: selff.content != ''
  tests:
    passes-anyway:
      assertions:
        - type: contains
          value: maxconn 10
"""


def test_lint_errors_fail_the_suite_in_every_format(tmp_path: Path) -> None:
    """The controller refuses a config with lint errors; a green suite for it would lie."""
    path = tmp_path / "c.yaml"
    path.write_text(LINT_FAILS)
    text = invoke(str(path))
    assert text.exit_code == 1
    assert text.stdout.startswith("FAIL lint: 1 lint error(s)")
    assert f"{path}:13: E5001 spec.haproxyConfig.validate.rules[0].expression:" in text.stdout
    assert "passes-anyway" not in text.stdout  # no test ran
    doc = json.loads(invoke(str(path), "--format", "json").stdout)
    assert doc["passed"] is False and doc["tests"] == []
    assert [d["ruleId"] for d in doc["lint"]["diagnostics"]] == ["E5001"]
    out = tmp_path / "junit.xml"
    written = invoke(str(path), "--format", "junit", "-o", str(out))
    assert written.exit_code == 1 and "lint failed" in written.stderr
    suite = ET.fromstring(out.read_text())
    assert suite.get("failures") == "1" and suite.get("tests") == "1"
    [case] = suite.iter("testcase")
    failure = case.find("failure")
    assert case.get("name") == "lint" and failure is not None
    assert failure.get("type") == "E5001"


def test_an_invalid_or_unreadable_config_still_writes_a_failing_result(tmp_path: Path) -> None:
    invalid = tmp_path / "invalid.yaml"
    invalid.write_text(FAILING.replace("  haproxyConfig:", "  haproxyConfg:"))
    out = tmp_path / "result.xml"
    out.write_text("<testsuites tests='1' failures='0'/>")  # a stale green result
    result = invoke(str(invalid), "--format", "junit", "-o", str(out))
    assert result.exit_code == 2  # not a valid config: the exit-code table of every command
    suite = ET.fromstring(out.read_text())
    assert suite.get("failures") == "1"
    [failure] = suite.iter("failure")
    assert failure.get("type") == "E8001"
    unreadable = tmp_path / "unreadable.yaml"
    unreadable.write_text("a: [\n")
    result = invoke(str(unreadable), "--format", "json", "-o", str(out))
    assert result.exit_code == 2 and "E8002" in result.stderr
    doc = json.loads(out.read_text())
    assert doc["passed"] is False and doc["lint"]["diagnostics"][0]["ruleId"] == "E8002"
