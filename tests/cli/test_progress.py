"""What `htc validate` says it loaded, slow steps, and libyaml loading with line tracking."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from controller.cli import main
from controller.cli.progress import step
from controller.resources import load_manifests
from controller.spec import loader


def test_a_slow_step_says_so_and_a_quick_one_says_nothing(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with step("quick", after=5.0):
        pass
    assert capsys.readouterr().err == ""
    with step("rendering", after=0.05):
        time.sleep(0.3)
    err = capsys.readouterr().err.splitlines()
    assert err[0] == "rendering…" and err[1].startswith("rendering: done in ")


def test_validate_says_what_it_loaded(tmp_path: Path, quickstart_dir: Path) -> None:
    config = quickstart_dir / "config.yaml"
    res = quickstart_dir / "resources"
    r = CliRunner().invoke(main, ["validate", str(config), "-r", str(res)])
    [said] = [line for line in r.stderr.splitlines() if line.startswith("loaded ")]
    assert " Ingress" in said and " Service" in said and said.endswith("from 3 files")
    empty = CliRunner().invoke(main, ["validate", str(config)])
    assert "loaded 0 objects (no --resources given" in empty.stderr


def test_manifests_load_through_libyaml_with_their_lines(tmp_path: Path) -> None:
    assert issubclass(loader._Loader, yaml.CSafeLoader)
    docs = [
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": f"s{i}", "namespace": "default", "labels": {"on": "yes"}},
            "spec": {"ports": [{"port": 80 + i}], "x": None, "flag": True, "ratio": 0.5},
        }
        for i in range(3)
    ]
    text = yaml.safe_dump_all(docs)
    path = tmp_path / "svc.yaml"
    path.write_text(text)
    manifests, problems = load_manifests([path])
    assert not problems
    assert [m.obj for m in manifests] == docs  # the same values as PyYAML's own reading
    starts = [i + 1 for i, line in enumerate(text.splitlines()) if line == "apiVersion: v1"]
    assert [m.line for m in manifests] == starts
    # quoted "on" stays a string, an unquoted timestamp too (as Kubernetes reads JSON)
    odd = tmp_path / "odd.yaml"
    odd.write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata:\n"
        "  when: 2024-05-01T12:00:00Z\n  base: &b {a: 1}\n  more: {<<: *b, c: 2}\n"
    )
    [m], problems = load_manifests([odd])
    assert not problems
    assert m.obj["data"] == {
        "when": "2024-05-01T12:00:00Z",
        "base": {"a": 1},
        "more": {"a": 1, "c": 2},
    }
