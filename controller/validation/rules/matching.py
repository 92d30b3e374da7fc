"""CEL's ``matches()`` without compiling its pattern again on every call.

The runtime's own ``matches`` compiles its RE2 pattern at each call: 20-30 µs for the
quickstart's host-name pattern, most of what an inline Ingress rule costs (about a second of
CPU at 10,000 Ingresses, half the default rule budget). The binding leaves the runtime's
regex precompilation off and has no option to turn it on, and the standard function cannot
be replaced: the runtime registers it whatever the checker was told. So each compiled
program is rewritten instead (:func:`rewritten`): every call of ``matches`` in the checked
tree is renamed to :data:`FUNCTION`, a name the parser cannot produce, so no rule can call
it directly, and that function keeps compiled patterns in a bounded cache. Node ids, hence
the source positions of the checked tree, are left as they were.

Its answers must be the runtime's, errors included, so the runtime stays the judge of every
pattern. The first time a pattern is seen the real ``matches`` is evaluated once
(:data:`_REFERENCE`): a pattern it refuses (bad syntax, backreferences, lookaround, too
large) gets that error, word for word, on every call. A pattern it accepts is run by the
``re2`` module — the same engine, another build — only when nothing in it depends on what
can differ between the two builds or on that module's own pattern translation: ASCII only,
no Unicode classes (``\\p``: their tables follow the Unicode version), no ``\\C`` (one byte),
and a pattern the module hands to RE2 unchanged. Any other pattern, and any text the module
cannot encode, goes to the real ``matches`` for that call: the same answer at the old cost.
Either way the engine is RE2, so a match takes time linear in the text.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import re2
from cel_expr_python import cel

from controller.validation.rules import deadline
from controller.validation.rules.checked import DecodeError, records

__all__ = ["FUNCTION", "as_written", "declaration", "matches", "rewritten"]

FUNCTION = "@htc.matches"
"""Not an identifier, so only :func:`rewritten` can put it into a program."""

_STANDARD = "matches"
_OVERLOADS = {"matches_string": "htc_matches_member", "matches": "htc_matches_global"}
"""The standard overload ids (member ``s.matches(p)``, global ``matches(s, p)``) and ours."""

_MAX_PATTERNS = 64
_MAX_PATTERN_MEMORY = 1 << 20
"""Bytes RE2 may use for one pattern of the cache. A pattern that does not fit is not
compiled here (it goes to the runtime's ``matches``); a search whose automaton outgrows it
continues in RE2's slower linear-time mode, with the same result."""

_MAX_CACHED_PATTERN = 4096
"""Characters of the longest pattern kept (a constant one is at most an expression long);
a longer one, which only an object can supply, goes to the runtime's ``matches`` as
before, so that the cache never holds large strings."""

_LONG_TEXT = 256
"""Characters past which a call looks at the deadline first (``deadline.py``). Shorter
texts cost about a microsecond each, no more than reading the clock; their number is bounded
by the expression's size times its input, which ``budget.py`` charges."""

_UNPORTABLE = re.compile(r"\\[pPC]")
"""Escapes whose meaning may differ between two RE2 builds (Unicode tables) or is
byte-level; ``\\\\p`` (an escaped backslash then ``p``) is caught too, which only costs speed."""

_STATUS = re.compile(r"^[A-Z_]+: ")

_REFERENCE_ENV = cel.NewEnv(variables={"text": cel.Type.STRING, "pattern": cel.Type.STRING})
_REFERENCE = _REFERENCE_ENV.compile("text.matches(pattern)")
"""The runtime's own ``matches``, in an environment of the standard library alone."""


def _reference(text: str, pattern: str) -> bool:
    """What the runtime's ``matches`` says, its error raised as this function's own: the
    binding prefixes a status to both, which error messages strip (``cel._clean``)."""
    value = _REFERENCE.eval(data={"text": text, "pattern": pattern})
    if value.type() == cel.Type.ERROR:
        raise ValueError(_STATUS.sub("", str(value.value()), count=1))
    return bool(value.plain_value())


@dataclass(frozen=True, slots=True)
class _Plan:
    """How calls with one pattern are answered."""

    compiled: Any = None
    """The ``re2`` pattern when calls may use it; None sends them to the runtime."""
    error: str | None = None
    """The runtime's error for this pattern, raised on every call."""


@lru_cache(maxsize=_MAX_PATTERNS)
def _plan(pattern: str) -> _Plan:
    try:
        _reference("", pattern)
    except ValueError as exc:
        # The runtime compiles the pattern before it looks at the text: its refusal holds
        # for every text.
        return _Plan(error=str(exc))
    if not pattern.isascii() or _UNPORTABLE.search(pattern):
        return _Plan()
    try:
        raw = pattern.encode()
        if re2._prepare_pattern(raw, re2.ASCII) != raw:
            return _Plan()
        compiled = re2.compile(pattern, re2.ASCII, _MAX_PATTERN_MEMORY)
    except Exception:
        return _Plan()
    # The module hands what RE2 refuses to Python's backtracking engine; never used here.
    return _Plan(compiled=compiled if isinstance(compiled, re2.Pattern) else None)


def matches(text: str, pattern: str) -> bool:
    """The runtime's ``matches(text, pattern)``: RE2 partial match, same answers, same
    errors."""
    if len(pattern) > _MAX_CACHED_PATTERN:
        return _reference(text, pattern)
    plan = _plan(pattern)
    if plan.error is not None:
        raise ValueError(plan.error)
    if len(text) > _LONG_TEXT:
        deadline.check()
    if plan.compiled is not None:
        try:
            return plan.compiled.search(text) is not None
        except UnicodeError:
            pass  # a lone surrogate; the runtime decides what that text is
    return _reference(text, pattern)


_NO_OVERLOAD = "No matching overloads found : "


def as_written(message: str) -> str:
    """An evaluation error as the rule's author wrote the call: the runtime names the called
    function when no overload takes the arguments (``matches`` on a number, from a hostile
    object), and that name is ours after the rewrite. Such a message holds type names only,
    so the swap cannot touch anything an object wrote."""
    if message.startswith(_NO_OVERLOAD) and FUNCTION in message:
        return message.replace(FUNCTION, _STANDARD)
    return message


def declaration() -> cel.FunctionDecl:
    """:data:`FUNCTION` with the standard function's two signatures."""
    string = cel.Type.STRING
    return cel.FunctionDecl(
        FUNCTION,
        [
            cel.Overload(
                _OVERLOADS["matches_string"],
                cel.Type.BOOL,
                [string, string],
                is_member=True,
                impl=matches,
            ),
            cel.Overload(_OVERLOADS["matches"], cel.Type.BOOL, [string, string], impl=matches),
        ],
    )


# --- the rewrite -----------------------------------------------------------------------
# Field numbers (cel/expr/checked.proto, syntax.proto): Any value 2; CheckedExpr
# reference_map 2 (entry value 2), expr 4; Reference name 1, overload_id 3; Expr select 5,
# call 6, list 7, struct 8, comprehension 9; Select operand 1; Call target 1, function 2,
# args 3; CreateList elements 1; CreateStruct entries 2 (Entry map_key 3, value 4);
# Comprehension iter_range 2, accu_init 4, loop_condition 5, loop_step 6, result 7.

_Edit = Callable[[bytes], bytes]


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        low, value = value & 0x7F, value >> 7
        if not value:
            out.append(low)
            return bytes(out)
        out.append(low | 0x80)


def _field(number: int, payload: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _message(edits: dict[int, _Edit]) -> _Edit:
    """Rewrites the length-delimited fields named in ``edits`` and copies the rest."""

    def edit(b: bytes) -> bytes:
        out = bytearray()
        for number, payload, raw in records(b):
            fix = edits.get(number)
            out += _field(number, fix(payload)) if fix is not None and payload is not None else raw
        return bytes(out)

    return edit


def _rename(old: bytes, new: bytes) -> _Edit:
    return lambda b: new if b == old else b


def _expr(b: bytes) -> bytes:
    return _EXPR(b)


def _overload(b: bytes) -> bytes:
    found = _OVERLOADS.get(b.decode("utf-8", "replace"))
    return found.encode() if found is not None else b


_EXPR = _message(
    {
        5: _message({1: _expr}),
        6: _message({1: _expr, 2: _rename(_STANDARD.encode(), FUNCTION.encode()), 3: _expr}),
        7: _message({1: _expr}),
        8: _message({2: _message({3: _expr, 4: _expr})}),
        9: _message({2: _expr, 4: _expr, 5: _expr, 6: _expr, 7: _expr}),
    }
)
_REFERENCE_ENTRY = _message(
    {2: _message({1: _rename(_STANDARD.encode(), FUNCTION.encode()), 3: _overload})}
)
_CHECKED = _message({2: _REFERENCE_ENTRY, 4: _EXPR})
_ANY = _message({2: _CHECKED})


def rewritten(env: cel.Env, expression: cel.Expression) -> cel.Expression:
    """``expression`` with its ``matches`` calls answered by :func:`matches`; unchanged
    when it has none, or when the checked tree cannot be rewritten (then it is merely as
    slow as before)."""
    data = expression.serialize()
    if _STANDARD.encode() not in data:
        return expression
    try:
        changed = _ANY(data)
    except (DecodeError, RecursionError):
        return expression
    if changed == data:
        return expression
    try:
        return env.deserialize(changed)
    except Exception:
        return expression
