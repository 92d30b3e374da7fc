"""The CEL environment rules are compiled in, and the conversions in and out of it.

One environment declares the four rule variables (``self``, ``outputs``, ``resources``,
``extraContext``) as ``dyn``, with the strings, math, encoders and optional extensions
(the ones Kubernetes authors know from ValidatingAdmissionPolicy), and the ``sets`` and
``regex.extractAll`` functions of ``natives.py``, which let rules scale past the iteration
budget. Every compiled program has its ``matches`` calls answered by ``matching.py``, which
compiles each pattern once instead of at every call. The bindings extension is
left out on purpose: ``cel.bind`` builds values without iterating, so the runtime's iteration
budget would not bound it.

Probe environments leave out one variable each. The checker then answers "does this
expression reference ``outputs``?" with an undeclared-reference error — a proof from the
checker itself, which the syntax-tree walk in ``refs.py`` only refines (see ``classify.py``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

from cel_expr_python import cel
from cel_expr_python.ext import ext_encoders, ext_math, ext_optional, ext_strings

from controller.resources import FrozenDict
from controller.validation.rules import matching, natives
from controller.validation.rules.refs import VARIABLES

__all__ = [
    "ITERATION_BUDGET",
    "MAX_EXPRESSION_LENGTH",
    "BudgetExceeded",
    "CompileError",
    "EvalError",
    "Program",
    "bind",
    "compile_expression",
    "compiles_in",
    "evaluate",
    "full_env",
    "probe_env",
    "to_cel",
]

ITERATION_BUDGET = 10_000
"""Loop iterations the runtime allows one evaluation (all comprehensions together). The
binding fixes it; it is not configurable. Measured: a 9,999-element ``all()`` passes, 10,000
fails with "Iteration budget exceeded"."""

MAX_EXPRESSION_LENGTH = 4096
"""Characters per expression. With the parser's nesting limit (32) this bounds the work of a
loop-free expression to a few thousand operations on the inputs."""

_BUDGET_MESSAGE = "Iteration budget exceeded"
_LOCATION = re.compile(r"<input>:(-?\d+):(-?\d+): ")
_STATUS = re.compile(r" \[[A-Z_]+\]$")
_INT64 = (-(2**63), 2**63 - 1)
_MAPPINGS: frozenset[type[Any]] = frozenset((dict, FrozenDict))


class CompileError(ValueError):
    """The expression does not parse or type-check; ``line``/``column`` are 1-based."""

    def __init__(self, message: str, line: int | None = None, column: int | None = None) -> None:
        super().__init__(message)
        self.message, self.line, self.column = message, line, column


class BudgetExceeded(RuntimeError):
    """The runtime's iteration budget ran out during one evaluation."""


def _extensions() -> list[cel.CelExtensionBase]:
    return [
        ext_strings.ExtStrings(),
        ext_math.ExtMath(),
        ext_encoders.ExtEncoders(),
        ext_optional.ExtOptional(),
        natives.extension(),
        cel.CelExtension("htc.matches", [matching.declaration()]),
    ]


@cache
def _env(declared: frozenset[str]) -> cel.Env:
    return cel.NewEnv(
        variables={v: cel.Type.DYN for v in sorted(declared)}, extensions=_extensions()
    )


def full_env() -> cel.Env:
    return _env(frozenset(VARIABLES))


def probe_env(without: str) -> cel.Env:
    """The environment minus one variable."""
    return _env(frozenset(VARIABLES) - {without})


@dataclass(frozen=True)
class Program:
    """A checked expression and what the checker knows about its result."""

    source: str
    expression: cel.Expression
    result_type: str
    """The checker's type name: BOOL, STRING, DYN, …"""

    def __reduce__(self) -> tuple[Any, tuple[str, bytes, str]]:
        """Pickled as the binding serializes the checked expression: the evaluation worker
        (``pool.py``) receives a rule set's programs this way, once per worker."""
        return (_program, (self.source, self.expression.serialize(), self.result_type))


