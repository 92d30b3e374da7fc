"""Rendering with the spec's inline rules, for every caller that renders for the pipeline.

The renderer knows nothing of rules (it sits below validation); it only offers the
``after_output`` hook and a ``skip`` list. :class:`RuledRenderer` is the one place that
wires them, so the reconcile loop, ``htc validate``, ``htc render``, ``htc test`` and the
local loop judge inline rules the same way: watched objects first, then each output right
after it rendered.

An object that fails its collection's inline rules stops every output that reads that
collection — nothing built from it could be deployed — and those outputs are reported
blocked (``E1008``) naming the object's failure; everything that depends on them is blocked
in turn by the render graph. Outputs that never read the collection still render, so the
report shows the rest of the configuration. Which collections an output reads is found in
its templates (``reads.py``), conservatively: a use of ``resources`` the walk cannot pin
to one collection counts as reading all of them. If the object checks ran out of budget,
nothing renders: unjudged objects could be anywhere.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from controller.diagnostics import Diagnostic, Severity
from controller.render import (
    FileSet,
    RenderBudget,
    Renderer,
    RenderInputs,
    RenderResult,
    RuleTally,
)
from controller.resources import StoreView
from controller.spec import HAProxyTemplateConfigSpec
from controller.validation.gcpause import paused_gc
from controller.validation.report import BudgetExhaustion, RuleCounters
from controller.validation.rules import pool
from controller.validation.rules.budget import (
    DEFAULT_TIME_BUDGET,
    MAX_CHEAP_EVALUATIONS,
    Isolation,
    RunBudget,
    time_budget_of,
)
from controller.validation.rules.compiled import Locator, RuleSet
from controller.validation.rules.inline import (
    Batch,
    InlineRules,
    ObjectMemo,
    OutputMemo,
    check_objects,
)
from controller.validation.rules.reads import collections_read, readers_of

__all__ = ["InlineStats", "RuledRenderer"]


def _budget(b: BudgetExhaustion) -> RenderBudget:
    return RenderBudget(phase=b.phase.value, budget=b.budget, limit=b.limit, used=b.used)


@dataclass
class InlineStats:
    """Inline rules of one render: rule units (per object batch and per output) and time."""

    counters: RuleCounters = field(default_factory=RuleCounters)
    seconds: float = 0.0

    def add(self, counters: RuleCounters, seconds: float) -> None:
        c = self.counters
        self.counters = RuleCounters(
            evaluated=c.evaluated + counters.evaluated,
            failed=c.failed + counters.failed,
            skipped=c.skipped + counters.skipped,
        )
        self.seconds += seconds

    @property
    def ms(self) -> float:
        return round(self.seconds * 1000, 3)


_POOL: ThreadPoolExecutor | None = None
_POOL_LOCK = threading.Lock()


def _objects_pool() -> ThreadPoolExecutor:
    """Threads that wait for object-rule workers while the caller renders (they only fork
    and wait; the judging is the worker's)."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = ThreadPoolExecutor(max_workers=2, thread_name_prefix="htc-object-rules")
        return _POOL


def _timed_check(
    ruleset: RuleSet,
    wanted: Mapping[str, Sequence[Any]],
    budget: RunBudget,
    isolation: Isolation,
    memo: ObjectMemo,
) -> tuple[Batch, float]:
    started = time.perf_counter()
    batch = check_objects(ruleset, wanted, budget=budget, isolation=isolation, memo=memo)
    return batch, time.perf_counter() - started


class RuledRenderer:
    """A :class:`Renderer` plus the inline rules of the same spec; same ``render`` call."""

    def __init__(
        self,
        renderer: Renderer,
        ruleset: RuleSet | None = None,
        *,
        time_budget: float = DEFAULT_TIME_BUDGET,
        isolation: Isolation = Isolation.AUTO,
    ) -> None:
        self.renderer = renderer
        self.ruleset = ruleset if ruleset is not None else RuleSet.from_spec(renderer.spec)
        self.time_budget = time_budget
        self.isolation = isolation
        self._memo = ObjectMemo()
        self._outputs = OutputMemo()
        self._reads: Mapping[str, frozenset[str]] | None = None
        self._renders = 0

    @classmethod
    def from_spec(
        cls,
        spec: HAProxyTemplateConfigSpec,
        *,
        locate: Locator | None = None,
        ruleset: RuleSet | None = None,
    ) -> RuledRenderer:
        """The renderer every render path uses: the spec's rules (``ruleset`` when the caller
        shares one with its rules stage) and the spec's rule time budget."""
        rules = ruleset if ruleset is not None else RuleSet.from_spec(spec, locate)
        return cls(Renderer(spec), rules, time_budget=time_budget_of(spec))

    @property
    def spec(self) -> HAProxyTemplateConfigSpec:
        return self.renderer.spec

    @property
    def reads(self) -> Mapping[str, frozenset[str]]:
        """Output → the collections its templates read (see ``reads.py``); computed once."""
        if self._reads is None:
            self._reads = collections_read(self.renderer)
        return self._reads

    def render(
        self,
        view: StoreView,
        *,
        http: Mapping[str, str] | None = None,
        extra_context: Mapping[str, Any] | None = None,
    ) -> RenderResult:
        """Never raises, like :meth:`Renderer.render`. The result's ``render_ms`` covers the
        whole call (objects judged first, then the render with its output rules), and its
        ``inline_rules`` says how many rule units ran and how long they took.

        The cyclic collector stays off for the whole call, not only for the template render
        inside it (see :meth:`Renderer.render`): otherwise the collection the previous
        render deferred fell on the objects' bookkeeping at the start of this one (10,000
        Ingresses, one changed: inline rules ~90 -> ~20 ms, the call ~250 -> ~130 ms CPU on a
        loaded machine), on the path to the verdict. The controller's ``evaluate`` holds
        one pause from the render to the verdict, and the pipeline has the deferred
        collection run once ``haproxy -c`` does (:func:`gcpause.collect_young`)."""
        started = time.perf_counter()
        self._renders += 1
        if self._renders == 2 and self.isolation is not Isolation.NEVER:
            pool.warm()  # a second candidate: a long-running process, see pool.py
        stats = InlineStats()
        with paused_gc():
            result = self._render(view, http, extra_context, stats)
        c = stats.counters
        return dataclasses.replace(
            result,
            render_ms=(time.perf_counter() - started) * 1000,
            inline_rules=RuleTally(c.evaluated, c.failed, c.skipped, stats.ms),
        )

    def _render(
        self,
        view: StoreView,
        http: Mapping[str, str] | None,
        extra_context: Mapping[str, Any] | None,
        stats: InlineStats,
    ) -> RenderResult:
        budget = RunBudget(self.time_budget)
        early = list(self.ruleset.diagnostics)
        budgets: list[RenderBudget] = []
        skip: dict[str, str] = {}
        wanted = {
            o.name: view.collection(o.name).list()
            for o in self.ruleset.collections.values()
            if self.ruleset.inline_for(o) and o.name in view.names()
        }
        result: RenderResult | None = None
        if wanted:
            started = time.perf_counter()
            if self._worth_overlapping(wanted):
                # The objects are judged in a forked worker while this thread renders with
                # none blocked; the render is kept only if no object blocks anything and
                # both sides fit in the one time budget together — exactly the render that
                # judging first calls for. Otherwise it is done again below.
                objects_budget = RunBudget(self.time_budget)
                checking = _objects_pool().submit(
                    _timed_check, self.ruleset, wanted, objects_budget, self.isolation, self._memo
                )
                hook = InlineRules(
                    self.ruleset, budget=budget, isolation=self.isolation, memo=self._outputs
                )
                result = self.renderer.render(
                    view, http=http, extra_context=extra_context, after_output=hook
                )
                batch, seconds = checking.result()
                if batch.exhausted is not None:
                    # Beside the render the worker shares the cores (and, with SMT, a core's
                    # execution units) with it, and a CPU second buys less: judged first,
                    # alone, the objects may fit. The overlap must not change the verdict,
                    # so they are judged again, first, with the budget judging first has.
                    stats.add(RuleCounters(), seconds)
                    again = time.perf_counter()
                    objects_budget = RunBudget(self.time_budget)
                    batch = check_objects(
                        self.ruleset,
                        wanted,
                        budget=objects_budget,
                        isolation=self.isolation,
                        memo=self._memo,
                    )
                    seconds = time.perf_counter() - again
                    result = None
                    budget = RunBudget(self.time_budget, used=objects_budget.used)
            else:
                batch = check_objects(
                    self.ruleset, wanted, budget=budget, isolation=self.isolation, memo=self._memo
                )
                seconds = time.perf_counter() - started
            stats.add(batch.counters, seconds)
            early.extend(batch.diagnostics)
            if batch.exhausted is not None:
                budgets.append(_budget(batch.exhausted))
                # Not every object was judged, so no output can be shown to be safe.
                extra = {**self.spec.extra_context, **(extra_context or {})}
                return RenderResult(
                    FileSet(),
                    diagnostics=(*self.renderer.diagnostics, *early),
                    inputs=RenderInputs(view, dict(http or {}), extra),
                    budgets=tuple(budgets),
                )
            skip = self._blocked_by_objects(batch.by_collection)
            if result is not None:
                kept = (
                    not skip
                    and budget.exhausted is None
                    and budget.used + objects_budget.used <= budget.limit
                )
                if kept:
                    budget.used += objects_budget.used  # one budget, as if judged first
                else:
                    # An object blocks outputs, or judged first the objects would have left
                    # the output rules less time: render again, with the verdicts and with
                    # the time the objects left.
                    result = None
                    budget = RunBudget(self.time_budget, used=objects_budget.used)
        if result is None:
            hook = InlineRules(
                self.ruleset, budget=budget, isolation=self.isolation, memo=self._outputs
            )
            result = self.renderer.render(
                view, http=http, extra_context=extra_context, after_output=hook, skip=skip
            )
        stats.add(hook.counters, hook.seconds)
        if budget.exhausted is not None and not budgets:
            budgets.append(_budget(budget.exhausted))
        if not early and not budgets:
            return result
        return dataclasses.replace(
            result,
            diagnostics=(*result.diagnostics, *early),
            budgets=(*result.budgets, *budgets),
        )

    def _worth_overlapping(self, wanted: Mapping[str, Sequence[Any]]) -> bool:
        """Judge the objects beside the render? Only when many are new (more than a cheap
        batch holds). A worker alive beside the render costs it about 15 ms (the fork, then
        copy-on-write faults as it allocates), more than judging a few objects takes."""
        if self.isolation is Isolation.NEVER:
            return False
        new = 0
        for name, objs in wanted.items():
            new += self._memo.lookup(name, objs).count(None)
        return new > MAX_CHEAP_EVALUATIONS

    def _blocked_by_objects(self, found: Mapping[str, list[Diagnostic]]) -> dict[str, str]:
        """Output → root cause, for every output that reads a collection with an object that
        failed its inline rules. The first failure (collections in name order) is named."""
        skip: dict[str, str] = {}
        for collection in sorted(found):
            errors = [d for d in found[collection] if d.severity.rank <= Severity.ERROR.rank]
            if not errors:
                continue
            more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
            cause = f"{errors[0].rule_id} {errors[0].message}{more}"
            for output in readers_of(self.reads, collection):
                skip.setdefault(output, cause)
        return skip
