"""`htc crd` prints the generated CRD; `--write` refreshes every derived file."""

from __future__ import annotations

from pathlib import Path

import yaml
from click.testing import CliRunner

from controller.cli import main
from controller.spec import generate_crd
from controller.spec.crd import render_crd_yaml
from controller.spec.docs import generate_api_docs


def test_crd_prints_the_generated_yaml() -> None:
    result = CliRunner().invoke(main, ["crd"])
    assert result.exit_code == 0, result.output
    assert result.output == render_crd_yaml()
    assert yaml.safe_load(result.output) == generate_crd()


def test_write_creates_then_reports_unchanged(tmp_path: Path) -> None:
    (tmp_path / "deploy").mkdir()
    runner = CliRunner()
    first = runner.invoke(main, ["crd", "--write", "--root", str(tmp_path)])
    assert first.exit_code == 0, first.output
    written = [
        tmp_path / "deploy/crds/haproxytemplateconfigs.haproxy-template.dev.yaml",
        tmp_path
        / "charts/haproxy-template-controller/crds/haproxytemplateconfigs.haproxy-template.dev.yaml",
    ]
    for path in written:
        assert path.read_text() == render_crd_yaml()
    assert (tmp_path / "docs/api.md").read_text() == generate_api_docs()
    assert first.output.count("wrote ") == 3

    written[0].write_text("stale")
    second = runner.invoke(main, ["crd", "--write", "--root", str(tmp_path)])
    assert second.exit_code == 0
    assert second.output.count("unchanged ") == 2 and second.output.count("wrote ") == 1
    assert written[0].read_text() == render_crd_yaml()


def test_write_outside_a_repository_is_a_usage_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["crd", "--write", "--root", str(tmp_path)])
    assert result.exit_code == 2
    assert "has no deploy/ directory" in result.output
    assert not any(tmp_path.iterdir())
