"""structlog setup: JSON lines carrying the context bound by the code that knows it."""

from __future__ import annotations

import ast
import io
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import cast

import pytest
import structlog

from controller.observability.logging import bind, configure, get_logger, object_ref


@pytest.fixture(autouse=True)
def _restore() -> Iterator[None]:
    yield
    structlog.reset_defaults()


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_json_lines_carry_bound_context() -> None:
    out = io.StringIO()
    configure(stream=out)
    with bind(trigger="change", checksum="abc123"):
        get_logger("t").info("deployed", objects=["Ingress/default/a"])
    get_logger("t").info("outside")
    first, second = (json.loads(line) for line in out.getvalue().splitlines())
    assert first["event"] == "deployed" and first["trigger"] == "change"
    assert first["checksum"] == "abc123" and first["objects"] == ["Ingress/default/a"]
    assert first["level"] == "info" and "timestamp" in first
    assert first["component"] == "t"
    assert "trigger" not in second


def test_console_on_a_terminal_and_level_filter() -> None:
    out = Tty()
    configure(stream=out, level="warning")
    log = get_logger("t")
    log.info("hidden")
    log.warning("shown", trigger="resync")
    text = out.getvalue()
    assert "hidden" not in text and "shown" in text and "trigger" in text
    assert not text.lstrip().startswith("{")


def _fresh(code: str) -> dict[str, object]:
    """Runs ``code`` in a fresh interpreter (what a process imports is only visible there) and
    returns the JSON object it prints last."""
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


_RECORD_AN_ERROR = """
import io, json, sys
from controller.observability.logging import configure, get_logger
class Tty(io.StringIO):
    def isatty(self): return True
out = Tty() if sys.argv[1:] == ["tty"] else io.StringIO()
configure(level="info", stream=out)
try:
    1 / 0
except ZeroDivisionError:
    get_logger("t").exception("failed", n=1)
loaded = sorted(m for m in ("rich", "pygments", "colorama") if m in sys.modules)
import rich.console  # still importable by anyone who asks
print(json.dumps({"loaded": loaded, "text": out.getvalue()}))
"""


def test_json_lines_do_not_import_the_console_renderers_libraries() -> None:
    """structlog imports rich (and pygments) for its console tracebacks whenever it can; a
    process writing JSON lines imports neither and records exceptions all the same."""
    got = _fresh(_RECORD_AN_ERROR)
    assert got["loaded"] == []
    record = json.loads(str(got["text"]))
    assert record["event"] == "failed" and "ZeroDivisionError" in record["exception"]


def test_a_terminal_gets_the_console_renderer_with_its_libraries() -> None:
    got = _fresh(_RECORD_AN_ERROR.replace('sys.argv[1:] == ["tty"]', "True"))
    assert {"pygments", "rich"} <= set(cast(list[str], got["loaded"]))
    assert "ZeroDivisionError" in str(got["text"]) and not str(got["text"]).startswith("{")


def test_object_ref() -> None:
    obj = {"kind": "Ingress", "metadata": {"namespace": "default", "name": "echo"}}
    assert object_ref(obj) == "Ingress/default/echo"
    assert object_ref({"kind": "Namespace", "metadata": {"name": "x"}}) == "Namespace/x"


def test_every_module_logs_through_structlog() -> None:
    """One logging API: a module that logs asks ``get_logger``; stdlib ``logging`` records
    would bypass the configured renderer, the bound context and the control-character
    escaping. Only the setup itself reads stdlib's level names."""
    package = Path(__file__).resolve().parents[2] / "controller"
    setup = package / "observability" / "logging.py"
    offenders: list[str] = []
    for path in sorted(package.rglob("*.py")):
        if path == setup:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            if isinstance(node, ast.Import | ast.ImportFrom) and any(
                n == "logging" or n.startswith("logging.") for n in names
            ):
                offenders.append(f"{path.relative_to(package.parent)}:{node.lineno}")
    assert not offenders, f"stdlib logging imported in {offenders}"
