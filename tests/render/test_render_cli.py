"""`htc render`: exit 0 with files in the deploy layout, 1 with template:line, 2 with file:line."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from controller.cli import main
from tests.render.render_kit import QUICKSTART


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
    assert files == [
        "files/crt-list",
        "haproxy.cfg",
        "maps/hosts.map",
        "maps/passthrough.map",
        "maps/paths.map",
        "maps/prefixes.map",
        "maps/regex.map",
    ]
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
    assert "server 10.244.1.11:18081" in (tmp_path / "haproxy.cfg").read_text()


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
    template = yaml.safe_load(config.read_text())["spec"]["haproxyConfig"]["template"]
    line = template.splitlines().index("    mode {{ extraContext.mode_typo.value }}") + 1
    assert first.startswith(f"haproxy.cfg:{line}: E1002 ")
    assert "mode_typo" in first
    # the maps did render, but a partial file set is never written
    assert f"nothing written to {tmp_path / 'out'}" in stderr
    assert not (tmp_path / "out").exists()


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


def _render_into(out: Path, config: Path, resources: Path, *more: str) -> tuple[int, str]:
    code, _, stderr = _run(str(config), "--resources", str(resources), "--out", str(out), *more)
    return code, stderr


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def _config(path: Path, main: str, maps: dict[str, str]) -> Path:
    doc = {
        "apiVersion": "haproxy-template.dev/v1alpha1",
        "kind": "HAProxyTemplateConfig",
        "metadata": {"name": "x"},
        "spec": {
            "haproxyConfig": {"template": main},
            "maps": {name: {"template": t} for name, t in maps.items()},
        },
    }
    path.write_text(json.dumps(doc))
    return path


def test_a_failed_render_leaves_the_previous_output_untouched(tmp_path: Path) -> None:
    out = tmp_path / "out"
    config = _config(tmp_path / "c.yaml", "global\n", {"a.map": "a 1\n"})
    assert _run(str(config), "--out", str(out))[0] == 0
    before = _tree(out)
    assert before == {"haproxy.cfg": b"global\n", "maps/a.map": b"a 1\n"}
    # a.map changes and renders, haproxy.cfg then fails: before the fix the new map was
    # written next to the old haproxy.cfg
    _config(config, "global\n{{ nope.x }}\n", {"a.map": "a 2\n", "b.map": "b\n"})
    code, _, stderr = _run(str(config), "--out", str(out))
    assert code == 1 and f"nothing written to {out}" in stderr
    assert _tree(out) == before


def test_a_clean_render_replaces_the_directory_as_a_whole(tmp_path: Path) -> None:
    out = tmp_path / "out"
    config = _config(tmp_path / "c.yaml", "global\n", {"a.map": "a\n", "b.map": "b\n"})
    assert _run(str(config), "--out", str(out))[0] == 0
    mode = out.stat().st_mode
    _config(config, "global\n    maxconn 10\n", {"a.map": "a\n"})
    code, stdout, stderr = _run(str(config), "--out", str(out))
    assert code == 0, stderr
    # b.map's output is gone, so is its file; nothing of the temporary directories remains
    assert _tree(out) == {"haproxy.cfg": b"global\n    maxconn 10\n", "maps/a.map": b"a\n"}
    assert stdout.splitlines() == [str(out / "haproxy.cfg"), str(out / "maps" / "a.map")]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.yaml", "out"]
    assert out.stat().st_mode == mode


def test_a_directory_with_other_files_is_not_replaced(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    code, stderr = _render_into(out, QUICKSTART / "config.yaml", QUICKSTART / "resources")
    assert code == 2
    assert "refusing to replace" in stderr and "notes.txt" in stderr
    assert _tree(out) == {"notes.txt": b"mine"}
    assert not list(tmp_path.glob(".out.*"))


def test_a_skipped_haproxy_cfg_is_reported_and_nothing_written(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(
        "apiVersion: haproxy-template.dev/v1alpha1\nkind: HAProxyTemplateConfig\n"
        "metadata: {name: x}\nspec:\n  haproxyConfig:\n    when: 'false'\n"
        "    template: global\n"
    )
    code, _, stderr = _run(str(config), "--out", str(tmp_path / "out"))
    assert code == 1
    assert "haproxy.cfg was skipped (`when` is false)" in stderr
    assert not (tmp_path / "out").exists()


HTTP_CONFIG = """\
apiVersion: haproxy-template.dev/v1alpha1
kind: HAProxyTemplateConfig
metadata: {name: x}
spec:
  httpSources:
    blocklist: {url: "https://example.test/list.txt"}
  haproxyConfig:
    template: |
      global
      # {{ http['blocklist'] | trim }}
"""


def test_http_content_comes_from_files_named_by_option(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(HTTP_CONFIG)
    content = tmp_path / "list.txt"
    content.write_text("10.0.0.0/8\n")
    out = tmp_path / "out"
    code, _, stderr = _run(str(config), "--out", str(out), "--http", f"blocklist={content}")
    assert code == 0, stderr
    assert (out / "haproxy.cfg").read_text() == "global\n# 10.0.0.0/8\n"


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        (
            (),
            f"{'config.yaml'}:6: E8005 error httpSources entry 'blocklist' has no content: "
            "give it with --http blocklist=FILE",
        ),
        (("--http", "blocklist"), "expected NAME=FILE"),
        (("--http", "blocklst=x"), "no httpSources entry named 'blocklst' (declared: blocklist)"),
        (("--http", "blocklist=/nonexistent/file"), "cannot read"),
    ],
    ids=["missing", "malformed", "undeclared", "unreadable"],
)
def test_http_problems_name_the_option(
    tmp_path: Path, options: tuple[str, ...], expected: str
) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(HTTP_CONFIG)
    code, _, stderr = _run(str(config), "--out", str(tmp_path / "out"), *options)
    assert code == 2
    assert expected in stderr
    assert not (tmp_path / "out").exists()


def test_invalid_index_path_is_reported_at_its_line(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(
        "apiVersion: haproxy-template.dev/v1alpha1\nkind: HAProxyTemplateConfig\n"
        "metadata: {name: x}\nspec:\n  watchedResources:\n    svc:\n"
        "      apiVersion: v1\n      kind: Service\n      indexBy:\n"
        "        - metadata.namespace\n        - metadata[\n"
        "      ignoreFields: [metadata.labels, spec]\n"
        "      fieldSelector: spec..x=1\n"
        "  haproxyConfig: {template: global}\n"
    )
    code, _, stderr = _run(str(config), "--out", str(tmp_path / "out"))
    assert code == 2
    lines = stderr.splitlines()
    assert lines[0].startswith(f"{config}:11: E8010 error spec.watchedResources.svc.indexBy[1]: ")
    assert lines[1].startswith(f"{config}:13: E8012 error spec.watchedResources.svc.fieldSelector")
