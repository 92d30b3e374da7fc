"""`htc render`: exit 0 with files in the deploy layout, 1 with template:line, 2 with file:line."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner
from render_kit import QUICKSTART

from controller.cli import main


def _run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["render", *args])
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr


def _copy_quickstart(tmp_path: Path) -> Path:
    target = tmp_path / "qs"
    shutil.copytree(QUICKSTART, target)
    return target


def test_renders_the_quickstart_into_the_deploy_layout(tmp_path: Path) -> None:
    out = tmp_path / "out"
    code, stdout, stderr = _run(
        str(QUICKSTART / "config.yaml"),
        "--resources",
        str(QUICKSTART / "resources"),
        "--out",
        str(out),
    )
    assert code == 0, stderr
    files = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())
    assert files == ["haproxy.cfg", "maps/hosts.map", "maps/paths.map", "maps/prefixes.map"]
    assert stdout.splitlines() == [str(out / f) for f in files]
    golden = Path(__file__).parent / "golden" / "quickstart"
    for f in files:
        assert (out / f).read_bytes() == (golden / f).read_bytes()


def test_extra_resource_paths_after_config_count_too(tmp_path: Path) -> None:
    res = QUICKSTART / "resources"
    code, _, stderr = _run(
        str(QUICKSTART / "config.yaml"),
        str(res / "services.yaml"),
        "--resources",
        str(res / "ingresses.yaml"),
        str(res / "endpointslices.yaml"),
        "--out",
        str(tmp_path),
    )
    assert code == 0, stderr
    assert "server 127.0.0.1:18081" in (tmp_path / "haproxy.cfg").read_text()


def test_a_broken_template_exits_1_naming_template_and_line(tmp_path: Path) -> None:
    qs = _copy_quickstart(tmp_path)
    config = qs / "config.yaml"
    config.write_text(
        config.read_text().replace(
            "          mode http\n", "          mode {{ extraContext.mode_typo.value }}\n", 1
        )
    )
    code, _, stderr = _run(
        str(config), "--resources", str(qs / "resources"), "--out", str(tmp_path / "out")
    )
    assert code == 1
    first = stderr.splitlines()[0]
    assert first.startswith("haproxy.cfg:10: E1002 ")
    assert "mode_typo" in first
    # the maps did render and were written; the failed config was not
    assert (tmp_path / "out" / "maps" / "hosts.map").exists()
    assert not (tmp_path / "out" / "haproxy.cfg").exists()


def test_bad_yaml_exits_2_naming_file_and_line(tmp_path: Path) -> None:
    qs = _copy_quickstart(tmp_path)
    bad = qs / "resources" / "broken.yaml"
    bad.write_text("apiVersion: v1\nkind: Service\nmetadata:\n  name: x\n  labels: [unclosed\n")
    code, _, stderr = _run(
        str(qs / "config.yaml"),
        "--resources",
        str(qs / "resources"),
        "--out",
        str(tmp_path / "out"),
    )
    assert code == 2
    assert f"{bad}:" in stderr
    line = stderr.split(f"{bad}:", 1)[1].split(":", 1)[0]
    assert line.isdigit() and int(line) >= 5
    assert not (tmp_path / "out").exists()


def test_invalid_config_exits_2(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(
        "apiVersion: haproxy-template.dev/v1alpha1\nkind: HAProxyTemplateConfig\n"
        "metadata:\n  name: x\nspec:\n  haproxyConfig:\n    templ: oops\n"
    )
    code, _, stderr = _run(str(config), "--out", str(tmp_path / "out"))
    assert code == 2
    assert f"{config}:" in stderr and "E8001" in stderr


def test_console_script_end_to_end(tmp_path: Path) -> None:
    htc = Path(sys.executable).with_name("htc")
    proc = subprocess.run(
        [
            str(htc),
            "render",
            str(QUICKSTART / "config.yaml"),
            "-r",
            str(QUICKSTART / "resources"),
            "--out",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "haproxy.cfg").is_file()
