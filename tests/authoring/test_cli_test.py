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
    assert [x.split()[0] for x in lines[:-1]] == ["PASS"] * 7
    assert lines[-1].startswith("7 tests: 7 passed, 0 failed")


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
