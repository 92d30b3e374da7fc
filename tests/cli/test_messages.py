"""Messages a user trips over, and exit codes that agree across commands."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from controller.cli import main

GOOD = """\
apiVersion: haproxy-template.dev/v1alpha1
kind: HAProxyTemplateConfig
metadata: {name: m}
spec:
  watchedResources:
    services: {apiVersion: v1, kind: Service}
  haproxyConfig:
    template: |
      global
          maxconn 10
"""
WRONG_KIND = GOOD.replace("kind: HAProxyTemplateConfig", "kind: HAProxyTemplateConfg")
INVALID = GOOD.replace("    services: {apiVersion: v1, kind: Service}", "    services: {kind: 3}")
UNREADABLE = "apiVersion: v1\nmetadata:\n  name: [x\n"


def run(*args: str) -> Result:
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def _validate(p: Path, tmp: Path) -> Result:
    return run("validate", str(p))


def _render(p: Path, tmp: Path) -> Result:
    return run("render", str(p), "--out", str(tmp / "out"))


def _lint(p: Path, tmp: Path) -> Result:
    return run("lint", str(p))


def _test(p: Path, tmp: Path) -> Result:
    return run("test", str(p))


COMMANDS: dict[str, Callable[[Path, Path], Result]] = {
    "validate": _validate,
    "render": _render,
    "lint": _lint,
    "test": _test,
}


@pytest.mark.parametrize(("text", "code"), [(WRONG_KIND, 2), (INVALID, 2), (UNREADABLE, 2)])
def test_the_same_input_exits_the_same_way_in_every_command(
    tmp_path: Path, text: str, code: int
) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(text)
    codes = {name: call(config, tmp_path).exit_code for name, call in COMMANDS.items()}
    assert codes == dict.fromkeys(COMMANDS, code)


def test_a_wrong_kind_is_named_the_same_way_by_every_command(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(WRONG_KIND)
    said = (
        "no document with kind: HAProxyTemplateConfig (found kinds: HAProxyTemplateConfg); "
        "is kind: HAProxyTemplateConfg a misspelling of HAProxyTemplateConfig?"
    )
    for name, call in COMMANDS.items():
        r = call(config, tmp_path)
        assert said in r.output + r.stderr, name


def test_yaml_errors_keep_the_column_and_where_the_construct_started(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(UNREADABLE)
    r = run("validate", str(config))
    assert f"{config}:4:1: E8002" in r.stderr
    assert "(while parsing a flow sequence that started at line 3, column 9)" in r.stderr


def test_e8001_points_at_the_field_in_the_api_reference(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(INVALID)
    doc = json.loads(run("lint", str(config), "--format", "json").stdout)
    fixes = {d["suggestedFix"] for d in doc["diagnostics"] if d["ruleId"] == "E8001"}
    assert (
        "See `kind` of WatchedResource in docs/api.md#watchedresource for its type and "
        "allowed values." in fixes
    )
    assert all("kubectl" not in f for f in fixes)
    assert (Path(__file__).resolve().parents[2] / "docs" / "api.md").read_text().count(
        "## WatchedResource"
    ) == 1


def test_a_misspelt_resource_kind_is_suggested(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(GOOD)
    res = tmp_path / "svc.yaml"
    res.write_text("apiVersion: v1\nkind: Servic\nmetadata: {name: a, namespace: default}\n")
    r = run("validate", str(config), "-r", str(res), "--severity", "info")
    assert (
        f"{res}:1: I8014 info Servic default/a (v1) matches no watched collection; "
        "is kind: Servic a misspelling of Service?" in r.stderr
    )
