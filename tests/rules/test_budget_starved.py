"""A batch killed by the wall-time backstop says it was starved, not that it used its budget.

The budget is CPU time; a batch the scheduler starves is still killed after
``timeout * WALL_FACTOR + WALL_GRACE`` seconds of wall time. Then the record shows less CPU
used than the limit ("ran out of the ruleTime budget (limit 2, used 0.645)" was seen under
load), which read as a contradiction. A sleeping batch is a real stand-in for a starved one:
it gets no CPU, so only the backstop can stop it. The budget record and rule id stay the same.
"""

from __future__ import annotations

import time

import pytest

from controller.validation.rules import Isolation, pool
from controller.validation.rules.budget import RunBudget, execute
from controller.validation.rules.inline import budget_diagnostic
from controller.validation.rules.isolate import backstop
from controller.validation.rules.pool import Job

CPU_S = 0.05
"""The batch's CPU budget; its backstop is 0.05 * 4 + 1 = 1.2 s of wall time."""


def _sleeper() -> None:
    time.sleep(30)


def _run(budget: RunBudget, *, in_worker: bool) -> None:
    job = Job(time.sleep, (30,))
    started = time.monotonic()
    result = execute(
        _sleeper,
        cheap=False,
        budget=budget,
        isolation=Isolation.ALWAYS,
        job=job if in_worker else None,
    )
    assert result is None
    assert time.monotonic() - started < backstop(CPU_S) + 5


@pytest.mark.parametrize("in_worker", [False, True], ids=["fork", "worker"])
def test_a_starved_batch_is_reported_as_starved(in_worker: bool) -> None:
    if in_worker:
        assert pool.warm(wait=30), "the evaluation worker did not start"
    budget = RunBudget(CPU_S)
    _run(budget, in_worker=in_worker)
    exhausted = budget.exhausted
    assert exhausted is not None
    # the record is what it always was: the CPU the run had, against the CPU limit
    assert (exhausted.phase.value, exhausted.budget, exhausted.limit) == (
        "rules",
        "ruleTime",
        CPU_S,
    )
    assert exhausted.used is not None and exhausted.used < CPU_S
    assert budget.starved == backstop(CPU_S) == pytest.approx(1.2)
    diag = budget_diagnostic("deferred rules", exhausted, starved=budget.starved)
    assert diag.rule_id == "E0002"
    assert diag.message.startswith("deferred rules were stopped after 1.2 s of wall time")
    assert "starved" in diag.message and "ruleTime" in diag.message
    assert "ran out of" not in diag.message
    if in_worker:
        assert pool.warm(wait=30)  # the killed worker is replaced


def test_a_batch_stopped_by_its_cpu_timer_ran_out_of_the_budget() -> None:
    def spin() -> None:
        end = time.monotonic() + 30
        while time.monotonic() < end:
            pass

    budget = RunBudget(0.2)
    assert execute(spin, cheap=False, budget=budget, isolation=Isolation.ALWAYS) is None
    assert budget.exhausted is not None and budget.starved is None
    diag = budget_diagnostic("deferred rules", budget.exhausted, starved=budget.starved)
    assert diag.rule_id == "E0002"
    assert diag.message.startswith("deferred rules ran out of the ruleTime budget (limit 0.2")
