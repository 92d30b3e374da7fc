"""Budgets: running out is ``analysis_incomplete`` with a budget record, never a pass.

The slow expression is real: ``map()`` copies its accumulator, so 9,000 lines take seconds
in-process (measured 3.7 s); the forked worker is killed at the deadline instead.
"""

from __future__ import annotations

import asyncio
import os
import time

import pytest

from controller.render import Renderer
from controller.spec.models import HAProxyTemplateConfigSpec
from controller.validation import Pipeline, ValidationReport
from controller.validation.report import ReportStatus
from controller.validation.rules import (
    ITERATION_BUDGET,
    Isolation,
    RuledRenderer,
    RuleSet,
    RulesStage,
)
from controller.validation.rules.budget import RunBudget, execute
from controller.validation.rules.isolate import WorkerDeadline, WorkerFailed, run_isolated
from tests.rules.rules_helpers import MINIMAL_CFG, filled_store, make_spec, rule, ruled_render

NESTED = "self.lines.all(a, self.lines.all(b, a.size() + b.size() >= 0))"  # lines² iterations
SLOW = "self.lines.map(l, l + '!').size() > 0"  # quadratic copying, few iterations
BIG_MAP = "{% for i in range(9000) %}k{{ i }} v\n{% endfor %}"


def _lines_cfg(n: int) -> str:
    return MINIMAL_CFG + "".join(f"# filler {i}\n" for i in range(n))


def test_iteration_budget_of_an_inline_rule() -> None:
    spec = make_spec(cfg=_lines_cfg(200), cfg_rules=[rule("nested", NESTED)])
    result = ruled_render(spec, isolation=Isolation.NEVER)
    [d] = [d for d in result.diagnostics if d.rule_id == "E0002"]
    assert "celIterations" in d.message and f"limit {ITERATION_BUDGET}" in d.message
    assert result.outputs["haproxy.cfg"].state == "failed"  # not proven, so not used
    [b] = result.budgets
    assert (b.phase, b.budget, b.limit) == ("rules", "celIterations", float(ITERATION_BUDGET))


def _report(
    spec: HAProxyTemplateConfigSpec, renderer: RuledRenderer, pipeline: Pipeline
) -> ValidationReport:
    render = renderer.render(filled_store(spec).snapshot())
    return asyncio.run(pipeline.validate(render))


def test_inline_budget_makes_the_report_incomplete(haproxy_bin: str) -> None:
    spec = make_spec(cfg=_lines_cfg(200), cfg_rules=[rule("nested", NESTED)])
    report = _report(
        spec, RuledRenderer.from_spec(spec), Pipeline.from_spec(spec, haproxy_binary=haproxy_bin)
    )
    assert not report.valid
    assert report.status is ReportStatus.ANALYSIS_INCOMPLETE
    assert [b.budget for b in report.metadata.budget_exhaustions] == ["celIterations"]


def test_iteration_budget_of_a_deferred_rule(haproxy_bin: str) -> None:
    spec = make_spec(
        cfg=_lines_cfg(200),
        cfg_rules=[rule("nested", NESTED + " && extraContext.x == 1")],
        extraContext={"x": 1},
    )
    report = _report(
        spec, RuledRenderer.from_spec(spec), Pipeline.from_spec(spec, haproxy_binary=haproxy_bin)
    )
    assert report.status is ReportStatus.ANALYSIS_INCOMPLETE and not report.valid
    [b] = report.metadata.budget_exhaustions
    assert (b.phase.value, b.budget) == ("rules", "celIterations")
    assert "E0002" in report.rule_ids()


