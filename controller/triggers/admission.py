"""The admission trigger: "would this change still give a valid configuration?"

The same pipeline as reconciliation, over the view "live store + the proposal" (an
:class:`~controller.resources.Overlay`): render with the running engine, ``Pipeline.check``,
allow or deny. Nothing here speaks HTTP; the webhook server turns AdmissionReviews into calls
of :meth:`AdmissionJudge.judge_object` and :meth:`AdmissionJudge.judge_spec` and back.

* **Unchanged output** (an object the templates ignore) renders to bytes the pipeline has
  already judged: the stages that read only the files (syntax, schema, ``haproxy -c``,
  external validators) are reused, and only the rules stage judges the new object.
* **Identical concurrent candidates** (kubectl retries, several replicas' webhooks called for
  one apply share nothing, but one replica may be asked twice) share one run, keyed by the
  proposal's content and the store version it is judged against.
* **Distinct concurrent candidates** queue for a run slot (one more than the CPUs this process
  may use, see :func:`run_slots`), earliest deadline first, and their renders pass one at a
  time through a second queue: a render holds the GIL, so two renders side by side each take
  twice as long and a burst of them would all finish late; one at a time, the earliest
  requests finish early while the checks of the others (``haproxy -c`` and the rule workers
  are processes of their own) overlap the next render. A queued run whose every requester has
  been answered (its deadline passed) is dropped before it starts, so a burst past its
  deadlines leaves no work behind.
* **Recovery exception** (ADR-0020): when the live configuration is already invalid, a proposal
  passes only if both renders complete and their output checksums are identical: it cannot
  make things worse, and it cannot be blamed for what was already broken. The live side is
  judged once per store version, engine and HTTP content, not once per proposal.
* **Deadlines**: every judgement has one (the API server's timeout minus a margin); an overrun
  is answered with the reason, denying unless told to allow.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import heapq
import itertools
import json
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from controller.diagnostics import Diagnostic, Severity
from controller.observability import get_logger
from controller.resources import IndexedStoreView, Overlay
from controller.spec import HAProxyTemplateConfigSpec
from controller.triggers.engine import Engine, EngineFactory, evaluate
from controller.validation import ValidationReport, cpu_slots

__all__ = ["AdmissionDecision", "AdmissionJudge", "Slots", "short_reason"]

_log = get_logger("controller.admission")

Operation = Literal["CREATE", "UPDATE", "DELETE"]
_OPS: dict[str, Literal["create", "update", "delete"]] = {
    "CREATE": "create",
    "UPDATE": "update",
    "DELETE": "delete",
}
_MAX_WARNINGS = 10


_LiveMemo = tuple[
    "weakref.ref[Engine]", object, Mapping[str, str] | None, "asyncio.Task[str | None]"
]
"""(engine, store version, HTTP content, the live checksum's judgement). The engine is held
weakly: after a spec swap the memo must not keep the old renderer and its caches alive."""


@dataclass(frozen=True)
class AdmissionDecision:
    allowed: bool
    message: str = ""
    warnings: tuple[str, ...] = ()
    rule_ids: tuple[str, ...] = ()
    checksum: str | None = None
    """Checksum of the proposal's rendered file set, when it rendered."""
    cached: bool = False
    timed_out: bool = False
    """The judgement did not finish by the deadline: allowed or denied by policy, unjudged."""
    diagnostics: tuple[Diagnostic, ...] = field(default=(), repr=False)


def _where(d: Diagnostic) -> str:
    parts = []
    if d.location is not None and d.location.file:
        parts.append(f"{d.location.file}:{d.location.line}" if d.location.line else d.location.file)
    if d.template_location is not None and d.template_location.template:
        line = d.template_location.line
        parts.append(f"template {d.template_location.template}" + (f":{line}" if line else ""))
    return f" ({', '.join(parts)})" if parts else ""


def short_reason(diagnostics: Sequence[Diagnostic], limit: int = 3) -> str:
    """What kubectl prints: the first errors, each with its rule id and where it is."""
    errors = [d for d in diagnostics if d.severity.rank <= Severity.ERROR.rank] or list(diagnostics)
    lines = [f"{d.rule_id}: {d.message}{_where(d)}" for d in errors[:limit]]
    more = len(errors) - limit
    if more > 0:
        lines.append(f"... and {more} more finding(s)")
    return "; ".join(lines)[:2000]


def _warnings(report: ValidationReport | None) -> tuple[str, ...]:
    if report is None:
        return ()
    return tuple(
        f"{d.rule_id}: {d.message}{_where(d)}"[:500]
        for d in report.diagnostics
        if d.severity is Severity.WARNING
    )[:_MAX_WARNINGS]


class AdmissionJudge:
    """Judges proposals against the live store with the running engine.

    ``engine`` and ``view`` are read on every call, so a spec swap or a new watch set is
    picked up without telling the judge; ``baseline_valid`` says whether the live configuration
    currently validates (the recovery exception needs it).
    """

    def __init__(
        self,
        *,
        engine: Callable[[], Engine | None],
        view: Callable[[], IndexedStoreView | None],
        baseline_valid: Callable[[], bool],
        engine_factory: EngineFactory,
        allow_on_timeout: bool = False,
        concurrency: int | None = None,
        on_verdict: Callable[[str, AdmissionDecision], None] | None = None,
        http: Callable[[], Mapping[str, str] | None] = lambda: None,
    ) -> None:
        self._engine = engine
        self._view = view
        self._baseline_valid = baseline_valid
        self.engine_factory = engine_factory
        self.allow_on_timeout = allow_on_timeout
        self.slots = Slots(concurrency or run_slots())
        """Runs in flight at once (None: :func:`run_slots`)."""
        self.renders = Slots(1)
        """Renders in flight at once: one, as the GIL runs one anyway."""
        self._inflight: dict[str, _Flight] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._live: _LiveMemo | None = None
        self.runs = 0
        """Judgements started (joined and dropped ones are not counted)."""
        self.dropped = 0
        """Queued judgements dropped because every requester had been answered."""
        self.on_verdict = on_verdict
        self.http = http
        """The accepted content of the HTTP sources (what the running templates read)."""

    # --- objects --------------------------------------------------------------------------

    async def judge_object(
        self,
        collection: str,
        operation: str,
        obj: Mapping[str, Any] | None,
        old: Mapping[str, Any] | None,
        *,
        deadline: float,
    ) -> AdmissionDecision:
        engine, view = self._engine(), self._view()
        if engine is None or view is None:
            return AdmissionDecision(False, "the controller has no synced store yet; try again")
        op = _OPS.get(operation)
        if op is None:
            return AdmissionDecision(True, f"operation {operation} is not judged")
        subject = old if op == "delete" else obj
        if not isinstance(subject, Mapping):
            return AdmissionDecision(False, f"{operation} without an object to judge")
        if collection not in view.names():
            return AdmissionDecision(True, f"{collection} is not watched by the running spec")
        version = getattr(view, "version", None)
        key = _key(collection, op, subject, version)

        async def run() -> AdmissionDecision:
            proposal = Overlay(view, collection, op, subject)
            return await self._judge(engine, view, proposal, deadline)

        return await self._shared(key, run, deadline)

    async def _judge(
        self, engine: Engine, live: IndexedStoreView, proposal: IndexedStoreView, deadline: float
    ) -> AdmissionDecision:
        gate = self.renders.hold(deadline)
        render, verdict = await evaluate(engine, proposal, self.http(), gate=gate)
        report = verdict.report
        checksum = report.metadata.checksum
        if verdict.valid:
            return AdmissionDecision(
                True,
                warnings=_warnings(report),
                checksum=checksum,
                cached=report.metadata.cache_hit,
            )
        if not self._baseline_valid():
            live_checksum = await self._live_checksum(engine, live, deadline)
            return self._recovery(render is not None, checksum, live_checksum, report)
        return self._deny(report, checksum)

    async def _live_checksum(
        self, engine: Engine, live: IndexedStoreView, deadline: float
    ) -> str | None:
        """The live configuration's checksum when it renders and reaches the pipeline (None:
        it does not), judged once per store version, engine and HTTP content: every proposal
        made while the live configuration is invalid compares against the same one. Shared by
        concurrent callers; a view without a version is judged every time."""
        version = getattr(live, "version", None)
        http = self.http()
        memo = self._live
        if (
            memo is not None
            and version is not None
            and memo[0]() is engine
            and memo[1] == version
            and memo[2] == http
            and not (memo[3].done() and (memo[3].cancelled() or memo[3].exception()))
        ):
            return await asyncio.shield(memo[3])

        async def judge() -> str | None:
            gate = self.renders.hold(deadline)
            rendered, verdict = await evaluate(engine, live, http, gate=gate)
            return verdict.report.metadata.checksum if rendered is not None else None

        task = asyncio.get_running_loop().create_task(judge())
        if version is not None:
            self._live = (weakref.ref(engine), version, http, task)
        return await asyncio.shield(task)

    def _recovery(
        self,
        rendered: bool,
        checksum: str | None,
        live_checksum: str | None,
        report: ValidationReport,
    ) -> AdmissionDecision:
        """The live configuration is invalid already: allow only what changes no output."""
        same = rendered and checksum is not None and checksum == live_checksum
        if same:
            return AdmissionDecision(
                True,
                warnings=(
                    "the running configuration is invalid already; this change leaves every "
                    "output unchanged, so it is allowed",
                    *_warnings(report),
                )[:_MAX_WARNINGS],
                checksum=checksum,
            )
        return self._deny(
            report,
            checksum,
            prefix="the running configuration is invalid already and this change alters it: ",
        )

    def _deny(
        self, report: ValidationReport, checksum: str | None, prefix: str = ""
    ) -> AdmissionDecision:
        diags = tuple(report.diagnostics)
        return AdmissionDecision(
            False,
            prefix + short_reason(diags),
            warnings=_warnings(report),
            rule_ids=tuple(sorted({d.rule_id for d in diags})),
            checksum=checksum,
            diagnostics=diags,
        )

    # --- the config itself ----------------------------------------------------------------

    async def judge_spec(
        self,
        spec: HAProxyTemplateConfigSpec | None,
        parse_errors: Sequence[Diagnostic],
        *,
        deadline: float,
    ) -> AdmissionDecision:
        """Lint, then render with the live store and validate with the proposed spec."""
        if spec is None:
            return self._deny_diags(parse_errors)
        key = "spec:" + hashlib.sha256(spec.model_dump_json(by_alias=True).encode()).hexdigest()

        async def run() -> AdmissionDecision:
            try:
                engine = await asyncio.to_thread(self.engine_factory, spec)
            except Exception as exc:
                diags = tuple(getattr(exc, "diagnostics", ()) or ())
                if diags:
                    return self._deny_diags(diags)
                return AdmissionDecision(False, f"the spec cannot be used: {exc}")
            if engine.lint is not None:
                # In a thread, like everything slow here: on the loop it would hold off the
                # deadline's wait_for, and the API server's timeout would answer instead.
                lint = await asyncio.to_thread(lambda: tuple(engine.lint(spec)))  # type: ignore[misc]
                if any(d.severity.rank <= Severity.ERROR.rank for d in lint):
                    return self._deny_diags(lint)
            view = self._view()
            if view is None:
                return AdmissionDecision(False, "the controller has no synced store yet")
            running = self._engine()
            if (
                running is not None
                and running.spec is not None
                and dict(running.spec.watched_resources) != dict(spec.watched_resources)
            ):
                return AdmissionDecision(
                    True,
                    warnings=(
                        "watchedResources changed: the new collections are listed and the spec "
                        "is validated against them before it is adopted; until then the running "
                        "configuration stays",
                    ),
                )
            # Validated against the accepted content; a source the running spec does not have
            # yet reads as empty until its first fetch.
            accepted = self.http() or {}
            http = {name: accepted.get(name, "") for name in spec.http_sources}
            gate = self.renders.hold(deadline)
            _, verdict = await evaluate(
                engine, view, http if spec.http_sources else None, gate=gate
            )
            report = verdict.report
            if verdict.valid:
                return AdmissionDecision(
                    True, warnings=_warnings(report), checksum=report.metadata.checksum
                )
            return self._deny(report, report.metadata.checksum)

        return await self._shared(key, run, deadline)

    def _deny_diags(self, diags: Sequence[Diagnostic]) -> AdmissionDecision:
        return AdmissionDecision(
            False,
            short_reason(diags),
            rule_ids=tuple(sorted({d.rule_id for d in diags})),
            diagnostics=tuple(diags),
        )

    # --- sharing, limits, deadlines -------------------------------------------------------

    async def _shared(
        self,
        key: str,
        run: Callable[[], Awaitable[AdmissionDecision]],
        deadline: float,
    ) -> AdmissionDecision:
        loop = asyncio.get_running_loop()
        flight = self._inflight.get(key)
        if flight is None:
            flight = self._inflight[key] = _Flight(loop.create_future())

            async def owner(flight: _Flight = flight) -> None:
                fut = flight.future
                try:
                    async with self.slots.hold(deadline):
                        flight.started = True
                        self.runs += 1
                        decision = await run()
                    if not fut.done():
                        fut.set_result(decision)
                except Exception as exc:  # a judgement must answer, never raise
                    _log.exception("admission judgement failed")
                    if not fut.done():
                        fut.set_result(AdmissionDecision(False, f"judging failed: {exc!r}"))
                finally:
                    self._forget(key, flight)

            flight.task = loop.create_task(owner())
            self._tasks.add(flight.task)  # held until done: the loop keeps only weak references
            flight.task.add_done_callback(self._tasks.discard)
        flight.waiters += 1
        remaining = deadline - loop.time()
        try:
            decision = await asyncio.wait_for(asyncio.shield(flight.future), max(remaining, 0.001))
        except TimeoutError:
            verb = "allowed" if self.allow_on_timeout else "denied"
            return AdmissionDecision(
                self.allow_on_timeout,
                f"the check did not finish within the webhook's deadline; {verb} by policy",
                timed_out=True,
            )
        finally:
            flight.waiters -= 1
            if flight.waiters == 0 and not flight.started and not flight.future.done():
                # Everyone who asked has been answered (or went away): a run that has not
                # started would only delay the runs queued behind it.
                self.dropped += 1
                self._forget(key, flight)
                if flight.task is not None:
                    flight.task.cancel()
        if self.on_verdict is not None:
            self.on_verdict(key, decision)
        return decision

    def _forget(self, key: str, flight: _Flight) -> None:
        if self._inflight.get(key) is flight:
            del self._inflight[key]


@dataclass(eq=False)
class _Flight:
    """One judgement and the requests waiting for it."""

    future: asyncio.Future[AdmissionDecision]
    task: asyncio.Task[None] | None = None
    waiters: int = 0
    started: bool = False


def run_slots() -> int:
    """Judgements in flight at once by default: one more than the CPUs this process may use.

    A judgement holds its slot through its render and stages (Python: one core at most, the
    GIL's) and through its ``haproxy -c`` (a process, bounded by the sandbox to the CPUs). With
    one slot per CPU, a core idles whenever every judgement in flight is in its Python part;
    the extra one renders while the others' checks hold the cores, and the sandbox still runs
    no more checks than there are CPUs. Measured with bursts of 150 creates at 1,000 Ingresses
    on two CPUs, nine alternated pairs: the host's busy share higher in every pair (by 0.5-2.5
    points), the same CPU per proposal, the p99 lower in six (a small gain: median -61 ms of
    about 6 s; docs/admission.md)."""
    return cpu_slots() + 1


class Slots:
    """At most ``size`` holders at once; waiters are served earliest deadline first, in
    arrival order among equal deadlines (the API server gives every call of one webhook the
    same timeout, so in practice first come, first served).

    Unlike ``asyncio.Semaphore`` the order is the deadline's, and a waiter that is cancelled
    leaves the queue without taking a turn (a slot handed to it as it was cancelled goes on
    to the next)."""

    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError("slots need a size of at least 1")
        self.size = size
        self.busy = 0
        self._queue: list[tuple[float, int, asyncio.Future[None]]] = []
        self._seq = itertools.count()

    @property
    def waiting(self) -> int:
        return sum(1 for _, _, f in self._queue if not f.done())

    async def acquire(self, deadline: float) -> None:
        if self.busy < self.size and not self.waiting:
            self.busy += 1
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._queue, (deadline, next(self._seq), fut))
        try:
            await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():
                self.release()  # handed over as it was cancelled: pass it on
            else:
                fut.cancel()  # left in the heap, skipped when it comes up
            raise

    def release(self) -> None:
        while self._queue:
            _, _, fut = heapq.heappop(self._queue)
            if not fut.done():
                fut.set_result(None)  # the slot goes to the next waiter directly
                return
        self.busy -= 1

    @contextlib.asynccontextmanager
    async def hold(self, deadline: float) -> AsyncIterator[None]:
        await self.acquire(deadline)
        try:
            yield
        finally:
            self.release()


def _key(collection: str, op: str, obj: Mapping[str, Any], version: object) -> str:
    body = json.dumps(obj, sort_keys=True, default=str).encode()
    return f"{collection}:{op}:{version}:{hashlib.sha256(body).hexdigest()}"
