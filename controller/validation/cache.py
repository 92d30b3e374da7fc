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

__all__ = ["CacheKey", "SingleFlight", "StageRun", "VerdictCache"]

CacheKey = tuple[str, str, str]
"""(file-set checksum, pipeline fingerprint, options key)."""


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


class VerdictCache:
    """Bounded LRU of successful stage runs."""

    def __init__(self, max_entries: int = 128) -> None:
        if max_entries < 1:
            raise ValueError("a verdict cache needs room for at least one entry")
        self.max_entries = max_entries
        self._entries: OrderedDict[CacheKey, StageRun] = OrderedDict()
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

    def clear(self) -> None:
        self._entries.clear()

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
