"""The budgets of rule evaluation, and where an evaluation batch runs.

Three limits bound the work of rules; running out of any of them makes the analysis
incomplete (``analysis_incomplete`` with a budget record), never a pass:

* ``celIterations`` — the runtime's own loop budget per evaluation (10,000 iterations over
  all comprehensions of one evaluation; fixed by the binding).
* ``ruleTime`` — CPU seconds of evaluation per run (one render's inline rules, or one
  pipeline run's deferred rules); 2 s unless the spec sets it (:func:`time_budget_of`). A
  batch that may be expensive runs in another process that the kernel stops once it has
  used the remaining budget (and that is killed if the scheduler starves it far past that
  in wall time): a long-lived evaluation worker when its inputs are small and one is idle
  (``pool.py``), else a fork of this process (``isolate.py``). A cheap batch runs
  in-process and the CPU time of its thread is charged afterwards. CPU time, not wall
  time: a verdict must not depend on how busy the node's other processes keep its cores.
* ``ruleMemory`` — address space the worker or child may add (1 GiB).

"Cheap" means few evaluations of programs whose work is bounded by the expression's size
(at most 4,096 characters, 32 levels of nesting) times the input, which the deadline cannot
usefully improve on: no loop other than an element-local ``all``/``exists``/``exists_one``
(``refs.py`` says which). The one native function without that bound,
``regex.extractAll``, looks at the deadline itself (``deadline.py``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import TypeVar

from controller.diagnostics import Phase
from controller.spec import HAProxyTemplateConfigSpec
from controller.validation.report import BudgetExhaustion
from controller.validation.rules import deadline
from controller.validation.rules.cel import ITERATION_BUDGET
from controller.validation.rules.compiled import CompiledRule
from controller.validation.rules.isolate import (
    MEMORY_HEADROOM,
    CancelSignal,
    Usage,
    WorkerCancelled,
    WorkerDeadline,
    WorkerFailed,
    run_isolated,
)
from controller.validation.rules.pool import Job, Unavailable, run_in_worker

__all__ = [
    "DEFAULT_TIME_BUDGET",
    "CancelSignal",
    "Isolation",
    "Job",
    "RunBudget",
    "WorkerCancelled",
    "execute",
    "is_cheap",
    "iteration_exhaustion",
    "time_budget_of",
]

T = TypeVar("T")

DEFAULT_TIME_BUDGET = 2.0
"""Seconds of rule evaluation per run."""

MAX_CHEAP_EVALUATIONS = 200
MAX_CHEAP_SIZE = 512


class Isolation(StrEnum):
    AUTO = "auto"
    """Fork for batches that may be expensive, evaluate cheap ones in-process."""
    ALWAYS = "always"
    NEVER = "never"
    """In-process only; for tests of the evaluation semantics. The time budget is then only
    checked between batches."""


@dataclass
class RunBudget:
    """The time budget of one run, shared by all its batches."""

    limit: float = DEFAULT_TIME_BUDGET
    used: float = 0.0
    exhausted: BudgetExhaustion | None = None
    starved: float | None = None
    """Set when a worker was killed by the wall-time backstop, not its CPU timer: the
    seconds of wall time it had. The budget record is the same either way (``used`` is the
    CPU the run had); only the message says that the machine starved the evaluation."""

    @property
    def remaining(self) -> float:
        return self.limit - self.used


def time_budget_of(spec: HAProxyTemplateConfigSpec) -> float:
    """Seconds of rule evaluation per run for ``spec`` (``spec.validation.ruleTimeout``)."""
    return spec.validation.rule_timeout


def is_cheap(rules: Iterable[CompiledRule], evaluations: int) -> bool:
    rules = list(rules)
    size = sum(r.refs.size for r in rules)
    return (
        evaluations <= MAX_CHEAP_EVALUATIONS
        and size <= MAX_CHEAP_SIZE
        and not any(r.refs.iterates for r in rules)
    )


def iteration_exhaustion() -> BudgetExhaustion:
    return BudgetExhaustion(
        phase=Phase.RULES, budget="celIterations", limit=float(ITERATION_BUDGET)
    )


def execute(
    fn: Callable[[], T],
    *,
    cheap: bool,
    budget: RunBudget,
    isolation: Isolation,
    cancel: CancelSignal | None = None,
    job: Job[T] | None = None,
) -> T | None:
    """``fn()``, or None when the run's budget ran out (then ``budget.exhausted`` says how).

    ``job`` is the same computation in a form a long-lived worker can take (``pool.py``);
    an isolated batch runs there when one is idle and the inputs are small, and in a fork
    of this process otherwise, under the same limits either way.

    A worker that fails for another reason than time or memory raises RuntimeError: that is
    a bug, reported as an internal error by the caller. ``cancel`` set while a worker runs
    kills it and raises :class:`WorkerCancelled`.
    """
    if budget.exhausted is not None:
        return None
    if budget.remaining <= 0:
        budget.exhausted = _time(budget)
        return None
    started = time.thread_time()
    usage = Usage()
    try:
        if isolation is Isolation.NEVER or (isolation is Isolation.AUTO and cheap):
            allowed = budget.remaining
            with deadline.within(allowed) as watch:
                result: T | None = fn()
            spent = time.thread_time() - started
            if watch.tripped or spent > allowed:
                # Stopped at the deadline, or past it before anything could stop it: what
                # the batch found is no verdict (a worker would have been stopped by now).
                budget.used += spent
                budget.exhausted = _time(budget)
                return None
            budget.used += spent
            return result
        result = _isolated(fn, job, budget.remaining, cancel, usage)
    except WorkerDeadline as exc:
        budget.used += usage.cpu
        budget.exhausted = _time(budget)
        budget.starved = exc.wall
        return None
    except WorkerFailed as exc:
        budget.used += usage.cpu
        if not exc.memory:
            raise RuntimeError(str(exc)) from None
        budget.exhausted = BudgetExhaustion(
            phase=Phase.RULES, budget="ruleMemory", limit=float(MEMORY_HEADROOM)
        )
        return None
    budget.used += usage.cpu
    return result


def _isolated(
    fn: Callable[[], T],
    job: Job[T] | None,
    timeout: float,
    cancel: CancelSignal | None,
    usage: Usage,
) -> T:
    if job is not None:
        try:
            return run_in_worker(job, timeout, cancel=cancel, usage=usage)
        except Unavailable:
            usage.cpu = 0.0  # not taken, or taken back: the fork alone is charged
    return run_isolated(fn, timeout, cancel=cancel, usage=usage)


def _time(budget: RunBudget) -> BudgetExhaustion:
    return BudgetExhaustion(
        phase=Phase.RULES, budget="ruleTime", limit=budget.limit, used=round(budget.used, 3)
    )