def _program(source: str, checked: bytes, result_type: str) -> Program:
    """A :class:`Program` of :func:`full_env` from its serialized form (every stored rule's
    program is compiled there, so its functions resolve the same way)."""
    return Program(source, full_env().deserialize(checked), result_type)


def _clean(text: str) -> tuple[str, int | None, int | None]:
    """The checker's first error, without the status prefix and suffix, the ``<input>:L:C:``
    position (returned separately; the parser writes -1:-1 when it has none) and the
    source excerpt."""
    first = text.strip().splitlines()[0] if text.strip() else "invalid expression"
    first = re.sub(r"^[A-Z_]+: ", "", first)
    first = re.sub(r"^ERROR: ", "", first)
    first = _STATUS.sub("", first)
    m = _LOCATION.search(first)
    if m is None:
        return first, None, None
    msg = (first[: m.start()] + first[m.end() :]).strip() or "invalid expression"
    line, column = int(m.group(1)), int(m.group(2))
    if line < 1 or column < 1:
        return msg, None, None
    return msg, line, column


def compile_expression(
    source: str, env: cel.Env | None = None, *, limit: int | None = MAX_EXPRESSION_LENGTH
) -> Program:
    """``limit=None`` only for programs built from rules that each passed the limit."""
    if limit is not None and len(source) > limit:
        raise CompileError(
            f"expression is {len(source)} characters long; the limit is {MAX_EXPRESSION_LENGTH}"
        )
    try:
        expr = (env or full_env()).compile(source)
    except Exception as exc:
        msg, line, column = _clean(str(exc))
        raise CompileError(msg, line, column) from None
    return Program(source, matching.rewritten(env or full_env(), expr), expr.return_type().name())


def compiles_in(source: str, env: cel.Env) -> bool:
    try:
        env.compile(source)
    except Exception:
        return False
    return True


class EvalError(ValueError):
    """Evaluation produced a CEL error value (missing key, bad index, division by zero)."""


def bind(data: Mapping[str, Any]) -> cel.Activation:
    """``data`` for several evaluations: the runtime converts a variable's value when an
    evaluation first reads it, once per activation, where each evaluation of a plain
    mapping converts it again (about 10 µs for an Ingress). Programs of :func:`full_env`
    only (every rule's)."""
    return full_env().Activation(data=data)


def evaluate(program: Program, data: Mapping[str, Any] | cel.Activation) -> Any:
    """The plain Python result. Raises :class:`EvalError` or :class:`BudgetExceeded`."""
    try:
        if isinstance(data, cel.Activation):
            value = program.expression.eval(activation=data)
        else:
            value = program.expression.eval(data=data)
    except Exception as exc:
        text = str(exc)
        if _BUDGET_MESSAGE in text:
            raise BudgetExceeded(text) from None
        raise EvalError(matching.as_written(_clean(text)[0])) from None
    if value.type() == cel.Type.ERROR:
        raise EvalError(matching.as_written(_clean(str(value.value()))[0]))
    return value.plain_value()


def to_cel(value: Any) -> Any:
    """JSON-like data the binding accepts: dicts, lists, str, int64, float, bool, None.

    Stored objects are frozen (dict subclasses and tuples), which the binding refuses, and an
    integer outside int64 would overflow; both are converted here once per evaluation batch.
    The common shapes (plain and frozen dicts, tuples, lists, strings) are dispatched on their
    exact type first: this runs for every object a rule judges, 10,000 per cold run.
    """
    tp = type(value)
    if tp is str or tp is bool or value is None:
        return value
    if tp in _MAPPINGS:
        return {
            (k if type(k) is str else str(k)): (v if type(v) is str else to_cel(v))
            for k, v in value.items()
        }
    if tp is tuple or tp is list:
        return [v if type(v) is str else to_cel(v) for v in value]
    return _to_cel_slow(value)


def _to_cel_slow(value: Any) -> Any:
    if value is None or isinstance(value, bool | str | bytes):
        return value
    if isinstance(value, int):
        return value if _INT64[0] <= value <= _INT64[1] else float(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, Mapping):
        return {str(k): to_cel(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [to_cel(v) for v in value]
    return str(value)
