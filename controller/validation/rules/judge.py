"""Evaluate one compiled rule against one ``self``: conditions, expression, message.

Shared by inline and deferred evaluation so both phases mean the same thing by "pass".
Rules are fail-closed: an evaluation error or a non-bool result is a failure of the rule (at
its severity), never a silent pass. A failing messageExpression does not hide the failure;
the report falls back to a generic message and says why.

Text that comes from evaluation (a messageExpression's value, an evaluation error quoting a
value, an object's name) is attacker-influenced: an Ingress host can carry ESC sequences or
line breaks. Reports are printed on terminals, logged line by line and shown in CI
annotations, so such characters are escaped (``\\x1b``, ``\\n``, ``\\u2028``) before the
length cap, and a finding is always one line of inert text.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from cel_expr_python import cel

from controller.diagnostics import Diagnostic, Location, ObjectRef, Phase, RuleId, make
from controller.observability import escape_controls
from controller.validation.rules.cel import EvalError, Program, bind, evaluate
from controller.validation.rules.compiled import CompiledRule, OwnerKind
from controller.validation.rules.refs import reads_field

__all__ = [
    "LINES",
    "Judgement",
    "State",
    "judge",
    "output_value",
    "plain",
    "reads_lines",
    "split_lines",
]

_MAX_MESSAGE = 1024


def split_lines(content: str) -> list[str]:
    """Lines as HAProxy sees them: split at ``\\n`` only, without the empty string after a
    final newline. (``str.splitlines`` would also split at ``\\r``, form feeds and U+2028,
    where HAProxy sees one line, so a rule could be fooled about what a line holds.)"""
    lines = content.split("\n")
    if lines[-1] == "":
        lines.pop()
    return lines


class State(StrEnum):
    PASSED = "passed"
    FAILED = "failed"
    SKIPPED = "skipped"
    """A ``when`` (the block's or the rule's) was false."""


@dataclass(frozen=True, slots=True)
class Judgement:
    """What one rule found about one ``self``.

    A judgement without a diagnostic (nearly all of them) is one object per state
    (:func:`plain`): a deferred stage remembers one per rule and object, and one made per
    evaluation, or unpickled per object from the fork or worker that judged a batch, was
    about 150 bytes each, 4.5 MB for the quickstart's three Ingress rules at 10,000
    Ingresses. Pickled, such a judgement names its state, and comes back as the shared one."""

    state: State
    diagnostic: Diagnostic | None = None

    @property
    def blocking(self) -> bool:
        """A failure at error severity (what fails the owner and the verdict)."""
        return self.diagnostic is not None and self.diagnostic.severity.value in ("error", "fatal")

    def __reduce__(self) -> tuple[Any, ...]:
        if self.diagnostic is None:
            return (plain, (self.state.value,))
        return (Judgement, (self.state, self.diagnostic))


_PLAIN = {s.value: Judgement(s) for s in State}


_PASSED, _SKIPPED = _PLAIN[State.PASSED], _PLAIN[State.SKIPPED]


def plain(state: str) -> Judgement:
    """The one judgement of ``state`` (a :class:`State` or its value) without a diagnostic."""
    return _PLAIN[state]


LINES = "lines"


def reads_lines(rules: Iterable[CompiledRule]) -> bool:
    """Whether any of ``rules`` may read an output's ``lines`` (through ``outputs``, or as
    ``self`` of an output); when none can, outputs are converted without them."""
    return any(
        reads_field(r.refs.output_fields, LINES)
        or (r.owner.kind is OwnerKind.OUTPUT and reads_field(r.refs.self_fields, LINES))
        for r in rules
    )


def output_value(name: str, path: str, content: str, *, lines: bool = True) -> dict[str, Any]:
    """What ``self`` and ``outputs['<name>']`` look like for an output. ``lines=False`` only
    for rules that cannot read them (``refs.reads_field``): converting ``haproxy.cfg``'s
    12,000 lines at 1,000 Ingresses cost the evaluation about 3 ms that
    ``map-backends-exist``, which reads ``content``, never used."""
    value: dict[str, Any] = {"name": name, "path": path, "content": content}
    if lines:
        value[LINES] = split_lines(content)
    return value


def _condition(program: Program, data: cel.Activation, what: str) -> bool:
    value = evaluate(program, data)
    if not isinstance(value, bool):
        raise EvalError(f"{what} returned {type(value).__name__} {value!r}, not a bool")
    return value


def judge(
    rule: CompiledRule,
    data: Mapping[str, Any],
    *,
    location: Location | None = None,
    object: ObjectRef | None = None,
    subject: str = "",
) -> Judgement:
    """``subject`` names the object in messages (``default/echo``). Raises BudgetExceeded.

    The conditions, the expression and the message read one activation, so ``self`` is
    converted for the runtime once, not once per program."""
    title = rule.title + (f" on {escape_controls(subject)}" if subject else "")
    bound = bind(data)
    try:
        if rule.block_when is not None and not _condition(rule.block_when, bound, "block `when`"):
            return _SKIPPED
        if rule.when is not None and not _condition(rule.when, bound, "`when`"):
            return _SKIPPED
        value = evaluate(rule.expression, bound)
        if not isinstance(value, bool):
            raise EvalError(f"expression returned {type(value).__name__} {value!r}, not a bool")
    except EvalError as exc:
        rule_id: RuleId = "E5007" if rule.is_error else "W5008"
        text = f"{title}: could not be evaluated: {_capped(escape_controls(str(exc)))}"
        return Judgement(State.FAILED, _make(rule_id, text, location, object))
    if value:
        return _PASSED
    rule_id = "E5003" if rule.is_error else "W5004"
    text = f"{title}: {_message(rule, bound)}"
    return Judgement(State.FAILED, _make(rule_id, text, location, object))


def _message(rule: CompiledRule, data: cel.Activation) -> str:
    if rule.spec.message is not None:
        return rule.spec.message
    fallback = f"{rule.spec.expression.strip()} is false"
    if rule.message is None:
        return fallback
    try:
        value = evaluate(rule.message, data)
    except EvalError as exc:
        return f"{fallback} (messageExpression failed: {_capped(escape_controls(str(exc)))})"
    if not isinstance(value, str):
        return f"{fallback} (messageExpression returned {type(value).__name__}, not a string)"
    return _capped(escape_controls(value))


def _capped(text: str) -> str:
    return text if len(text) <= _MAX_MESSAGE else text[:_MAX_MESSAGE] + "…"


def _make(
    rule_id: RuleId, text: str, location: Location | None, object: ObjectRef | None
) -> Diagnostic:
    return make(rule_id, Phase.RULES, text, location=location, object=object)
