"""The small argument grammar the data files use, and what each value type means.

The data files describe a keyword's arguments as ``name:type`` items (``value:time``,
``algorithm:enum(a|b)``, ``params:str*``) instead of raw JSON Schema, because one line per
keyword keeps the HAProxy facts reviewable. Each type knows two things: the JSON Schema it
generates (what overlays then refine) and how to turn a configuration word into the JSON
value that schema judges. The conversion is lexical and forgiving on purpose: a word that is
not a number stays a string, so the *schema* reports the type error, and overlays see the same
values the bundled schema sees (times in milliseconds, sizes in bytes).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

Arity = Literal["1", "?", "*", "+"]

#: HAProxy rejects timers above 2^31-1 ms ("timer overflow ... ~24.8 days").
MAX_TIME_MS = 2147483647

_TIME_UNITS_MS = {"us": 0.001, "ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_TIME_RE = re.compile(r"^(\d+)(us|ms|s|m|h|d)?$")
_TIME_TRAILING_RE = re.compile(r"^(\d+(?:us|ms|s|m|h|d))(.+)$", re.DOTALL)
_INT_RE = re.compile(r"^[+-]?\d+$")
_SIZE_RE = re.compile(r"^(\d+)([kKmMgG])?$")
_SIZE_MULT = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3}


def timer_trailing(word: str) -> tuple[str, str] | None:
    """``("1s", "[")`` for ``1s[``: a timer with a unit, then characters HAProxy ignores.

    HAProxy's ``parse_time_err`` reads digits and a unit, then only *warns* about anything
    after the unit ("will be reported as an error in next versions", 2.6 to 3.0, verified
    against the 2.6 and 2.8 binaries); characters right after the digits are an error.
    None for every other word.
    """
    if _TIME_RE.match(word):
        return None
    m = _TIME_TRAILING_RE.match(word)
    return (m.group(1), m.group(2)) if m else None


class GrammarError(ValueError):
    """A data file uses a type or grammar this module does not know (a bug in the data)."""


@dataclass(frozen=True, slots=True)
class ValueType:
    """One value type: its JSON Schema and the lexical conversion of a word into JSON."""

    kind: str
    schema: dict[str, Any]
    convert: Callable[[str], Any]
    hint: str
    """How a valid value looks, for messages ("a time such as 5s or 250ms")."""


def _as_int(word: str) -> Any:
    return int(word) if _INT_RE.match(word) else word


def _time_converter(default_unit: str) -> Callable[[str], Any]:
    factor = _TIME_UNITS_MS[default_unit]

    def convert(word: str) -> Any:
        m = _TIME_RE.match(word)
        if not m:
            trailing = timer_trailing(word)
            if trailing is None:
                return word
            m = _TIME_RE.match(trailing[0])
            assert m is not None
        value = int(m.group(1)) * (_TIME_UNITS_MS[m.group(2)] if m.group(2) else factor)
        return int(value) if float(value).is_integer() else value

    return convert


def _as_size(word: str) -> Any:
    m = _SIZE_RE.match(word)
    if not m:
        return word
    return int(m.group(1)) * _SIZE_MULT[m.group(2).lower() if m.group(2) else ""]


def _identity(word: str) -> Any:
    return word


def _bounds(spec: str) -> tuple[int | None, int | None]:
    lo_s, _, hi_s = spec.partition("..")
    lo = int(lo_s) if lo_s.strip() else None
    hi = int(hi_s) if hi_s.strip() else None
    return lo, hi


def parse_type(expr: str) -> ValueType:
    """Parse a type expression such as ``int(0..256)``, ``time(s)`` or ``list(enum(a|b))``.

    A trailing ``!`` on a number type (``int(0..256)!``) says both real binaries refuse values
    outside its range; without it the range is only advice, because most HAProxy parsers read
    numbers with ``atoi`` and load whatever comes out (see ``x-checked`` in the engine).
    """
    expr = expr.strip()
    if expr.endswith("!"):
        base = parse_type(expr[:-1])
        if base.kind not in ("int", "size"):
            raise GrammarError(f"'!' only applies to number types: {expr!r}")
        return ValueType(base.kind, {**base.schema, "x-checked": True}, base.convert, base.hint)
    name, paren, rest = expr.partition("(")
    inner = rest[:-1] if paren else ""
    if paren and not rest.endswith(")"):
        raise GrammarError(f"unbalanced type expression {expr!r}")
    if name == "str":
        return ValueType("str", {"type": "string"}, _identity, "a word")
    if name in ("int", "uint"):
        lo, hi = _bounds(inner) if inner else ((0, None) if name == "uint" else (None, None))
        schema: dict[str, Any] = {"type": "integer"}
        if lo is not None:
            schema["minimum"] = lo
        if hi is not None:
            schema["maximum"] = hi
        return ValueType("int", schema, _as_int, "an integer")
    if name in ("time", "ptime"):
        unit = inner or "ms"
        if unit not in _TIME_UNITS_MS:
            raise GrammarError(f"unknown time unit in {expr!r}")
        schema = {"type": "number", "maximum": MAX_TIME_MS, "x-unit": "ms"}
        schema["exclusiveMinimum" if name == "ptime" else "minimum"] = 0
        if unit != "ms":
            schema["x-default-unit"] = unit
        hint = "a time such as 5s or 250ms" + (
            f" (plain numbers are {unit})" if unit != "ms" else ""
        )
        return ValueType("time", schema, _time_converter(unit), hint)
    if name == "size":
        return ValueType(
            "size", {"type": "integer", "minimum": 0, "x-unit": "bytes"}, _as_size, "a size"
        )
    if name == "enum":
        values = inner.split("|")
        return ValueType(
            "enum", {"type": "string", "enum": values}, _identity, "one of " + ", ".join(values)
        )
    if name == "re":
        re.compile(inner)
        return ValueType("re", {"type": "string", "pattern": inner}, _identity, "a valid value")
    if name == "list":
        item = parse_type(inner)

        def convert(word: str) -> Any:
            return [item.convert(part) for part in word.split(",")]

        return ValueType(
            "list",
            {"type": "array", "items": item.schema, "minItems": 1},
            convert,
            f"a comma-separated list of {item.hint}",
        )
    raise GrammarError(f"unknown type {expr!r}")


@dataclass(frozen=True, slots=True)
class ArgSpec:
    """One positional argument of a keyword."""

    name: str
    type: ValueType
    arity: Arity

    @property
    def required(self) -> bool:
        return self.arity in ("1", "+")

    @property
    def many(self) -> bool:
        return self.arity in ("*", "+")

    def schema(self) -> dict[str, Any]:
        if not self.many:
            return dict(self.type.schema)
        out: dict[str, Any] = {"type": "array", "items": dict(self.type.schema)}
        if self.arity == "+":
            out["minItems"] = 1
        return out


def parse_args(grammar: str) -> tuple[ArgSpec, ...]:
    """Parse ``"name:type name:type? rest:str*"``; only the last item may repeat.

    Items are separated by single spaces; type expressions never contain spaces.
    """
    specs: list[ArgSpec] = []
    for item in grammar.split():
        name, sep, type_expr = item.partition(":")
        if not sep:
            raise GrammarError(f"argument {item!r} lacks a type")
        arity: Arity = "1"
        if type_expr[-1:] in ("?", "*", "+"):
            arity = type_expr[-1]  # type: ignore[assignment]
            type_expr = type_expr[:-1]
        specs.append(ArgSpec(name, parse_type(type_expr), arity))
    for spec in specs[:-1]:
        if spec.many:
            raise GrammarError(f"only the last argument may repeat in {grammar!r}")
    seen_optional = False
    for spec in specs:
        if spec.arity == "?":
            seen_optional = True
        elif spec.arity in ("1", "+") and seen_optional:
            raise GrammarError(f"a required argument follows an optional one in {grammar!r}")
    return tuple(specs)


@dataclass(frozen=True, slots=True)
class OptionSpec:
    """One ``bind``/``server``/``cookie`` option: a flag or a word that takes one value."""

    name: str
    type: ValueType | None
    """None for a flag."""
    repeat: bool = False
    """The option may be given several times; its value is then a list."""

    def schema(self) -> dict[str, Any]:
        if self.type is None:
            return {"const": True}
        if self.repeat:
            return {"type": "array", "items": dict(self.type.schema), "minItems": 1}
        return dict(self.type.schema)


def parse_option_type(name: str, expr: str) -> OptionSpec:
    if expr == "flag":
        return OptionSpec(name, None)
    repeat = expr.endswith("[]")
    return OptionSpec(name, parse_type(expr[:-2] if repeat else expr), repeat)
