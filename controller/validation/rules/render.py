"""Rendering with the spec's inline rules, for every caller that renders for the pipeline.

The renderer knows nothing of rules (it sits below validation); it only offers the
``after_output`` hook. :class:`RuledRenderer` is the one place that wires the hook, so the
reconcile loop, ``htc validate``, ``htc test`` and the local loop judge inline rules the same
way: watched objects first (a failing object stops the render: nothing built from it could be
deployed), then each output right after it rendered.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from controller.diagnostics import Diagnostic, Severity
from controller.render import FileSet, RenderBudget, Renderer, RenderInputs, RenderResult
from controller.resources.api import StoreView
from controller.spec.models import HAProxyTemplateConfigSpec
from controller.validation.report import BudgetExhaustion
from controller.validation.rules.budget import DEFAULT_TIME_BUDGET, Isolation, RunBudget
from controller.validation.rules.compiled import Locator, RuleSet
from controller.validation.rules.inline import InlineRules, ObjectMemo, check_objects

__all__ = ["RuledRenderer"]


def _blocking(diagnostics: list[Diagnostic]) -> bool:
    return any(d.severity.rank <= Severity.ERROR.rank for d in diagnostics)


def _budget(b: BudgetExhaustion) -> RenderBudget:
    return RenderBudget(phase=b.phase.value, budget=b.budget, limit=b.limit, used=b.used)


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

    @classmethod
    def from_spec(
        cls, spec: HAProxyTemplateConfigSpec, *, locate: Locator | None = None
    ) -> RuledRenderer:
        return cls(Renderer(spec), RuleSet.from_spec(spec, locate))

    @property
    def spec(self) -> HAProxyTemplateConfigSpec:
        return self.renderer.spec

    def render(
        self,
        view: StoreView,
        *,
        http: Mapping[str, str] | None = None,
        extra_context: Mapping[str, Any] | None = None,
    ) -> RenderResult:
        """Never raises, like :meth:`Renderer.render`."""
        budget = RunBudget(self.time_budget)
        early = list(self.ruleset.diagnostics)
        budgets: list[RenderBudget] = []
        wanted = {
            o.name: view.collection(o.name).list()
            for o in self.ruleset.collections.values()
            if self.ruleset.inline_for(o) and o.name in view.names()
        }
        if wanted:
            batch = check_objects(
                self.ruleset, wanted, budget=budget, isolation=self.isolation, memo=self._memo
            )
            early.extend(batch.diagnostics)
            if batch.exhausted is not None:
                budgets.append(_budget(batch.exhausted))
            if _blocking(batch.diagnostics):
                extra = {**self.spec.extra_context, **(extra_context or {})}
                return RenderResult(
                    FileSet(),
                    diagnostics=(*self.renderer.diagnostics, *early),
                    inputs=RenderInputs(view, dict(http or {}), extra),
                    budgets=tuple(budgets),
                )
        hook = InlineRules(self.ruleset, budget=budget, isolation=self.isolation)
        result = self.renderer.render(
            view, http=http, extra_context=extra_context, after_output=hook
        )
        if budget.exhausted is not None and not budgets:
            budgets.append(_budget(budget.exhausted))
        if not early and not budgets:
            return result
        return dataclasses.replace(
            result,
            diagnostics=(*result.diagnostics, *early),
            budgets=(*result.budgets, *budgets),
        )
