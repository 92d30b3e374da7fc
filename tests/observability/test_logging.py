"""structlog setup: JSON lines carrying the context bound by the code that knows it."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator

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


def test_object_ref() -> None:
    obj = {"kind": "Ingress", "metadata": {"namespace": "default", "name": "echo"}}
    assert object_ref(obj) == "Ingress/default/echo"
    assert object_ref({"kind": "Namespace", "metadata": {"name": "x"}}) == "Namespace/x"
