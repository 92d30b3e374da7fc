"""The `htc` program ends `htc validate` and `htc render` without tearing the interpreter down
(controller.cli.output.finish): whatever it printed still arrives whole, the exit code is the
verdict's, and no temporary folder is left behind. Called in a test runner's process, the
commands exit as always (the runner sees the exit code, and goes on)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from controller.cli import main
from tests.cli.cache_kit import SERVICES, TEMPLATES

CONFIG = (
    """\
apiVersion: haproxy-template.dev/v1alpha1
kind: HAProxyTemplateConfig
metadata:
  name: exits
spec:
"""
    + SERVICES
    + """\
  extraContext:
    hosts: [a.test]
"""
    + TEMPLATES
    + """\
      {% for svc in resources.services.list() %}
          server {{ svc.metadata.name }} 10.0.0.1:{{ svc.spec.ports[0].port }}
      {% endfor %}
"""
)


def _services(n: int, port: str) -> str:
    return "".join(
        f"---\napiVersion: v1\nkind: Service\nmetadata: {{name: s{i}, namespace: d}}\n"
        f"spec: {{ports: [{{port: {port}}}]}}\n"
        for i in range(n)
    )


def _htc(*args: str, tmp: Path) -> subprocess.CompletedProcess[str]:
    htc = shutil.which("htc", path=str(Path(sys.executable).parent))
    assert htc is not None
    scratch = tmp / "scratch"
    scratch.mkdir(exist_ok=True)
    env = {**os.environ, "TMPDIR": str(scratch), "HTC_TEMPLATE_CACHE": "off"}
    return subprocess.run([htc, *args], capture_output=True, text=True, timeout=120, env=env)


@pytest.mark.parametrize("haproxy_bin", ["2.8"], indirect=True)
def test_the_whole_report_arrives_with_the_verdicts_exit_code(
    tmp_path: Path, haproxy_bin: str
) -> None:
    (tmp_path / "config.yaml").write_text(CONFIG)
    # an unknown keyword on each of 300 template lines: 300 findings, a report far larger
    # than a pipe's buffer
    (tmp_path / "bad.yaml").write_text(
        CONFIG + "".join(f"          bogus{i} on\n" for i in range(300))
    )
    (tmp_path / "good.yaml").write_text(_services(300, "80"))
    resources = ["-r", str(tmp_path / "good.yaml"), "--haproxy", haproxy_bin, "--format", "json"]

    good = _htc("validate", str(tmp_path / "config.yaml"), *resources, tmp=tmp_path)
    assert good.returncode == 0, good.stderr
    assert json.loads(good.stdout)["valid"] is True
    assert "loaded 300 objects" in good.stderr

    bad = _htc("validate", str(tmp_path / "bad.yaml"), *resources, tmp=tmp_path)
    assert bad.returncode == 1, bad.stderr
    assert len(bad.stdout) > 1 << 17
    report = json.loads(bad.stdout)  # whole: it parses
    assert report["valid"] is False and len(report["diagnostics"]) >= 300

    out = tmp_path / "report.json"
    to_file = _htc("validate", str(tmp_path / "bad.yaml"), *resources, "-o", str(out), tmp=tmp_path)
    assert to_file.returncode == 1 and to_file.stderr.rstrip().endswith(f"report in {out}")
    assert json.loads(out.read_text())["diagnostics"] == report["diagnostics"]

    render = _htc(
        "render",
        str(tmp_path / "config.yaml"),
        "-r",
        str(tmp_path / "good.yaml"),
        "--out",
        str(tmp_path / "out"),
        tmp=tmp_path,
    )
    assert render.returncode == 0, render.stderr
    assert render.stdout.split() == [
        str(tmp_path / "out" / n) for n in ("haproxy.cfg", "maps/hosts.map")
    ]
    assert (tmp_path / "out" / "haproxy.cfg").read_text().count("server s") == 300
    assert list((tmp_path / "scratch").iterdir()) == []  # every temporary folder removed


@pytest.mark.parametrize("haproxy_bin", ["2.8"], indirect=True)
def test_in_a_test_runners_process_the_exit_is_an_ordinary_one(
    tmp_path: Path, haproxy_bin: str
) -> None:
    (tmp_path / "config.yaml").write_text(CONFIG)
    (tmp_path / "good.yaml").write_text(_services(3, "80"))
    args = [str(tmp_path / "config.yaml"), "-r", str(tmp_path / "good.yaml")]
    result = CliRunner().invoke(main, ["validate", *args, "--haproxy", haproxy_bin])
    assert result.exit_code == 0 and result.exception is None, result.output
    assert "valid: 0 errors" in result.output  # and this process goes on
    render = CliRunner().invoke(main, ["render", *args, "--out", str(tmp_path / "out")])
    assert render.exit_code == 0 and (tmp_path / "out" / "haproxy.cfg").exists()


DRIVER = """
import gc, os, sys
collections = [0]
gc.callbacks.append(lambda phase, info: collections.__setitem__(0, collections[0] + (phase == "stop")))
parent = os.getpid()
real_exit = os._exit
def counted_exit(code):
    if os.getpid() == parent:  # not a forked sandbox or rule worker
        sys.stderr.write(f"collections={collections[0]}\\n")
        sys.stderr.flush()
    real_exit(code)
os._exit = counted_exit
from controller.cli import main
main()
"""


@pytest.mark.parametrize("haproxy_bin", ["2.8"], indirect=True)
def test_the_program_keeps_the_collector_off_what_lives_until_it_exits(
    tmp_path: Path, haproxy_bin: str
) -> None:
    """The command's imports, its inputs and its engine are frozen out of the collector's
    sight as they are built: without that some 250 collections walk them (about 100 ms at
    2,000 Ingresses), here the ~35 of the start before the command is known, and the
    render's own."""
    (tmp_path / "config.yaml").write_text(CONFIG)
    (tmp_path / "good.yaml").write_text(_services(300, "80"))
    (tmp_path / "driver.py").write_text(DRIVER)
    args = ["validate", str(tmp_path / "config.yaml"), "-r", str(tmp_path / "good.yaml")]
    done = subprocess.run(
        [sys.executable, str(tmp_path / "driver.py"), *args, "--haproxy", haproxy_bin],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "HTC_TEMPLATE_CACHE": "off"},
    )
    assert done.returncode == 0, done.stderr
    [count] = [int(x.split("=")[1]) for x in done.stderr.split() if x.startswith("collections=")]
    assert 0 < count < 80
