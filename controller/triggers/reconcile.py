"""The reconcile trigger: store changes in, validated deployments out.

Adapters (the directory watcher, kopf handlers) only feed the store and call :meth:`notify`.
Everything else happens here, in one task, so runs never overlap and every run sees one
immutable snapshot:

    snapshot → render → Pipeline.check → (valid) deploy to every target → publish success
                                       → (invalid) publish the failure, keep the last good set

Scheduling coalesces bursts without losing the last update:

* **leading edge** — a change that arrives after a quiet period runs at once;
* **trailing debounce** — changes arriving during or shortly after a run wait until
  ``reconcile.debounce`` passed without a further change;
* **minInterval** — two runs start at least ``reconcile.minInterval`` apart;
* **no starvation** — a steady stream of changes still runs once per
  ``minInterval + debounce``;
* **resync** — a run every ``reconcile.resyncInterval`` even without changes (0 disables it);
* **retry** — a valid set that a target failed to deploy (HAProxy could not start, a reload
  was refused) is tried again after a back-off that doubles up to ``retry_max``, so a
  condition that clears by itself (a port freed) heals without waiting for the next edit.

The pending flag is cleared *before* the snapshot is taken — by a run and by a spec candidate
alike — so a change that lands while a run or a candidate renders always causes one more run;
the loop converges on the final state. A rejected candidate puts back what it had cleared.

A new HAProxyTemplateConfig spec is adopted only after it built a renderer and a pipeline,
passed lint (when the validation layer offers it) and rendered and validated against the
current objects. A rejected spec leaves the running one in place and is published with its
reasons. The first spec is the exception: with nothing running, a spec that builds is adopted
even when its first render fails, so that a later fix of the objects can make it deploy.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from controller.deploy import DeployResult, DeployTarget
from controller.diagnostics import Diagnostic, Phase, make
from controller.observability import METRICS, Metrics, bind, get_logger, object_ref
from controller.publish import Event, EventKind, Publisher
from controller.render import RenderResult
from controller.resources import StoreView
from controller.spec import HAProxyTemplateConfigSpec, ReconcileSettings
from controller.triggers.clock import Clock
from controller.triggers.engine import Engine, EngineFactory, VerdictLike, evaluate, failure_report
from controller.validation import ValidatedFileSet, ValidationReport

__all__ = [
    "Engine",
    "EngineFactory",
    "ReconcileTrigger",
    "SpecDecision",
]

_log = get_logger("controller.reconcile")

_TIMERS = frozenset({"resync", "retry"})
"""Triggers that the loop's own timers fire: they run at once (minInterval permitting) and are
not store changes."""
_MAX_OBJECTS = 100


# --- what the trigger needs from the layers below ------------------------------------------


class SnapshotSource(Protocol):
    """The store, as far as the trigger is concerned."""

    def snapshot(self) -> StoreView: ...


@dataclass(frozen=True)
class SpecDecision:
    accepted: bool
    diagnostics: tuple[Diagnostic, ...] = ()
    report: ValidationReport | None = None


@dataclass
class _SpecProposal:
    spec: HAProxyTemplateConfigSpec
    view: StoreView | None
    on_accept: Callable[[], None] | None
    future: asyncio.Future[SpecDecision]


@dataclass
class _Pending:
    since: float = math.inf
    """Monotonic time of the earliest change not yet covered by a run."""
    last: float = -math.inf
    """Monotonic time of the latest change."""
    leading: bool = False
    trigger: str = "change"
    objects: list[str] = field(default_factory=list)
    count: int = 0


class ReconcileTrigger:
    def __init__(
        self,
        source: SnapshotSource,
        targets: Sequence[DeployTarget],
        publisher: Publisher,
        engine_factory: EngineFactory,
        *,
        metrics: Metrics | None = None,
        drift_interval: float | None = 10.0,
        retry_initial: float = 1.0,
        retry_max: float = 30.0,
        clock: Clock | None = None,
        http: Callable[[], Mapping[str, str]] | None = None,
    ) -> None:
        self.source = source
        self.targets = list(targets)
        self.publisher = publisher
        self.engine_factory = engine_factory
        self.metrics = metrics or METRICS
        self.drift_interval = drift_interval
        self.retry_initial = retry_initial
        self.retry_max = retry_max
        self.http = http
        """The accepted content of the HTTP sources, read at every run (None: no sources)."""
        self.clock = clock if clock is not None else Clock()
        """What schedules read and wait on (debounce, min interval, resync, retry)."""
        self.engine: Engine | None = None
        self.settings = ReconcileSettings()
        self.runs = 0
        """Render + validate runs so far (spec candidates included)."""
        self.last_report: ValidationReport | None = None
        self.last_deployed: ValidatedFileSet | None = None
        self.serving: str | None = None
        """Checksum of what every target confirmed running; None before the first success
        (and after a deploy that left no confirmed set)."""
        self.retry_attempts = 0
        """Failed deploys in a row; the back-off grows with it."""
        self._retry_at: float | None = None
        self._lock = threading.Lock()
        self._pending: _Pending | None = None
        self._specs: list[_SpecProposal] = []
        self._running = False
        self._last_start = -math.inf
        self._last_end = -math.inf
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake: asyncio.Event | None = None
        self._idle: asyncio.Event | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._stopping = False

    # --- feeding ------------------------------------------------------------------------

    def notify(self, change: Any = None, *, trigger: str = "change") -> None:
        """Record that the store changed. Safe to call from any thread, never blocks."""
        now = self.clock.now()
        ref = _change_ref(change)
        with self._lock:
            p = self._pending
            if p is None:
                p = self._pending = _Pending(since=now, trigger=trigger)
                p.leading = not self._running and now - self._last_start >= (
                    self.settings.min_interval
                )
            p.last = now
            p.count += 1
            if ref is not None and len(p.objects) < _MAX_OBJECTS and ref not in p.objects:
                p.objects.append(ref)
        if trigger not in _TIMERS:
            self.metrics.reconcile_changes.inc()
        self._poke()

    def __call__(self, change: Any) -> None:
        """Store listener interface (``store.subscribe(trigger)``)."""
        self.notify(change)

    def propose_spec(
        self,
        spec: HAProxyTemplateConfigSpec,
        *,
        view: StoreView | None = None,
        on_accept: Callable[[], None] | None = None,
    ) -> asyncio.Future[SpecDecision]:
        """Queue a spec change; the future says whether it was adopted.

        ``view`` is the snapshot to try the spec on when its watched collections differ from
        the live store's (the adapter builds it); ``on_accept`` runs just before the swap so
        the adapter can reconfigure the live store.
        """
        loop = self._loop or asyncio.get_running_loop()
        fut: asyncio.Future[SpecDecision] = loop.create_future()
        self._specs.append(_SpecProposal(spec, view, on_accept, fut))
        self._poke()
        return fut

    def _poke(self) -> None:
        loop, wake = self._loop, self._wake
        if loop is None or wake is None:
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            wake.set()
        else:
            loop.call_soon_threadsafe(wake.set)

    # --- lifecycle ------------------------------------------------------------------------

    async def start(self, spec: HAProxyTemplateConfigSpec | None) -> SpecDecision | None:
        """Adopt the first spec, run the startup reconcile, then keep running in the background.

        Call it after the adapter loaded every object: the startup run renders what is in
        the store at that moment and nothing earlier is ever rendered.
        """
        self._loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        self._idle = asyncio.Event()
        decision = None
        if spec is not None:
            decision = await self._adopt(
                _SpecProposal(spec, None, None, self._loop.create_future()), trigger="startup"
            )
        if self.engine is not None and (decision is None or decision.report is None):
            await self._run("startup", self.clock.now(), [])
        self._tasks.append(asyncio.create_task(self._main(), name="reconcile"))
        if self.drift_interval:
            self._tasks.append(asyncio.create_task(self._drift(), name="drift-check"))
        return decision

    async def stop(self) -> None:
        self._stopping = True
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks.clear()
        for p in self._specs:
            if not p.future.done():
                p.future.cancel()

    async def wait_idle(self, timeout: float = 30.0) -> None:
        """Until nothing is pending or running (tests, the benchmark)."""
        assert self._idle is not None, "start() first"
        deadline = time.monotonic() + timeout
        while True:
            self._idle.clear()
            if self._is_idle():
                return
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError("reconcile loop did not become idle")
            try:
                await asyncio.wait_for(self._idle.wait(), remaining)
            except TimeoutError:
                continue

    def _is_idle(self) -> bool:
        with self._lock:
            # Without an engine pending changes wait for a usable spec; nothing can run.
            nothing_pending = self._pending is None or self.engine is None
            return nothing_pending and not self._running and not self._specs

    # --- the loop -------------------------------------------------------------------------

    async def _main(self) -> None:
        assert self._wake is not None and self._idle is not None
        while not self._stopping:
            if self._specs:
                proposal = self._specs.pop(0)
                await self._adopt(proposal, trigger="config")
                continue
            delay = self._next_delay()
            if delay is not None and delay <= 0:
                await self._run_pending()
                continue
            if self._is_idle():
                self._idle.set()
            self._wake.clear()
            if self._specs or (delay is not None and delay <= 0):
                continue
            timeout = delay if delay is not None else self._timer_delay()
            woken = await self.clock.wait(
                self._wake, max(timeout, 0.0) if math.isfinite(timeout) else None
            )
            if not woken and self._next_delay() is None:
                self._fire_timers()

    def _fire_timers(self) -> None:
        """Turn a due retry or resync into a pending run (a retry renders afresh too: the
        latest state is what should run once the target is back)."""
        now = self.clock.now()
        if self._retry_at is not None and self._retry_at <= now:
            self._retry_at = None
            self.notify(trigger="retry")
        elif self._resync_delay() <= 0:
            self.notify(trigger="resync")

    def _timer_delay(self) -> float:
        """Seconds until the next retry or resync; infinite when neither is due ever."""
        retry = math.inf if self._retry_at is None else self._retry_at - self.clock.now()
        return min(retry, self._resync_delay())

    def _next_delay(self) -> float | None:
        """Seconds until the pending run may start; None when nothing is pending."""
        if self.engine is None:
            return None
        with self._lock:
            p = self._pending
            if p is None:
                return None
            s = self.settings
            now = self.clock.now()
            earliest = self._last_start + s.min_interval
            if p.leading or p.trigger in _TIMERS:
                at = max(now, earliest)
            else:
                quiet = p.last + s.debounce
                cap = p.since + s.min_interval + s.debounce
                at = max(min(quiet, cap), earliest)
            return at - now

    def _resync_delay(self) -> float:
        if self.settings.resync_interval <= 0:
            return math.inf  # disabled
        return self._last_end + self.settings.resync_interval - self.clock.now()

    async def _run_pending(self) -> None:
        with self._lock:
            p = self._pending
            self._pending = None
            if p is None:
                return
            self._running = True
        try:
            await self._run(p.trigger, p.since, p.objects)
        finally:
            with self._lock:
                self._running = False

    async def _run(self, trigger: str, since: float, objects: list[str]) -> None:
        """One reconcile: snapshot, render, check, then deploy or publish the failure."""
        engine = self.engine
        if engine is None:
            return
        self._last_start = self.clock.now()
        try:
            view = self.source.snapshot()
            self._count_objects(view)
            render, verdict = await self._evaluate(engine, view, trigger)
            await self._conclude(trigger, since, objects, render, verdict)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the loop must survive anything a run throws
            _log.exception("reconcile run failed", trigger=trigger)
            report = failure_report("F0001", Phase.DEPLOY, f"reconcile run failed: {exc!r}")
            self.publisher.publish(
                Event.rejected(trigger, report, objects=objects, serving=self.serving)
            )
        finally:
            self._last_end = self.clock.now()

    async def _evaluate(
        self, engine: Engine, view: StoreView, trigger: str
    ) -> tuple[RenderResult | None, VerdictLike]:
        self.runs += 1
        self.metrics.reconcile_runs.labels(trigger).inc()
        return await evaluate(engine, view, self.http() if self.http is not None else None)

    async def _conclude(
        self,
        trigger: str,
        since: float,
        objects: list[str],
        render: RenderResult | None,
        verdict: VerdictLike,
    ) -> list[DeployResult] | None:
        report = verdict.report
        self.last_report = report
        self.publisher.record_verdict(trigger, report)
        validated = verdict.validated
        with bind(trigger=trigger, checksum=report.metadata.checksum):
            if validated is None:
                # The current state does not validate; retrying would judge it the same way.
                self._retry_at = None
                self.publisher.publish(
                    Event.rejected(
                        trigger, report, render=render, objects=objects, serving=self.serving
                    )
                )
                return None
            results = [await target.deploy(validated) for target in self.targets]
            retry_in = None
            if all(r.ok for r in results):
                self.last_deployed = validated
                self.retry_attempts = 0
                self._retry_at = None
                if math.isfinite(since) and any(r.reloaded for r in results):
                    self.metrics.reconcile_latency.observe(max(self.clock.now() - since, 0.0))
            else:
                retry_in = self._schedule_retry()
            event = Event.deployed(
                trigger, validated, results, render=render, objects=objects, retry_in=retry_in
            )
            self.serving = event.serving
            self.publisher.publish(event)
            return results

    def _schedule_retry(self) -> float:
        self.retry_attempts += 1
        delay = min(self.retry_initial * 2.0 ** (self.retry_attempts - 1), self.retry_max)
        self._retry_at = self.clock.now() + delay
        _log.warning("deploy failed; retrying", attempt=self.retry_attempts, retry_in=delay)
        return delay

    # --- spec changes ---------------------------------------------------------------------

    async def _adopt(self, proposal: _SpecProposal, *, trigger: str) -> SpecDecision:
        with self._lock:
            self._running = True
        try:
            decision = await self._try_spec(proposal, trigger)
        finally:
            with self._lock:
                self._running = False
        if not proposal.future.done():
            proposal.future.set_result(decision)
        return decision

    async def _try_spec(self, proposal: _SpecProposal, trigger: str) -> SpecDecision:
        spec = proposal.spec
        self._last_start = self.clock.now()
        try:
            engine = self.engine_factory(spec)
        except Exception as exc:
            diags = tuple(getattr(exc, "diagnostics", ()) or ())
            if not diags:
                diags = (make("E7010", Phase.SPEC, f"cannot build the pipeline: {exc}"),)
            return self._reject(trigger, diags, None)
        if engine.lint is not None:
            lint_errors = tuple(d for d in engine.lint(spec) if d.severity.rank <= 1)
            if lint_errors:
                return self._reject(trigger, lint_errors, None)

        # Cleared before the snapshot, as a run does: a change that lands while the candidate
        # renders marks a new run. Put back if the candidate is rejected, since the running
        # spec has not rendered those changes either.
        with self._lock:
            taken = self._pending
            self._pending = None
        try:
            view = proposal.view if proposal.view is not None else self.source.snapshot()
            self._count_objects(view)
            render, verdict = await self._evaluate(engine, view, trigger)
        except Exception as exc:
            self._restore_pending(taken)
            _log.exception("trying the spec failed")
            diag = make("F0001", Phase.SPEC, f"trying the configuration failed: {exc!r}")
            return self._reject(trigger, (diag,), None)
        first = self.engine is None
        if verdict.validated is None and not first:
            self._restore_pending(taken)
            self.publisher.record_verdict(trigger, verdict.report)
            return self._reject(trigger, tuple(verdict.report.diagnostics), verdict.report, render)

        if proposal.on_accept is not None:
            proposal.on_accept()
        self.engine = engine
        self.settings = spec.reconcile
        self.metrics.spec_changes.labels("accepted").inc()
        self.publisher.publish(
            Event(EventKind.SPEC_ACCEPTED, trigger, message="configuration spec adopted")
        )
        objects = taken.objects if taken is not None else []
        await self._conclude(trigger, self._last_start, objects, render, verdict)
        self._last_end = self.clock.now()
        return SpecDecision(True, tuple(verdict.report.diagnostics), verdict.report)

    def _restore_pending(self, taken: _Pending | None) -> None:
        """Merge changes a rejected candidate had taken back into what is pending."""
        if taken is None:
            return
        with self._lock:
            p = self._pending
            if p is None:
                self._pending = taken
            else:
                p.since = min(p.since, taken.since)
                p.last = max(p.last, taken.last)
                p.count += taken.count
                p.leading = p.leading or taken.leading
                for ref in taken.objects:
                    if len(p.objects) < _MAX_OBJECTS and ref not in p.objects:
                        p.objects.append(ref)
        self._poke()

    def _reject(
        self,
        trigger: str,
        diags: tuple[Diagnostic, ...],
        report: ValidationReport | None,
        render: RenderResult | None = None,
    ) -> SpecDecision:
        self.metrics.spec_changes.labels("rejected").inc()
        running = (
            "the running configuration stays in place"
            if self.engine
            else ("no configuration is running yet")
        )
        head = make(
            "E7010",
            Phase.SPEC,
            f"configuration change rejected ({len(diags)} finding(s)); {running}",
        )
        all_diags = (head, *diags)
        self.publisher.publish(
            Event(
                EventKind.SPEC_REJECTED,
                trigger,
                report=report,
                render=render,
                diagnostics=all_diags,
                message=head.message,
            )
        )
        self._last_end = self.clock.now()
        return SpecDecision(False, all_diags, report)

    # --- background checks ----------------------------------------------------------------

    async def _drift(self) -> None:
        assert self.drift_interval
        while not self._stopping:
            await asyncio.sleep(self.drift_interval)
            for target in self.targets:
                try:
                    result = await target.check_drift()
                except Exception:
                    _log.exception("drift check failed", target=getattr(target, "name", "?"))
                    continue
                if result is not None:
                    self.publisher.publish(
                        Event(
                            EventKind.RUNTIME,
                            "drift",
                            results=(result,),
                            diagnostics=result.diagnostics,
                            message=f"drift repaired on {result.target}: "
                            + ", ".join(result.drift),
                        )
                    )

    def _count_objects(self, view: StoreView) -> None:
        try:
            for name in view.names():
                self.metrics.store_objects.labels(name).set(len(view.collection(name)))
        except Exception:
            _log.debug("cannot count objects", exc_info=True)


def _change_ref(change: Any) -> str | None:
    if change is None:
        return None
    obj = getattr(change, "new", None) or getattr(change, "old", None)
    if not isinstance(obj, Mapping):
        return None
    try:
        return object_ref(obj)
    except Exception:
        return None
