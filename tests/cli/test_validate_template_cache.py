"""`htc validate` keeps compiled templates between runs (controller.render.codecache): the
second run loads what the first compiled and reports exactly the same."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.cli.cache_kit import TEMPLATES, entries

CONFIG = (
    """\
apiVersion: haproxy-template.dev/v1alpha1
kind: HAProxyTemplateConfig
metadata:
  name: cached
spec:
"""
    + TEMPLATES
    + """\
          server s1 10.0.0.1:80
          balanse roundrobin
  extraContext:
    hosts: [a.test, b.test]
"""
)


def _run(config: Path, cache: Path, haproxy_bin: str) -> dict[str, Any]:
    htc = shutil.which("htc", path=str(Path(sys.executable).parent))
    assert htc is not None
    env = {**os.environ, "HTC_TEMPLATE_CACHE": str(cache)}
    proc = subprocess.run(
        [htc, "validate", str(config), "--haproxy", haproxy_bin, "--format", "json"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert proc.returncode == 1, proc.stderr  # `balanse`: a misspelt keyword
    report: dict[str, Any] = json.loads(proc.stdout)
    report.pop("timings", None)
    return report


@pytest.mark.parametrize("haproxy_bin", ["2.8"], indirect=True)  # the cache has no binary
def test_a_second_run_loads_the_compiled_templates(tmp_path: Path, haproxy_bin: str) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(CONFIG)
    cache = tmp_path / "cache" / "templates"
    first = _run(config, cache, haproxy_bin)
    written = entries(cache)
    assert len(written) == 4  # haproxy.cfg, hosts.map and its `when`, the snippet
    assert stat.S_IMODE(cache.stat().st_mode) == 0o700
    assert all(stat.S_IMODE((cache / n).stat().st_mode) == 0o600 for n in written)
    second = _run(config, cache, haproxy_bin)
    assert entries(cache) == written  # loaded, not compiled and written again
    assert second == first
    rules = {d["ruleId"] for d in first["diagnostics"]}
    assert rules  # the finding is reported by both runs

    config.write_text(CONFIG.replace("server s1 10.0.0.1:80", "server s2 10.0.0.2:80"))
    _run(config, cache, haproxy_bin)
    changed = entries(cache)
    assert len(changed) == 5 and written.items() <= changed.items()  # one source changed
