"""`htc render`, `htc lint` and `htc test` keep compiled templates between runs as `htc validate`
does (controller.render.codecache): the first run writes them into the private folder, the
second loads them without compiling or writing anything, and says exactly the same."""

from __future__ import annotations

import json
import stat
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.cli.cache_kit import SERVICES, TEMPLATES, entries
from tests.cli.cache_kit import run_htc as _htc

CONFIG = (
    """\
apiVersion: haproxy-template.dev/v1alpha1
kind: HAProxyTemplateConfig
metadata:
  name: cached-commands
spec:
"""
    + SERVICES
    + """\
"""
    + TEMPLATES
    + """\
      {% for svc in resources.services.list() %}
          server {{ svc.metadata.name }} 10.0.0.1:{{ svc.spec.ports[0].port }}
      {% endfor %}
  extraContext:
    hosts: [a.test, b.test]
  tests:
    one-server:
      fixtures:
        services:
          - apiVersion: v1
            kind: Service
            metadata: {name: web, namespace: default}
            spec: {ports: [{port: 8080}]}
      assertions:
        - type: contains
          value: server web 10.0.0.1:8080
"""
)

SERVICE = """\
apiVersion: v1
kind: Service
metadata: {name: api, namespace: default}
spec: {ports: [{port: 9090}]}
"""


def _args(command: str, tmp: Path, haproxy_bin: str) -> list[str]:
    config = str(tmp / "config.yaml")
    if command == "render":
        return ["render", config, "-r", str(tmp / "svc.yaml"), "--out", str(tmp / "out")]
    if command == "lint":
        return ["lint", config, "--format", "json"]
    return ["test", config, "--haproxy", haproxy_bin, "--format", "json"]


def _untimed(value: Any) -> Any:
    """A JSON report without its timings (``timings``, ``...Ms``), which differ run to run."""
    if isinstance(value, dict):
        return {k: _untimed(v) for k, v in value.items() if k != "timings" and not k.endswith("Ms")}
    if isinstance(value, list):
        return [_untimed(v) for v in value]
    return value


def _said(command: str, done: subprocess.CompletedProcess[str], tmp: Path) -> Any:
    """What a run said: its exit code, its report (or the files it wrote)."""
    if command == "render":
        out = tmp / "out"
        files = {str(p.relative_to(out)): p.read_bytes() for p in out.rglob("*") if p.is_file()}
        return (done.returncode, files)
    return (done.returncode, _untimed(json.loads(done.stdout)))


@pytest.mark.parametrize("command", ["render", "lint", "test"])
@pytest.mark.parametrize("haproxy_bin", ["2.8"], indirect=True)  # the cache has no binary
def test_a_second_run_loads_the_compiled_templates(
    tmp_path: Path, command: str, haproxy_bin: str
) -> None:
    (tmp_path / "config.yaml").write_text(CONFIG)
    (tmp_path / "svc.yaml").write_text(SERVICE)
    cache = tmp_path / "cache" / "templates"
    env = {"HTC_TEMPLATE_CACHE": str(cache)}
    first = _htc(*_args(command, tmp_path, haproxy_bin), env=env)
    assert first.returncode == 0, first.stderr
    written = entries(cache)
    assert len(written) == 4  # haproxy.cfg, hosts.map and its `when`, the snippet
    assert stat.S_IMODE(cache.stat().st_mode) == 0o700
    assert all(stat.S_IMODE((cache / n).stat().st_mode) == 0o600 for n in written)
    said = _said(command, first, tmp_path)
    assert said[1]  # a report or files, not nothing

    second = _htc(*_args(command, tmp_path, haproxy_bin), env=env)
    assert entries(cache) == written  # loaded, not compiled and written again
    assert _said(command, second, tmp_path) == said


def test_the_default_folder_is_the_users_and_off_writes_nothing(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text(CONFIG)
    lint = ["lint", str(tmp_path / "config.yaml")]
    off = _htc(*lint, env={"XDG_CACHE_HOME": str(tmp_path / "off"), "HTC_TEMPLATE_CACHE": "off"})
    assert off.returncode == 0, off.stderr
    assert not (tmp_path / "off").exists()
    on = _htc(*lint, env={"XDG_CACHE_HOME": str(tmp_path / "xdg"), "HTC_TEMPLATE_CACHE": ""})
    assert on.returncode == 0, on.stderr
    assert len(entries(tmp_path / "xdg" / "htc" / "templates")) == 4
