"""Read the checked syntax tree that ``cel-expr-python`` hands out only as protobuf bytes.

The binding exposes no AST, but ``Expression.serialize()`` returns a ``google.protobuf.Any``
holding a ``cel.expr.CheckedExpr`` (the published CEL protos). Decoding the few messages we
need by field number is a page of code and needs no protobuf runtime. We only read it for
facts the type checker cannot state by itself: which constant names follow ``outputs`` and
``resources``, whether the expression iterates, and how large it is. Which variables are
referenced at all is proven separately by the checker (see ``classify.py``), so a decoding
surprise can only make a rule *more* conservative, never hide a reference.

Field numbers (cel/expr/checked.proto, syntax.proto): CheckedExpr.expr = 4; Expr.id = 2,
const 3, ident 4, select 5, call 6, list 7, struct 8, comprehension 9; Select operand 1,
field 2, test_only 3; Call target 1, function 2, args 3; CreateList elements 1; CreateStruct
entries 2 (Entry map_key 3, value 4); Comprehension iter_var 1, iter_range 2, accu_var 3,
accu_init 4, loop_condition 5, loop_step 6, result 7, iter_var2 8; Constant string 6.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

__all__ = ["DecodeError", "Node", "decode_checked", "records"]

_CHECKED_TYPE = "cel.expr.CheckedExpr"
_MAX_DEPTH = 256


class DecodeError(ValueError):
    """The bytes are not the CheckedExpr layout this module knows."""


@dataclass(frozen=True, slots=True)
class Node:
    """One expression node; only the parts classification reads are kept."""

    kind: str
    """const, ident, select, call, list, struct, comprehension, or other."""
    name: str = ""
    """Identifier name, selected field, or called function."""
    text: str | None = None
    """The value of a string constant."""
    test_only: bool = False
    """A ``has(x.f)`` select."""
    target: Node | None = None
    """Receiver of a member call (``x.f()``) or operand of a select."""
    args: tuple[Node, ...] = ()
    """Call arguments, list elements, struct keys and values."""
    binds: tuple[str, ...] = ()
    """Comprehension: names bound inside the loop (iteration and accumulator variables)."""
    outer: tuple[Node, ...] = ()
    """Comprehension: range and accumulator init, evaluated outside the loop's scope."""
    inner: tuple[Node, ...] = ()
    """Comprehension: condition and step, which see the iteration and accumulator variables."""
    result: Node | None = None
    """Comprehension: result, which sees the accumulator only."""
    accu: str = ""

    def walk(self) -> Iterator[Node]:
        yield self
        for child in self.children():
            yield from child.walk()

    def children(self) -> tuple[Node, ...]:
        out = [n for n in (self.target,) if n is not None]
        out += [*self.args, *self.outer, *self.inner]
        if self.result is not None:
            out.append(self.result)
        return tuple(out)


@dataclass
class _Fields:
    ints: dict[int, list[int]] = field(default_factory=dict)
    blobs: dict[int, list[bytes]] = field(default_factory=dict)

    def blob(self, num: int) -> bytes | None:
        found = self.blobs.get(num)
        return found[-1] if found else None

    def text(self, num: int) -> str:
        b = self.blob(num)
        return b.decode("utf-8", errors="replace") if b is not None else ""


def _varint(b: bytes, i: int) -> tuple[int, int]:
    shift = out = 0
    while True:
        if i >= len(b) or shift > 63:
            raise DecodeError("truncated varint")
        c = b[i]
        i += 1
        out |= (c & 0x7F) << shift
        if not c & 0x80:
            return out, i
        shift += 7


def records(b: bytes) -> Iterator[tuple[int, bytes | None, bytes]]:
    """Each field of one message in order: its number, its payload when it is
    length-delimited (None otherwise) and its bytes as written, key included; for code that
    rewrites a message and copies what it does not change."""
    i, n = 0, len(b)
    while i < n:
        start = i
        key, i = _varint(b, i)
        wire = key & 7
        payload: bytes | None = None
        if wire == 0:
            _, i = _varint(b, i)
        elif wire == 1:
            i += 8
        elif wire == 2:
            size, i = _varint(b, i)
            payload, i = b[i : i + size], i + size
        elif wire == 5:
            i += 4
        else:
            raise DecodeError(f"unexpected wire type {wire}")
        if i > n:
            raise DecodeError("truncated field")
        yield key >> 3, payload, b[start:i]


def _fields(b: bytes) -> _Fields:
    out = _Fields()
    i, n = 0, len(b)
    while i < n:
        key, i = _varint(b, i)
        num, wire = key >> 3, key & 7
        if wire == 0:
            v, i = _varint(b, i)
            out.ints.setdefault(num, []).append(v)
        elif wire == 1:
            i += 8
        elif wire == 2:
            size, i = _varint(b, i)
            if i + size > n:
                raise DecodeError("truncated field")
            out.blobs.setdefault(num, []).append(b[i : i + size])
            i += size
        elif wire == 5:
            i += 4
        else:
            raise DecodeError(f"unexpected wire type {wire}")
    if i != n:
        raise DecodeError("trailing bytes")
    return out


def decode_checked(serialized: bytes) -> Node:
    """The root expression of ``Expression.serialize()`` output."""
    wrapper = _fields(serialized)
    if not wrapper.text(1).endswith(_CHECKED_TYPE):
        raise DecodeError(f"not a {_CHECKED_TYPE}: {wrapper.text(1)!r}")
    checked = _fields(wrapper.blob(2) or b"")
    expr = checked.blob(4)
    if expr is None:
        raise DecodeError("CheckedExpr without expr")
    return _expr(expr, 0)


def _expr(b: bytes, depth: int) -> Node:
    if depth > _MAX_DEPTH:
        raise DecodeError("expression nested too deeply")
    f = _fields(b)
    d = depth + 1
    if (raw := f.blob(3)) is not None:
        const = _fields(raw)
        return Node("const", text=const.text(6) if 6 in const.blobs else None)
    if (raw := f.blob(4)) is not None:
        return Node("ident", name=_fields(raw).text(1))
    if (raw := f.blob(5)) is not None:
        sel = _fields(raw)
        operand = sel.blob(1)
        return Node(
            "select",
            name=sel.text(2),
            test_only=bool(sel.ints.get(3, [0])[-1]),
            target=_expr(operand, d) if operand is not None else None,
        )
    if (raw := f.blob(6)) is not None:
        call = _fields(raw)
        target = call.blob(1)
        return Node(
            "call",
            name=call.text(2),
            target=_expr(target, d) if target is not None else None,
            args=tuple(_expr(a, d) for a in call.blobs.get(3, [])),
        )
    if (raw := f.blob(7)) is not None:
        return Node("list", args=tuple(_expr(e, d) for e in _fields(raw).blobs.get(1, [])))
    if (raw := f.blob(8)) is not None:
        parts: list[Node] = []
        for entry in _fields(raw).blobs.get(2, []):
            e = _fields(entry)
            parts += [_expr(x, d) for x in (e.blob(3), e.blob(4)) if x is not None]
        return Node("struct", args=tuple(parts))
    if (raw := f.blob(9)) is not None:
        c = _fields(raw)

        def sub(num: int) -> tuple[Node, ...]:
            x = c.blob(num)
            return (_expr(x, d),) if x is not None else ()

        names = tuple(n for n in (c.text(1), c.text(8), c.text(3)) if n)
        result = sub(7)
        return Node(
            "comprehension",
            binds=names,
            accu=c.text(3),
            outer=(*sub(2), *sub(4)),
            inner=(*sub(5), *sub(6)),
            result=result[0] if result else None,
        )
    return Node("other")
