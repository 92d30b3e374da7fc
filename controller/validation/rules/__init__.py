"""Two-phase CEL validation rules (``validate`` blocks on outputs and watched collections).

* :class:`RuleSet` — a spec's rules, compiled and classified inline/deferred once per spec;
* :class:`RuledRenderer` — render with inline rules (objects before, outputs right after);
* :func:`check_objects` — inline rules of watched objects alone (for the admission webhook,
  a later issue; today every render calls it first);
* :class:`RulesStage` — the pipeline stage running deferred rules after ``haproxy -c``.

``docs/rules.md`` is the author's guide.
"""

from __future__ import annotations

from controller.spec import HAProxyTemplateConfigSpec
from controller.validation.rules.budget import (
    DEFAULT_TIME_BUDGET,
    Isolation,
    RunBudget,
    time_budget_of,
)
from controller.validation.rules.cel import ITERATION_BUDGET
from controller.validation.rules.compiled import CompiledRule, Locator, Owner, OwnerKind, RuleSet
from controller.validation.rules.deferred import Plan, evaluate_deferred, plan
from controller.validation.rules.inline import Batch, InlineRules, check_objects
from controller.validation.rules.render import InlineStats, RuledRenderer
from controller.validation.rules.stage import RulesStage, deferred_inputs

__all__ = [
    "DEFAULT_TIME_BUDGET",
    "ITERATION_BUDGET",
    "Batch",
    "CompiledRule",
    "InlineRules",
    "InlineStats",
    "Isolation",
    "Locator",
    "Owner",
    "OwnerKind",
    "Plan",
    "RuleSet",
    "RuledRenderer",
    "RulesStage",
    "RunBudget",
    "check_objects",
    "deferred_inputs",
    "evaluate_deferred",
    "plan",
    "rules_stage",
    "time_budget_of",
]


def rules_stage(
    spec: HAProxyTemplateConfigSpec, ruleset: RuleSet | None = None
) -> RulesStage | None:
    """The ``rules`` stage for ``spec``, or None when it has nothing to run (no deferred and
    no broken rules), so ``stagesRun`` never lists a check that did not exist."""
    rs = ruleset if ruleset is not None else RuleSet.from_spec(spec)
    if not rs.deferred and not rs.diagnostics:
        return None
    return RulesStage(rs, time_budget=time_budget_of(spec))
