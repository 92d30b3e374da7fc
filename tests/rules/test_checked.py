"""The protobuf reader refuses what it does not understand instead of guessing."""

from __future__ import annotations

import pytest

from controller.validation.rules.cel import compile_expression
from controller.validation.rules.checked import DecodeError, decode_checked


def test_reads_a_comprehension_and_a_has_macro() -> None:
    root = decode_checked(
        compile_expression("self.lines.all(l, has(self.x) && l != '')").expression.serialize()
    )
    loops = [n for n in root.walk() if n.kind == "comprehension"]
    assert len(loops) == 1 and "l" in loops[0].binds
    assert any(n.kind == "select" and n.test_only and n.name == "x" for n in root.walk())


@pytest.mark.parametrize(
    "blob",
    [
        b"",
        b"\x0a\x05hello",  # a type url that is not a CheckedExpr
        compile_expression("1 + 2 == 3").expression.serialize()[:-3],  # truncated
        b"\x0f\x00",  # wire type 7 does not exist
    ],
)
def test_malformed_input_is_a_decode_error(blob: bytes) -> None:
    with pytest.raises(DecodeError):
        decode_checked(blob)
