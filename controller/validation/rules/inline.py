"""Inline rules: those that read only ``self``, judged the moment their owner exists.

For an output that is right after it rendered, through the renderer's ``after_output`` hook:
an error there fails the output and the renderer skips everything that depends on it, naming
this failure as the root cause. For a watched object it is before any render: the render-calling code judges the loaded
objects first (:func:`check_objects`), and the admission webhook — a later issue — is to
judge a proposed object alone with the same function.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from controller.diagnostics import Diagnostic, Location, ObjectRef, Phase, make
from controller.observability.text import escape_controls
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

__all__ = [
    "Batch",
    "InlineRules",
    "ObjectMemo",
    "budget_diagnostic",
    "check_objects",
    "subject_of",
]


@dataclass
class Batch:
    """What one batch of judgements found (picklable: it may come from a worker)."""

    diagnostics: list[Diagnostic] = field(default_factory=list)
    counters: RuleCounters = field(default_factory=RuleCounters)
    exhausted: BudgetExhaustion | None = None
    by_self: list[list[Diagnostic]] = field(default_factory=list)
    """The same diagnostics per ``self``, in the order the selves were given."""
    by_collection: dict[str, list[Diagnostic]] = field(default_factory=dict)
    """The same diagnostics per collection (:func:`check_objects` only)."""


def subject_of(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata")
    if not isinstance(meta, Mapping):
        return "(unnamed)"
    ns, name = meta.get("namespace"), meta.get("name")
    return escape_controls(f"{ns}/{name}" if ns else str(name))


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
    batch = Batch(by_self=[[] for _ in selves])
    evaluated = skipped = failed = 0
    for rule in rules:
        judged = 0
        rule_failed = False
        for i, (value, subject, ref) in enumerate(selves):
            data = {"self": value, **extra}
            try:
                j = judge(rule, data, location=location, object=ref, subject=subject)
            except BudgetExceeded:
                judged += 1
                if batch.exhausted is None:
                    batch.exhausted = iteration_exhaustion()
                    where = rule.title + (f" on {subject}" if subject else "")
                    diag = budget_diagnostic(where, batch.exhausted)
                    batch.diagnostics.append(diag)
                    batch.by_self[i].append(diag)
                continue
            if j.state is State.SKIPPED:
                continue
            judged += 1
            if j.diagnostic is not None:
                rule_failed = True
                batch.diagnostics.append(j.diagnostic)
                batch.by_self[i].append(j.diagnostic)
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
        self.seconds = 0.0
        """Time spent judging, over every output of the render."""

    def __call__(self, name: str, out: RenderedOutput) -> list[Diagnostic]:
        owner = self.ruleset.outputs.get(name)
        rules = self.ruleset.inline_for(owner) if owner is not None else ()
        if not rules:
            return []
        started = time.perf_counter()
        try:
            return self._judge(name, out, rules)
        finally:
            self.seconds += time.perf_counter() - started

    def _judge(
        self, name: str, out: RenderedOutput, rules: Sequence[CompiledRule]
    ) -> list[Diagnostic]:
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


class ObjectMemo:
    """Inline verdicts of stored objects, reused while the store still holds the same object.

    Stored objects are frozen and a snapshot shares every unchanged object with the previous
    one, so identity is a sound key: an object that changed is a new object. The memo keeps
    the objects it saw in the latest call (strong references, so an id cannot be reused) and
    forgets the rest; with one object changed, a render judges one object. A batch that ran
    out of budget is never remembered.
    """

    def __init__(self) -> None:
        self._seen: dict[str, dict[int, tuple[Mapping[str, Any], tuple[Diagnostic, ...]]]] = {}

    def lookup(
        self, name: str, objs: Sequence[Mapping[str, Any]]
    ) -> list[tuple[Diagnostic, ...] | None]:
        seen = self._seen.get(name, {})
        out: list[tuple[Diagnostic, ...] | None] = []
        for o in objs:
            hit = seen.get(id(o))
            out.append(hit[1] if hit is not None and hit[0] is o else None)
        return out

    def replace(
        self,
        name: str,
        objs: Sequence[Mapping[str, Any]],
        verdicts: Sequence[tuple[Diagnostic, ...] | None],
    ) -> None:
        self._seen[name] = {
            id(o): (o, v) for o, v in zip(objs, verdicts, strict=True) if v is not None
        }


def check_objects(
    ruleset: RuleSet,
    objects: Mapping[str, Iterable[Mapping[str, Any]]],
    *,
    budget: RunBudget | None = None,
    isolation: Isolation = Isolation.AUTO,
    memo: ObjectMemo | None = None,
) -> Batch:
    """Inline rules of watched collections over ``objects`` (collection → objects).

    The render-calling code passes every stored object before it renders (with a ``memo``,
    so unchanged objects are not judged again); admission, a later issue, is to pass the
    one proposed object.
    Collections without inline rules are not read at all. Diagnostics come per object, in
    the order given.
    """
    budget = budget or RunBudget()
    total = Batch()
    for name in sorted(objects):
        owner = ruleset.collections.get(name)
        rules = ruleset.inline_for(owner) if owner is not None else ()
        if not rules:
            continue
        objs = list(objects[name])
        verdicts: list[tuple[Diagnostic, ...] | None] = (
            memo.lookup(name, objs) if memo is not None else [None] * len(objs)
        )
        todo = [objs[i] for i, v in enumerate(verdicts) if v is None]

        def judged(rules: Sequence[CompiledRule] = rules, todo: list[Any] = todo) -> Batch:
            # Converted where they are judged: in a worker, the conversion is the worker's.
            selves = [(to_cel(o), subject_of(o), _ref(o)) for o in todo]
            return judge_many(rules, selves, {}, None)

        result = (
            execute(
                judged,
                cheap=is_cheap(rules, len(rules) * len(todo)),
                budget=budget,
                isolation=isolation,
            )
            if todo
            else Batch()
        )
        if result is None:
            assert budget.exhausted is not None
            total.diagnostics.append(
                budget_diagnostic(f"inline rules of collection {name}", budget.exhausted)
            )
            total.exhausted = total.exhausted or budget.exhausted
            break
        found_here: list[Diagnostic] = []
        if result.exhausted is None:
            pending = [i for i, v in enumerate(verdicts) if v is None]
            for i, found in zip(pending, result.by_self, strict=True):
                verdicts[i] = tuple(found)
            if memo is not None:
                memo.replace(name, objs, verdicts)
            for v in verdicts:
                found_here.extend(v or ())
        else:
            found_here.extend(d for v in verdicts for d in (v or ()))
            found_here.extend(result.diagnostics)
        total.diagnostics.extend(found_here)
        if found_here:
            total.by_collection[name] = found_here
        total.exhausted = total.exhausted or result.exhausted
        c, b = total.counters, result.counters
        total.counters = RuleCounters(
            evaluated=c.evaluated + b.evaluated,
            failed=c.failed + b.failed,
            skipped=c.skipped + b.skipped,
        )
    return total
