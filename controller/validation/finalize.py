"""Turning raw stage findings into the report's diagnostics.

The order is fixed — strict, filters, severity gate, sort, dedupe — so that a filter sees a
warning that strict mode has already promoted (``--strict --exclude W3001`` drops it), and the
gate never has to guess whether a promoted warning is an error. Everything removed is counted,
so a report always says how much it is not showing.

Some findings cannot be filtered away, because removing them would let bytes deploy that were
never proven valid (see docs/report.md): fatal findings, analysis-incomplete records, and
error-level findings of the ``syntax`` phase (the directive policy has its own allow-list,
``policy.allowDirectives``) and of the ``haproxy`` phase (HAProxy's own refusal).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from controller.diagnostics import Diagnostic, Phase, Severity
from controller.validation.options import ValidationOptions

__all__ = ["Finalized", "blocking", "finalize", "is_protected", "promote"]

_PROTECTED_PHASES = frozenset({Phase.SYNTAX, Phase.HAPROXY})
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
        if is_protected(d) or (options.included(d) and not options.excluded(d)):
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


def finalize(diagnostics: Iterable[Diagnostic], options: ValidationOptions) -> Finalized:
    given = list(diagnostics)
    kept = _filtered(given, options)
    # The gate never hides an error: the strictest level it honours is "error".
    gate = max(options.severity_level.rank, Severity.ERROR.rank)
    kept = [d for d in kept if d.severity.rank <= gate or is_protected(d)]
    keyed = sorted(((_order(d), d) for d in kept), key=lambda pair: pair[0])
    unique: list[Diagnostic] = []
    last: object = None
    for key, d in keyed:
        text = key[-1]
        if text != last:
            unique.append(d)
            last = text
    return Finalized(unique, len(given) - len(unique))