def test_time_budget_of_deferred_rules_kills_the_worker(haproxy_bin: str) -> None:
    spec = make_spec(
        maps={
            "big.map": {
                "template": BIG_MAP,
                "validate": {
                    "rules": [rule("slow", SLOW + " && outputs['haproxy.cfg'].content != ''")]
                },
            }
        }
    )
    rs = RuleSet.from_spec(spec)
    stage = RulesStage(rs, time_budget=0.3, isolation=Isolation.AUTO)
    pipeline = Pipeline.from_settings(spec.validation, haproxy_binary=haproxy_bin, rules=stage)
    started = time.monotonic()
    report = _report(spec, RuledRenderer(Renderer(spec), rs), pipeline)
    elapsed = time.monotonic() - started
    assert report.status is ReportStatus.ANALYSIS_INCOMPLETE and not report.valid
    [b] = report.metadata.budget_exhaustions
    assert (b.budget, b.limit) == ("ruleTime", 0.3)
    assert elapsed < 2.5  # the 3+ s evaluation was cut off


def test_time_budget_of_inline_rules() -> None:
    spec = make_spec(
        maps={"big.map": {"template": BIG_MAP, "validate": {"rules": [rule("slow", SLOW)]}}}
    )
    started = time.monotonic()
    result = ruled_render(spec, time_budget=0.3)
    assert time.monotonic() - started < 2.5
    assert result.outputs["big.map"].state == "failed"
    assert [b.budget for b in result.budgets] == ["ruleTime"]
    assert any(d.rule_id == "E0002" and "ruleTime" in d.message for d in result.diagnostics)


def test_worker_returns_values_and_errors() -> None:
    assert run_isolated(lambda: {"pid": os.getpid()}, 5.0)["pid"] != os.getpid()

    def boom() -> None:
        raise ValueError("inside")

    with pytest.raises(WorkerFailed, match="ValueError: inside") as info:
        run_isolated(boom, 5.0)
    assert not info.value.memory


def test_worker_deadline_is_enforced() -> None:
    started = time.monotonic()
    with pytest.raises(WorkerDeadline):
        run_isolated(lambda: time.sleep(30), 0.2)
    assert time.monotonic() - started < 2.0


def test_worker_memory_ceiling() -> None:
    def hog() -> int:
        return len(bytearray(512 * 1024 * 1024))

    with pytest.raises(WorkerFailed) as info:
        run_isolated(hog, 10.0, memory_headroom=64 * 1024 * 1024)
    assert info.value.memory


def test_memory_exhaustion_is_a_budget_record() -> None:
    def out_of_memory() -> None:
        raise MemoryError

    budget = RunBudget(5.0)
    assert execute(out_of_memory, cheap=False, budget=budget, isolation=Isolation.ALWAYS) is None
    assert budget.exhausted is not None and budget.exhausted.budget == "ruleMemory"


def test_an_exhausted_budget_refuses_further_batches() -> None:
    budget = RunBudget(0.0)
    assert execute(lambda: 1, cheap=True, budget=budget, isolation=Isolation.NEVER) is None
    assert budget.exhausted is not None and budget.exhausted.budget == "ruleTime"


def test_the_rule_time_budget_comes_from_spec_validation_rule_timeout() -> None:
    """Every render path and the rules stage read ``spec.validation.ruleTimeout``."""
    from controller.spec.models import ValidationSettings
    from controller.validation.rules import DEFAULT_TIME_BUDGET, RuledRenderer, rules_stage
    from controller.validation.rules.budget import time_budget_of

    spec = make_spec(cfg_rules=[rule("r", "extraContext.x == 1")], extraContext={"x": 1})
    assert time_budget_of(spec) == DEFAULT_TIME_BUDGET
    tuned = spec.model_copy(update={"validation": ValidationSettings(rule_timeout="750ms")})
    assert time_budget_of(tuned) == 0.75
    stage = rules_stage(tuned)
    assert stage is not None and stage.time_budget == 0.75
    assert RuledRenderer.from_spec(tuned).time_budget == 0.75
    for bad in ("0s", "-1s", "2m"):
        with pytest.raises(ValueError):
            ValidationSettings.model_validate({"ruleTimeout": bad})
