"""What starting a command imports: ``htc validate`` should not pay for the operator's
libraries (kopf, the Kubernetes client, aiohttp), nor for structlog's console (rich) when
nothing is logged at the configured level, nor for what only some configs or the running
controller need (the Prometheus client, jsonschema for schema overlays). Checked in a fresh interpreter, where the
modules a command imports are exactly what ``sys.modules`` holds afterwards."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

_HEAVY = ("aiohttp", "jsonschema", "kopf", "kubernetes", "prometheus_client", "rich", "structlog")


def _imported(code: str) -> list[str]:
    probe = f"{code}\nimport json, sys\nprint(json.dumps(sorted(m for m in {_HEAVY!r} if m in sys.modules)))"
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True
    )
    loaded: list[str] = json.loads(done.stdout.strip().splitlines()[-1])
    return loaded


def test_the_command_line_and_validate_import_nothing_heavy() -> None:
    assert _imported("import controller.cli, controller.cli.validate") == []


def test_building_the_quickstarts_engine_imports_nothing_heavy(quickstart_dir: Path) -> None:
    """What ``htc validate`` builds before it renders: the config, its renderer and pipeline."""
    code = f"""
from pathlib import Path
from controller.spec import load_config_located
from controller.validation import default_engine
config, problems, locate = load_config_located(Path({str(quickstart_dir / "config.yaml")!r}))
assert config is not None and not problems, problems
default_engine(None, locate=locate, warm=False)(config.spec)
"""
    assert _imported(code) == []


def test_metrics_load_on_first_use() -> None:
    code = """
import controller.observability as o
assert "prometheus_client" not in __import__("sys").modules
assert o.METRICS is __import__("controller.observability.metrics").observability.metrics.METRICS
"""
    assert _imported(code) == ["prometheus_client"]


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
