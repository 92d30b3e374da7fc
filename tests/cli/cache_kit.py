"""What the command tests share: templates of every kind the compile cache keeps (an output
template, a snippet, a map with a ``when``) and a look at the cache folder."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

TEMPLATES = """\
  templateSnippets:
    timeouts:
      template: |
        {% for t in ['connect 5s', 'client 30s', 'server 30s'] %}
            timeout {{ t }}
        {% endfor %}
  maps:
    hosts.map:
      when: "extraContext.hosts | length > 0"
      template: |
        {% for h in extraContext.hosts %}
        {{ h }} be
        {% endfor %}
  haproxyConfig:
    template: |
      defaults
          mode http
      {% include 'timeouts' %}
      frontend fe
          bind 127.0.0.1:18080
          default_backend be
      backend be
"""
"""Spec lines (indented for ``spec:``) giving 4 cache entries: the snippet, the map and its
``when``, and ``haproxyConfig``, whose template the config ends with its backend's lines."""


SERVICES = """\
  watchedResources:
    services:
      apiVersion: v1
      kind: Service
      indexBy: [metadata.namespace, metadata.name]
"""
"""Spec lines watching Services as ``resources.services``."""


def entries(cache: Path) -> dict[str, tuple[int, int]]:
    """Each entry's inode and change time: a second run that loaded rather than wrote leaves
    both as they were."""
    return {p.name: (p.stat().st_ino, p.stat().st_mtime_ns) for p in cache.iterdir()}


def run_htc(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``htc`` as a user runs it (the console script), with ``env`` over this environment."""
    htc = shutil.which("htc", path=str(Path(sys.executable).parent))
    assert htc is not None
    return subprocess.run(
        [htc, *args], capture_output=True, text=True, timeout=120, env={**os.environ, **env}
    )
