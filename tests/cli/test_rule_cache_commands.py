"""Commands keep compiled CEL rules next to compiled templates
(controller.validation.rules.rulecache): a second `htc lint` loads them, writes nothing and
reports the same findings at the same config lines; HTC_TEMPLATE_CACHE=off writes nothing."""

from __future__ import annotations

import json
import stat
import subprocess
from pathlib import Path
from typing import Any

from tests.cli.cache_kit import run_htc as _htc

CONFIG = """\
apiVersion: haproxy-template.dev/v1alpha1
kind: HAProxyTemplateConfig
metadata:
  name: cached-rules
spec:
  watchedResources:
    services:
      apiVersion: v1
      kind: Service
      indexBy: [metadata.namespace, metadata.name]
      validate:
        rules:
          - name: named
            expression: "self.metadata.name.matches('^[a-z-]+$')"
            messageExpression: "'bad name ' + self.metadata.name"
  haproxyConfig:
    template: |
      defaults
          mode http
    validate:
      rules:
        - name: has-defaults
          expression: "self.content.contains('defaults')"
        - name: sees-services
          expression: "resources.services.size() >= 0"
        - name: broken
          expression: "self.content =="
        - name: not-bool
          expression: "size(self.content)"
"""


def _rule_entries(folder: Path) -> dict[str, tuple[int, int]]:
    """Rule entries (their magic) by name, with inode and change time: a run that loaded
    rather than wrote leaves both as they were."""
    return {
        p.name: (p.stat().st_ino, p.stat().st_mtime_ns)
        for p in folder.iterdir()
        if p.read_bytes()[:4] == b"HTCR"
    }


def _findings(done: subprocess.CompletedProcess[str]) -> Any:
    report = json.loads(done.stdout)
    return (done.returncode, report["diagnostics"])


def test_a_second_lint_loads_the_rules(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text(CONFIG)
    cache = tmp_path / "cache"
    lint = ["lint", str(tmp_path / "config.yaml"), "--format", "json"]
    first = _htc(*lint, env={"HTC_TEMPLATE_CACHE": str(cache)})
    said = _findings(first)
    assert said[0] == 1, first.stderr  # the broken and the non-bool rules
    ids = {
        (d["ruleId"], d["location"]["line"]) for d in said[1] if d["ruleId"] in ("E5001", "E5009")
    }
    assert ids == {("E5001", 27), ("E5009", 29)}  # the lines of their expressions
    written = _rule_entries(cache)
    assert len(written) == 5  # named (and its message), has-defaults, sees-services, not-bool
    assert all(stat.S_IMODE((cache / n).stat().st_mode) == 0o600 for n in written)

    second = _htc(*lint, env={"HTC_TEMPLATE_CACHE": str(cache)})
    assert _rule_entries(cache) == written  # loaded, not compiled and written again
    assert _findings(second) == said

    off = _htc(*lint, env={"HTC_TEMPLATE_CACHE": "off", "XDG_CACHE_HOME": str(tmp_path / "xdg")})
    assert _findings(off) == said
    assert not (tmp_path / "xdg").exists()
