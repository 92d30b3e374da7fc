"""Untrusted text on a terminal: control characters are shown, never obeyed."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator

import pytest
import structlog

from controller.observability.logging import configure, get_logger
from controller.observability.text import escape_controls, escape_value

HOSTILE = "x\x1b[2J\x1b[31m\nFAKE deployed\r\t\x00\x7f\x85\x9b\u2028\u2029\u202e"


@pytest.fixture(autouse=True)
def _restore() -> Iterator[None]:
    yield
    structlog.reset_defaults()


def test_every_control_character_becomes_visible() -> None:
    out = escape_controls(HOSTILE)
    assert out == (
        "x\\x1b[2J\\x1b[31m\\nFAKE deployed\\r\\t\\x00\\x7f\\x85\\x9b\\u2028\\u2029\\u202e"
    )
    assert out.isprintable()
    assert escape_controls("plain ünïcode ✓") == "plain ünïcode ✓"


def test_trusted_layout_can_be_kept() -> None:
    assert escape_controls("a\n\x1bb\tc", keep="\n\t") == "a\n\\x1bb\tc"


def test_bytes_that_were_not_utf8_show_as_the_byte() -> None:
    raw = b"caf\xe9 \xff".decode("utf-8", "surrogateescape")
    assert escape_controls(raw) == "caf\\xe9 \\xff"
    assert escape_controls("lone \ud800") == "lone \\ud800"


def test_unnamed_form_writes_every_control_as_hex() -> None:
    assert escape_controls("a\nb\r\tc", named=False) == "a\\x0ab\\x0d\\x09c"
    assert escape_controls("a\nb\tc", keep="\t", named=False) == "a\\x0ab\tc"


def test_nested_values() -> None:
    assert escape_value({"k\x1b": ["a\n", ("b\x07", 3)]}) == {"k\\x1b": ["a\\n", ("b\\x07", 3)]}


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_console_logs_escape_event_and_values() -> None:
    out = Tty()
    configure(stream=out, level="info")
    get_logger("t").warning(f"rejected {HOSTILE}", objects=[f"Ingress/default/{HOSTILE}"])
    text = out.getvalue()
    assert "\x1b[2J" not in text and "\u2028" not in text and "\x9b" not in text
    assert "FAKE deployed" in text and len(text.rstrip("\n").splitlines()) == 1


def test_json_logs_are_escaped_by_the_encoder() -> None:
    out = io.StringIO()
    configure(stream=out, fmt="json")
    get_logger("t").warning("rejected", objects=[HOSTILE])
    line = out.getvalue()
    assert line.isascii() and line.count("\n") == 1
    assert json.loads(line)["objects"] == [HOSTILE]
