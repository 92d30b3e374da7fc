"""Remembering success, and sharing work between identical concurrent candidates.

Reconcile, admission and HTTP-source refreshes often validate the very same bytes (an admission
request followed by the reconcile it causes; a resync that changed nothing). A success verdict
is reused when the file set's checksum, the pipeline's fingerprint (binary, schemas, policy,
rules, validators) and the call's options are all unchanged. Failures are never stored, nor
is a success that let an external validator's failure pass (``failurePolicy: ignore``): a
timeout or a flaky validator must get a fresh chance, and an invalid candidate is cheap to
reject again.

What is stored is the stages' raw outcome, not a finished report: the report is assembled per
call, so render warnings and template locations always come from the caller's own render.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from controller.diagnostics import Diagnostic, Phase
from controller.validation.report import BudgetExhaustion, RuleCounters
from controller.validation.stage import StageOutcome

__all__ = ["CacheKey", "SingleFlight", "StageRun", "StageVerdict", "VerdictCache"]

CacheKey = tuple[str, str, str]
"""(candidate key, pipeline fingerprint, options key). The candidate key is the file set's
checksum, combined with the digest of any other input a stage judges (see
``Pipeline._candidate_key``); the per-stage entries (:class:`StageVerdict`) are keyed by the
file set's checksum alone."""


@dataclass(frozen=True, slots=True)
class StageRun:
    """What the stages said about one candidate, before per-call finalization."""

    diagnostics: tuple[Diagnostic, ...] = ()
    budgets: tuple[BudgetExhaustion, ...] = ()
    stages_run: tuple[Phase, ...] = ()
    stages_skipped: tuple[Phase, ...] = ()
    timings: Mapping[str, float] = field(default_factory=dict)
    failed: bool = False
    """A stage failed (after strict and filters) or ran out of budget."""
    rules: RuleCounters | None = None


@dataclass(frozen=True, slots=True)
class StageVerdict:
    """One stage's passing outcome on a file set, for a stage that judges the bytes alone.

    When a stage judges more than the bytes (the rules stage reads the objects the render
    read), a candidate with known bytes but new inputs misses the whole-run entry; the stages
    that judge only the bytes (syntax, schema, ``haproxy -c``, external validators) would
    find what they found before, so their outcomes are kept per file set and only the
    others run again. Only a pass is kept: nothing that failed, ran out of budget, or let a
    validator's failure pass."""

    phase: Phase
    diagnostics: tuple[Diagnostic, ...] = ()
    extra_timings: Mapping[str, float] = field(default_factory=dict)
    rules: RuleCounters | None = None

    def outcome(self) -> StageOutcome:
        """The outcome as the stage gave it (a fresh one: the pipeline's record owns it)."""
        return StageOutcome(
            list(self.diagnostics), extra_timings=self.extra_timings, rules=self.rules
        )


class VerdictCache:
    """Bounded LRUs of successful stage runs, and of passing per-stage outcomes by file set."""

    def __init__(self, max_entries: int = 128) -> None:
        if max_entries < 1:
            raise ValueError("a verdict cache needs room for at least one entry")
        self.max_entries = max_entries
        self._entries: OrderedDict[CacheKey, StageRun] = OrderedDict()
        self._stages: OrderedDict[CacheKey, dict[Phase, StageVerdict]] = OrderedDict()
        self.hits = 0
        self.misses = 0

    def get(self, key: CacheKey) -> StageRun | None:
        run = self._entries.get(key)
        if run is None:
            self.misses += 1
            return None
        self._entries.move_to_end(key)
        self.hits += 1
        return run

    def put(self, key: CacheKey, run: StageRun) -> None:
        if run.failed or run.budgets:
            raise ValueError("only successful stage runs may be cached")
        self._entries[key] = run
        self._entries.move_to_end(key)
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)

    def stages(self, key: CacheKey) -> Mapping[Phase, StageVerdict]:
        """The passing outcomes kept for ``key`` (file-set checksum, fingerprint, options)."""
        found = self._stages.get(key)
        if found is None:
            return {}
        self._stages.move_to_end(key)
        return dict(found)

    def keep_stages(self, key: CacheKey, verdicts: Mapping[Phase, StageVerdict]) -> None:
        """Add ``verdicts`` to what is kept for ``key``."""
        if not verdicts:
            return
        self._stages[key] = {**self._stages.get(key, {}), **verdicts}
        self._stages.move_to_end(key)
        while len(self._stages) > self.max_entries:
            self._stages.popitem(last=False)

    def clear(self) -> None:
        self._entries.clear()
        self._stages.clear()

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: object) -> bool:
        return key in self._entries


T = TypeVar("T")


class SingleFlight(Generic[T]):
    """Concurrent calls with the same key share one execution.

    The work runs in its own task, so a caller that is cancelled (an admission request whose
    client went away) does not cancel it for the others still waiting.
    """

    def __init__(self) -> None:
        self._running: dict[object, asyncio.Task[T]] = {}

    async def run(self, key: object, work: Callable[[], Awaitable[T]]) -> T:
        loop = asyncio.get_running_loop()
        task = self._running.get(key)
        if task is None or task.get_loop() is not loop:
            task = loop.create_task(_call(work))
            self._running[key] = task
            task.add_done_callback(lambda t: self._forget(key, t))
        return await asyncio.shield(task)

    def _forget(self, key: object, task: asyncio.Task[T]) -> None:
        if self._running.get(key) is task:
            del self._running[key]

    def __len__(self) -> int:
        return len(self._running)


async def _call(work: Callable[[], Awaitable[T]]) -> T:
    return await work()
