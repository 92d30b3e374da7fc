"""Inline rules: those that read only ``self``, judged the moment their owner exists.

For an output that is right after it rendered, through the renderer's ``after_output`` hook:
an error there fails the output and the renderer skips everything that depends on it, naming
this failure as the root cause. For a watched object it is before any render — admission
judges the proposed object alone, and the render-calling code judges the loaded objects
first (:func:`check_objects`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from controller.diagnostics import Diagnostic, Location, ObjectRef, Phase, make
from controller.render import RenderedOutput
from controller.resources import object_ref
from controller.validation.report import BudgetExhaustion, RuleCounters
from controller.validation.rules.budget import (
    Isolation,
    RunBudget,
    execute,
    is_cheap,
    iteration_exhaustion,
)
from controller.validation.rules.cel import BudgetExceeded, to_cel
from controller.validation.rules.compiled import CompiledRule, RuleSet
from controller.validation.rules.judge import State, judge, output_value

__all__ = ["Batch", "InlineRules", "budget_diagnostic", "check_objects", "subject_of"]


@dataclass
class Batch:
    """What one batch of judgements found (picklable: it may come from a worker)."""

    diagnostics: list[Diagnostic] = field(default_factory=list)
    counters: RuleCounters = field(default_factory=RuleCounters)
    exhausted: BudgetExhaustion | None = None


def subject_of(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata")
    if not isinstance(meta, Mapping):
        return "(unnamed)"
    ns, name = meta.get("namespace"), meta.get("name")
    return f"{ns}/{name}" if ns else str(name)


def _ref(obj: Mapping[str, Any]) -> ObjectRef | None:
    try:
        return object_ref(obj)
    except Exception:
        return None


def budget_diagnostic(where: str, exhausted: BudgetExhaustion) -> Diagnostic:
    used = f", used {exhausted.used:g}" if exhausted.used is not None else ""
    return make(
        "E0002",
        Phase.RULES,
        f"{where} ran out of the {exhausted.budget} budget (limit {exhausted.limit:g}{used}); "
        "not proven valid",
    )


def judge_many(
    rules: Sequence[CompiledRule],
    selves: Sequence[tuple[dict[str, Any], str, ObjectRef | None]],
    extra: Mapping[str, Any],
    location: Location | None,
) -> Batch:
    """Every rule against every ``self``; one counter unit per rule."""
    batch = Batch()
    evaluated = skipped = failed = 0
    for rule in rules:
        judged = 0
        rule_failed = False
        for value, subject, ref in selves:
            data = {"self": value, **extra}
            try:
                j = judge(rule, data, location=location, object=ref, subject=subject)
            except BudgetExceeded:
                judged += 1
                if batch.exhausted is None:
                    batch.exhausted = iteration_exhaustion()
                    batch.diagnostics.append(
                        budget_diagnostic(
                            rule.title + (f" on {subject}" if subject else ""), batch.exhausted
                        )
                    )
                continue
            if j.state is State.SKIPPED:
                continue
            judged += 1
            if j.diagnostic is not None:
                rule_failed = True
                batch.diagnostics.append(j.diagnostic)
        if judged or not selves:
            evaluated += 1
            failed += rule_failed
        else:
            skipped += 1
    batch.counters = RuleCounters(evaluated=evaluated, failed=failed, skipped=skipped)
    return batch


class InlineRules:
    """The ``after_output`` hook of one render: a fresh budget per render."""

    def __init__(
        self,
        ruleset: RuleSet,
        *,
        budget: RunBudget | None = None,
        isolation: Isolation = Isolation.AUTO,
    ) -> None:
        self.ruleset = ruleset
        self.budget = budget or RunBudget()
        self.isolation = isolation
        self.counters = RuleCounters()

    def __call__(self, name: str, out: RenderedOutput) -> list[Diagnostic]:
        owner = self.ruleset.outputs.get(name)
        rules = self.ruleset.inline_for(owner) if owner is not None else ()
        if not rules:
            return []
        location = Location(file=out.path)
        selves = [(output_value(name, out.path, out.content), "", None)]
        batch = execute(
            lambda: judge_many(rules, selves, {}, location),
            cheap=is_cheap(rules, len(rules)),
            budget=self.budget,
            isolation=self.isolation,
        )
        if batch is None:
            assert self.budget.exhausted is not None
            diag = budget_diagnostic(f"inline rules of {name}", self.budget.exhausted)
            return [diag.model_copy(update={"location": location})]
        self._count(batch)
        if batch.exhausted is not None and self.budget.exhausted is None:
            self.budget.exhausted = batch.exhausted
        return batch.diagnostics

    def _count(self, batch: Batch) -> None:
        c, b = self.counters, batch.counters
        self.counters = RuleCounters(
            evaluated=c.evaluated + b.evaluated,
            failed=c.failed + b.failed,
            skipped=c.skipped + b.skipped,
        )


def check_objects(
    ruleset: RuleSet,
    objects: Mapping[str, Iterable[Mapping[str, Any]]],
    *,
    budget: RunBudget | None = None,
    isolation: Isolation = Isolation.AUTO,
) -> Batch:
    """Inline rules of watched collections over ``objects`` (collection → objects).

    Admission passes the one proposed object; the render-calling code passes every stored
    object before it renders. Collections without inline rules are not read at all.
    """
    budget = budget or RunBudget()
    total = Batch()
    for name in sorted(objects):
        owner = ruleset.collections.get(name)
        rules = ruleset.inline_for(owner) if owner is not None else ()
        if not rules:
            continue
        selves = [(to_cel(o), subject_of(o), _ref(o)) for o in objects[name]]
        result = execute(
            lambda rules=rules, selves=selves: judge_many(rules, selves, {}, None),  # type: ignore[misc]
            cheap=is_cheap(rules, len(rules) * len(selves)),
            budget=budget,
            isolation=isolation,
        )
        if result is None:
            assert budget.exhausted is not None
            total.diagnostics.append(
                budget_diagnostic(f"inline rules of collection {name}", budget.exhausted)
            )
            total.exhausted = total.exhausted or budget.exhausted
            break
        total.diagnostics.extend(result.diagnostics)
        total.exhausted = total.exhausted or result.exhausted
        c, b = total.counters, result.counters
        total.counters = RuleCounters(
            evaluated=c.evaluated + b.evaluated,
            failed=c.failed + b.failed,
            skipped=c.skipped + b.skipped,
        )
    return total
