"""The pipeline's ``rules`` stage: deferred rules, after ``haproxy -c``, before external.

It judges the candidate against the inputs the render read (``RenderResult.inputs``): the
store view and the merged extraContext. Because those inputs are not part of the file set,
:meth:`RulesStage.input_key` gives the pipeline a digest of whatever the deferred rules read
besides outputs, so a cached verdict is reused only when those inputs are unchanged too.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
from collections.abc import Callable, Mapping
from typing import Any

from controller.diagnostics import Phase
from controller.render import RenderResult
from controller.resources import object_ref
from controller.resources.api import StoreView
from controller.validation.report import RuleCounters
from controller.validation.rules.budget import (
    DEFAULT_TIME_BUDGET,
    CancelSignal,
    Isolation,
    RunBudget,
    WorkerCancelled,
    execute,
    is_cheap,
)
from controller.validation.rules.cel import to_cel
from controller.validation.rules.compiled import OwnerKind, RuleSet
from controller.validation.rules.deferred import (
    DeferredInputs,
    DeferredResult,
    evaluate_deferred,
    plan,
)
from controller.validation.rules.inline import budget_diagnostic, subject_of
from controller.validation.rules.judge import output_value
from controller.validation.rules.refs import ANY, EXTRA
from controller.validation.stage import Stage, StageContext, StageOutcome

__all__ = ["RulesStage", "deferred_inputs"]


def _collection_names(ruleset: RuleSet) -> list[str]:
    names: set[str] = set()
    for r in ruleset.deferred:
        if r.owner.kind is OwnerKind.COLLECTION:
            names.add(r.owner.name)
        for n in r.refs.collections:
            names.update(ruleset.collections if n == ANY else (n,))
    return sorted(names)


def _objects(view: StoreView | None, name: str) -> list[Any]:
    if view is None or name not in view.names():
        return []
    return list(view.collection(name).list())


def deferred_inputs(ruleset: RuleSet, render: RenderResult) -> DeferredInputs:
    """Convert what the deferred rules of ``ruleset`` read from ``render`` for CEL."""
    outputs: dict[str, dict[str, Any] | None] = {}
    states: dict[str, str] = {}
    for name, owner in ruleset.outputs.items():
        status = render.outputs.get(name)
        entry = render.files.get(str(owner.path))
        if entry is not None and (status is None or status.state == "rendered"):
            content = entry.content.decode("utf-8", errors="replace")
            outputs[name] = output_value(name, str(owner.path), content)
        else:
            outputs[name] = None
            states[name] = status.state if status is not None else "not rendered"
    view = render.inputs.view if render.inputs is not None else None
    collections = {
        name: [(to_cel(o), subject_of(o), _safe_ref(o)) for o in _objects(view, name)]
        for name in _collection_names(ruleset)
    }
    extra: Mapping[str, Any] = (
        render.inputs.extra_context if render.inputs is not None else ruleset.extra_context
    )
    return DeferredInputs(outputs, states, collections, to_cel(extra))


def _safe_ref(obj: Any) -> Any:
    try:
        return object_ref(obj)
    except Exception:
        return None


class RulesStage(Stage):
    """Deferred rules of one spec. Built once per spec, like the renderer."""

    phase = Phase.RULES

    def __init__(
        self,
        ruleset: RuleSet,
        *,
        time_budget: float = DEFAULT_TIME_BUDGET,
        isolation: Isolation = Isolation.AUTO,
    ) -> None:
        self.ruleset = ruleset
        self.time_budget = time_budget
        self.isolation = isolation
        self.plan = plan(ruleset)
        self._memo: tuple[RenderResult, DeferredInputs] | None = None

    def _inputs(self, render: RenderResult) -> DeferredInputs:
        """Converted once per candidate: the pipeline asks for the cache key, then runs."""
        memo = self._memo
        if memo is not None and memo[0] is render:
            return memo[1]
        inputs = deferred_inputs(self.ruleset, render)
        self._memo = (render, inputs)
        return inputs

    def fingerprint(self) -> str:
        return hashlib.sha256(
            json.dumps([self.ruleset.fingerprint, self.time_budget]).encode()
        ).hexdigest()

    def input_key(self, render: RenderResult) -> str | None:
        """Digest of the non-output inputs deferred rules read; None when they read none."""
        if not self.ruleset.reads_inputs():
            return None
        inputs = self._inputs(render)
        reads_extra = any(EXTRA in r.refs.variables for r in self.ruleset.deferred)
        doc = {
            "collections": {n: [o for o, _, _ in objs] for n, objs in inputs.collections.items()},
            "extraContext": inputs.extra_context if reads_extra else None,
        }
        text = json.dumps(doc, sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()

    async def _in_worker(
        self, work: Callable[[], DeferredResult], budget: RunBudget
    ) -> DeferredResult | None:
        """The forked evaluation, waited for in a thread so the event loop keeps running.

        The pipeline cancels this stage when an earlier one fails while it runs ahead. The
        thread cannot be interrupted, so cancellation sets a signal its wait also watches:
        the worker is killed and reaped before the cancellation goes on, and no evaluation
        outlives the run that wanted it.
        """
        cancel = CancelSignal()
        waiting = asyncio.ensure_future(
            asyncio.to_thread(
                execute, work, cheap=False, budget=budget, isolation=self.isolation, cancel=cancel
            )
        )
        # Closed only when the thread is done with it, however this coroutine ends.
        waiting.add_done_callback(lambda _: cancel.close())
        try:
            return await asyncio.shield(waiting)
        except asyncio.CancelledError:
            cancel.set()
            with contextlib.suppress(WorkerCancelled, Exception):
                await waiting
            raise

    async def run(self, ctx: StageContext) -> StageOutcome:
        diagnostics = list(self.ruleset.diagnostics)
        if not self.plan.order and not diagnostics:
            return StageOutcome(rules=RuleCounters())
        inputs = self._inputs(ctx.render)
        self._memo = None  # do not keep the candidate alive after its run
        evaluations = sum(
            len(inputs.collections.get(r.owner.name, ()))
            if r.owner.kind is OwnerKind.COLLECTION
            else 1
            for r in self.plan.order
        )
        budget = RunBudget(self.time_budget)
        cheap = is_cheap(self.plan.order, evaluations)

        def work() -> DeferredResult:
            return evaluate_deferred(self.ruleset, self.plan, inputs)

        if cheap or self.isolation is Isolation.NEVER:
            result = execute(work, cheap=cheap, budget=budget, isolation=self.isolation)
        else:
            result = await self._in_worker(work, budget)
        if result is None:
            assert budget.exhausted is not None
            diagnostics.append(budget_diagnostic("deferred rules", budget.exhausted))
            return StageOutcome(diagnostics, budget=budget.exhausted)
        diagnostics.extend(result.diagnostics)
        return StageOutcome(diagnostics, budget=result.exhausted, rules=result.counters)
