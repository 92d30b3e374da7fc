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
* **Recovery exception** (ADR-0020): when the live configuration is already invalid, a proposal
  passes only if both renders complete and their output checksums are identical: it cannot
  make things worse, and it cannot be blamed for what was already broken.
* **Deadlines**: every judgement has one (the API server's timeout minus a margin); an overrun
  is answered with the reason, denying unless told to allow.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from controller.diagnostics import Diagnostic, Severity
from controller.observability import get_logger
from controller.resources import IndexedStoreView, Overlay
from controller.spec import HAProxyTemplateConfigSpec
from controller.triggers.engine import Engine, EngineFactory, evaluate
from controller.validation import ValidationReport

__all__ = ["AdmissionDecision", "AdmissionJudge", "short_reason"]

_log = get_logger("controller.admission")

Operation = Literal["CREATE", "UPDATE", "DELETE"]
_OPS: dict[str, Literal["create", "update", "delete"]] = {
    "CREATE": "create",
    "UPDATE": "update",
    "DELETE": "delete",
}
_MAX_WARNINGS = 10


@dataclass(frozen=True)
class AdmissionDecision:
    allowed: bool
    message: str = ""
    warnings: tuple[str, ...] = ()
    rule_ids: tuple[str, ...] = ()
    checksum: str | None = None
    """Checksum of the proposal's rendered file set, when it rendered."""
    cached: bool = False
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
        concurrency: int = 8,
        on_verdict: Callable[[str, AdmissionDecision], None] | None = None,
        http: Callable[[], Mapping[str, str] | None] = lambda: None,
    ) -> None:
        self._engine = engine
        self._view = view
        self._baseline_valid = baseline_valid
        self.engine_factory = engine_factory
        self.allow_on_timeout = allow_on_timeout
        self._slots = asyncio.Semaphore(concurrency)
        self._inflight: dict[str, asyncio.Future[AdmissionDecision]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
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
            return await self._judge(engine, view, proposal)

        return await self._shared(key, run, deadline)

    async def _judge(
        self, engine: Engine, live: IndexedStoreView, proposal: IndexedStoreView
    ) -> AdmissionDecision:
        render, verdict = await evaluate(engine, proposal, self.http())
        report = verdict.report
        checksum = report.metadata.checksum
        if verdict.validated is not None:
            return AdmissionDecision(
                True,
                warnings=_warnings(report),
                checksum=checksum,
                cached=report.metadata.cache_hit,
            )
        if not self._baseline_valid():
            return await self._recovery(engine, live, render is not None, checksum, report)
        return self._deny(report, checksum)

    async def _recovery(
        self,
        engine: Engine,
        live: IndexedStoreView,
        rendered: bool,
        checksum: str | None,
        report: ValidationReport,
    ) -> AdmissionDecision:
        """The live configuration is invalid already: allow only what changes no output."""
        live_render, live_verdict = await evaluate(engine, live, self.http())
        same = (
            rendered
            and live_render is not None
            and checksum is not None
            and checksum == live_verdict.report.metadata.checksum
        )
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
            _, verdict = await evaluate(engine, view, http if spec.http_sources else None)
            report = verdict.report
            if verdict.validated is not None:
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
        run: Callable[[], Any],
        deadline: float,
    ) -> AdmissionDecision:
        loop = asyncio.get_running_loop()
        fut = self._inflight.get(key)
        if fut is None:
            fut = loop.create_future()
            self._inflight[key] = fut

            async def owner(fut: asyncio.Future[AdmissionDecision] = fut) -> None:
                try:
                    async with self._slots:
                        decision = await run()
                    if not fut.done():
                        fut.set_result(decision)
                except Exception as exc:  # a judgement must answer, never raise
                    _log.exception("admission judgement failed")
                    if not fut.done():
                        fut.set_result(AdmissionDecision(False, f"judging failed: {exc!r}"))
                finally:
                    self._inflight.pop(key, None)

            task = loop.create_task(owner())
            self._tasks.add(task)  # held until done: the loop keeps only weak references
            task.add_done_callback(self._tasks.discard)
        remaining = deadline - loop.time()
        try:
            decision = await asyncio.wait_for(asyncio.shield(fut), max(remaining, 0.001))
        except TimeoutError:
            verb = "allowed" if self.allow_on_timeout else "denied"
            return AdmissionDecision(
                self.allow_on_timeout,
                f"the check did not finish within the webhook's deadline; {verb} by policy",
            )
        if self.on_verdict is not None:
            self.on_verdict(key, decision)
        return decision


def _key(collection: str, op: str, obj: Mapping[str, Any], version: object) -> str:
    body = json.dumps(obj, sort_keys=True, default=str).encode()
    return f"{collection}:{op}:{version}:{hashlib.sha256(body).hexdigest()}"
