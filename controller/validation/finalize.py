"""Turning raw stage findings into the report's diagnostics.

The order is fixed — strict, filters, severity gate, sort, dedupe, one finding per cause
(``controller.validation.collapse``; and then ``rules``-phase findings back in judging order,
root causes first) — so that a filter sees a
warning that strict mode has already promoted (``--strict --exclude W3001`` drops it), and the
gate never has to guess whether a promoted warning is an error. Everything removed is counted,
so a report always says how much it is not showing.

``disableBuiltinRules`` is a filter too: it removes the findings of the built-in rules
(phases ``syntax`` and ``schema``), within the same protection.

Some findings cannot be filtered away, because removing them would let bytes deploy that were
never proven valid (see docs/report.md): fatal findings, analysis-incomplete records, and
error-level findings of the ``syntax`` phase (the directive policy has its own allow-list,
``policy.allowDirectives``) and of the ``haproxy`` phase (HAProxy's own refusal).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from controller.diagnostics import Diagnostic, Phase, Severity
from controller.validation.collapse import collapse
from controller.validation.options import ValidationOptions

__all__ = ["Finalized", "blocking", "finalize", "is_protected", "promote"]

_PROTECTED_PHASES = frozenset({Phase.SYNTAX, Phase.HAPROXY})
_BUILTIN_PHASES = frozenset({Phase.SYNTAX, Phase.SCHEMA})
"""The built-in rules: our own reading of HAProxy's rules (parser, policy, file references,
version schemas) — not HAProxy's verdict, the spec's CEL rules or the external validators."""
_ANALYSIS_INCOMPLETE = "E0002"


@dataclass(frozen=True, slots=True)
class Finalized:
    diagnostics: list[Diagnostic]
    suppressed: int


def is_protected(d: Diagnostic) -> bool:
    """True for findings no filter may remove; judged on the id, not a promoted severity."""
    declared = Severity.from_prefix(d.rule_id)
    if declared is Severity.FATAL or d.rule_id == _ANALYSIS_INCOMPLETE:
        return True
    return declared is Severity.ERROR and d.phase in _PROTECTED_PHASES


def promote(d: Diagnostic) -> Diagnostic:
    """Strict mode: a warning becomes an error but keeps its id, so filters and docs still
    find it; ``severity`` then differs from the id's prefix, which is how a reader tells."""
    if d.severity is Severity.WARNING:
        return d.model_copy(update={"severity": Severity.ERROR})
    return d


def _filtered(diagnostics: Iterable[Diagnostic], options: ValidationOptions) -> list[Diagnostic]:
    out: list[Diagnostic] = []
    for d in diagnostics:
        if options.strict:
            d = promote(d)
        if is_protected(d) or (
            not (options.disable_builtin_rules and d.phase in _BUILTIN_PHASES)
            and options.included(d)
            and not options.excluded(d)
        ):
            out.append(d)
    return out


def blocking(diagnostics: Sequence[Diagnostic], options: ValidationOptions) -> bool:
    """Does this stage's outcome stop the pipeline? Decided after strict and filters, so an
    excluded finding never stops later stages (they must still vouch for the bytes)."""
    return any(d.severity.rank <= Severity.ERROR.rank for d in _filtered(diagnostics, options))


_PHASE_RANK = {p: i for i, p in enumerate(Phase)}


def _order(d: Diagnostic) -> tuple[object, ...]:
    # The model's key covers what a reader sorts by, with pipeline order of the phases
    # before the message (so "stage schema skipped" precedes "stage haproxy skipped"); the
    # JSON breaks the remaining ties so two runs over one input print identical reports.
    severity, file, line, column, rule, message = d.sort_key()
    return (severity, file, line, column, rule, _PHASE_RANK[d.phase], message, d.model_dump_json())


_JUDGEMENTS = frozenset(
    {"E0002", "E5003", "W5004", "E5005", "W5006", "E5007", "W5008", "I5010", "I5011"}
)
"""What evaluating CEL rules reports (failures, fail-closed, cycles, cascades, budget), as
opposed to what compiling them reports (E5001/E5002/E5009), which is sorted by line."""


def _rules_in_judging_order(unique: list[tuple[int, Diagnostic]]) -> list[Diagnostic]:
    """Put the findings of rule evaluation back in the order they were given, within the
    slots the generic sort gave them among their own severity.

    CEL rules are judged in plan order — dependencies first (Tarjan over the deferred
    references), after the inline rules in render order — so a root cause is judged, and
    emitted, before the rules that read it. Sorting by file would put ``a.map``'s echo before
    ``z.map``'s root cause; this restores cause before effect, and stays deterministic
    because the plan and the render order are. Everything else keeps the generic order, and
    severity grouping is kept for everyone.
    """
    slots: dict[Severity, list[int]] = {}
    for pos, (_, d) in enumerate(unique):
        if d.phase is Phase.RULES and d.rule_id in _JUDGEMENTS:
            slots.setdefault(d.severity, []).append(pos)
    out = [d for _, d in unique]
    for positions in slots.values():
        given = sorted((unique[p] for p in positions), key=lambda pair: pair[0])
        for pos, (_, d) in zip(positions, given, strict=True):
            out[pos] = d
    return out


def finalize(diagnostics: Iterable[Diagnostic], options: ValidationOptions) -> Finalized:
    given = list(diagnostics)
    kept = _filtered(given, options)
    # The gate never hides an error: the strictest level it honours is "error".
    gate = max(options.severity_level.rank, Severity.ERROR.rank)
    kept = [d for d in kept if d.severity.rank <= gate or is_protected(d)]
    # The sort is stable, so of two identical findings the first given is kept.
    keyed = sorted(((_order(d), i, d) for i, d in enumerate(kept)), key=lambda t: t[0])
    unique: list[tuple[int, Diagnostic]] = []
    last: object = None
    for key, i, d in keyed:
        text = key[-1]
        if text != last:
            unique.append((i, d))
            last = text
    suppressed = len(given) - len(unique)
    # One finding per cause: what a loop repeated, and what HAProxy said again, is folded
    # into one finding that counts its rendered lines (not suppressed: it is still shown).
    positions, collapsed = collapse([d for _, d in unique])
    folded = [(unique[p][0], d) for p, d in zip(positions, collapsed, strict=True)]
    if len(folded) < len(unique):  # a merged finding may now sit at another line
        folded.sort(key=lambda pair: _order(pair[1]))
    unique = folded
    return Finalized(_rules_in_judging_order(unique), suppressed)
