"""What starting a command imports: ``htc validate`` should not pay for the operator's
libraries (kopf, the Kubernetes client, aiohttp) nor for structlog's console (rich) when
nothing is logged at the configured level. Checked in a fresh interpreter, where the
modules a command imports are exactly what ``sys.modules`` holds afterwards."""

from __future__ import annotations

import json
import subprocess
import sys

_HEAVY = ("aiohttp", "kopf", "kubernetes", "rich", "structlog")


def _imported(code: str) -> list[str]:
    probe = f"{code}\nimport json, sys\nprint(json.dumps(sorted(m for m in {_HEAVY!r} if m in sys.modules)))"
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True
    )
    loaded: list[str] = json.loads(done.stdout.strip().splitlines()[-1])
    return loaded


def test_the_command_line_and_validate_import_nothing_heavy() -> None:
    assert _imported("import controller.cli, controller.cli.validate") == []


def test_records_below_the_level_do_not_import_structlog_and_later_ones_are_configured() -> None:
    code = """
import io
from controller.observability.logging import configure, get_logger
out = io.StringIO()
configure(fmt="json", level="warning", stream=out)
get_logger("t").info("dropped")
assert "structlog" not in __import__("sys").modules
get_logger("t").warning("kept", n=1)
record = __import__("json").loads(out.getvalue())
assert record["event"] == "kept" and record["level"] == "warning" and record["component"] == "t", record
"""
    assert "structlog" in _imported(code)
