"""THE pipeline: the one way a candidate file set becomes a verdict.

Every trigger path — reconcile, admission, HTTP-source refresh, ``htc validate`` — calls
:meth:`Pipeline.validate` (or :meth:`Pipeline.check`, which also hands out the
:class:`ValidatedFileSet` that deploy targets demand). Keeping one entry point is what makes
"nothing deploys unless it passed every stage" checkable: there is no second code path that
could forget a stage.

The pipeline never raises for a bad candidate or a misbehaving stage. A render error, a
failing stage, a stage that crashes and a stage that runs out of time all come back as a
report; only cancellation propagates.

Stages are *judged* in order, but once the syntax stage has passed (its directive policy and
file-reference checks are what make a candidate safe to hand to ``haproxy -c``) the schema
stage, the sandboxed ``haproxy -c`` and the deferred rules run at the same time: ``haproxy -c``
and the rule worker are processes of their own, so the in-process stages use the time they
would otherwise wait. ``haproxy -c`` may start even earlier: when the syntax stage's *gate* —
a cheap line-level reading that declines anything it cannot read exactly — establishes that
those two checks will find nothing, the binary starts before the stage builds its full parse.
Without that answer nothing starts before the stage has passed. Outcomes are then read in
stage order, and the first stage that stops the run cancels the speculative work behind it
(the sandbox kills ``haproxy -c``'s process group), so the report — diagnostics,
``stagesRun``, ``stagesSkipped`` — is exactly what running one stage after the other would
produce.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from controller.diagnostics import Diagnostic, Location, Phase, make
from controller.observability import get_logger
from controller.render import MAIN_CONFIG, RenderResult
from controller.validation import gcpause, heap
from controller.validation.cache import (
    CacheKey,
    SingleFlight,
    StageRun,
    StageVerdict,
    VerdictCache,
)
from controller.validation.finalize import blocking, finalize
from controller.validation.options import InvalidOptionError, ValidationOptions
from controller.validation.report import (
    BudgetExhaustion,
    Counts,
    ReportMetadata,
    ReportStatus,
    RuleCounters,
    ValidationReport,
)
from controller.validation.sandbox import max_concurrency
from controller.validation.stage import Stage, StageContext, StageOutcome
from controller.validation.validated import (
    ValidatedFileSet,
    _issue,
    missing_phases,
    undeployable,
)

if TYPE_CHECKING:
    from controller.spec import HAProxyTemplateConfigSpec, ValidationSettings

__all__ = ["Pipeline", "PipelineSetupError", "Verdict"]

_log = get_logger("controller.validation")

_MAX_EXCEPTION_TEXT = 300

SPECULATIVE_PHASES = frozenset({Phase.SCHEMA, Phase.HAPROXY, Phase.RULES})
"""Phases that may run at the same time once every stage before them passed. None of them
writes to the shared context, and none has effects outside the process but ``haproxy -c`` in
its sandbox (the rules stage's worker only computes). External validators are not among them:
they may be remote services, and they see a candidate only after everything else accepted it.
"""
EARLY_PHASES = frozenset({Phase.HAPROXY})
"""Speculative phases that start as soon as the syntax stage's gate established that its
security checks will pass, before the stage itself has finished. Schema cannot (it reads the
stage's parse); the rules stage could, but its worker then competes with ``haproxy -c`` for
the second CPU while this process parses, which measured no faster."""
_START_ORDER = {Phase.HAPROXY: 0}
"""``haproxy -c`` is spawned first; the others start in stage order behind it."""


class Verdict:
    """A report, plus the deployable file set when (and only when) the report is valid.

    The file set is issued when first asked for (``issue``): issuing copies it and hashes
    its bytes again (``ValidatedFileSet``), 0.35 ms at 1,000 Ingresses, and an admission
    verdict only needs to know whether there would be one (:attr:`valid`)."""

    __slots__ = ("_issue", "_validated", "report")

    def __init__(
        self,
        report: ValidationReport,
        validated: ValidatedFileSet | None,
        *,
        issue: Callable[[], ValidatedFileSet] | None = None,
    ) -> None:
        self.report = report
        self._validated = validated
        self._issue = issue

    @property
    def validated(self) -> ValidatedFileSet | None:
        if self._validated is None and self._issue is not None:
            self._validated, self._issue = self._issue(), None
        return self._validated

    @property
    def valid(self) -> bool:
        """Whether :attr:`validated` is a file set, without issuing it."""
        return self._validated is not None or self._issue is not None


class PipelineSetupError(Exception):
    """``spec.validation`` cannot be turned into a pipeline (binary missing, bad overlay, ...).

    Carries diagnostics so callers report it like any other finding; a running controller
    keeps its previous pipeline.
    """

    def __init__(self, diagnostics: Sequence[Diagnostic]) -> None:
        self.diagnostics = list(diagnostics)
        super().__init__("; ".join(f"{d.rule_id}: {d.message}" for d in self.diagnostics))


def _ms(since: float) -> float:
    return round((time.perf_counter() - since) * 1000.0, 3)


class Pipeline:
    """Stages in order, a verdict cache, and per-call options."""

    def __init__(
        self,
        stages: Sequence[Stage],
        *,
        haproxy_version: str | None,
        cache: VerdictCache | None,
        options: ValidationOptions | None = None,
        overlap: bool | None = None,
        allow_partial: bool = False,
    ) -> None:
        phases = [s.phase for s in stages]
        if len(set(phases)) != len(phases):
            raise ValueError(f"each phase may appear once in a pipeline, got {phases}")
        self.stages: tuple[Stage, ...] = tuple(stages)
        self.haproxy_version = haproxy_version
        self.cache = cache
        self.options = options or ValidationOptions()
        self.overlap = max_concurrency() > 1 if overlap is None else overlap
        """Run the speculative stages at the same time (see the module docstring). Off, every
        stage waits for the one before it; the reports are the same either way. By default
        on when this process may use more than one CPU (affinity and cgroup quota): with a
        single CPU there is no second one for ``haproxy -c`` to run on."""
        self.allow_partial = allow_partial
        """Issue a ValidatedFileSet even without the syntax and haproxy stages (tests only;
        see ``controller.validation.validated``)."""
        self.fingerprint = self._fingerprint()
        self.stage_runs = 0
        """How many times the stages actually ran (not cache hits, not joined calls)."""
        self.phase_runs: dict[Phase, int] = {}
        """How many runs judged by each stage's fresh outcome. A stage whose outcome was
        reused for the same bytes (see :meth:`_reusable`) is not counted, nor one started
        ahead whose outcome was discarded because a stage before it stopped the run."""
        self.warmed_up = False
        self._window = _speculative_window(self.stages)
        self._flight: SingleFlight[StageRun] = SingleFlight()

    @property
    def phases(self) -> tuple[Phase, ...]:
        return tuple(s.phase for s in self.stages)

    def _fingerprint(self) -> str:
        parts = {
            "haproxyVersion": self.haproxy_version,
            "stages": [[s.phase.value, s.fingerprint()] for s in self.stages],
        }
        return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()

    @classmethod
    def from_spec(
        cls,
        spec: HAProxyTemplateConfigSpec,
        *,
        haproxy_binary: str | None = None,
        cache: VerdictCache | None = None,
    ) -> Pipeline:
        """The standard pipeline for a config: stages, options and cache from its
        ``spec.validation``. Raises :class:`PipelineSetupError` (with diagnostics) when the
        settings cannot be honoured."""
        from controller.validation.rules import rules_stage

        return cls.from_settings(
            spec.validation, haproxy_binary=haproxy_binary, cache=cache, rules=rules_stage(spec)
        )

    @classmethod
    def from_settings(
        cls,
        settings: ValidationSettings,
        *,
        haproxy_binary: str | None = None,
        cache: VerdictCache | None = None,
        rules: Stage | None = None,
    ) -> Pipeline:
        """syntax → schema → haproxy → rules → external, as ``settings`` describe them.

        ``rules`` is the spec's deferred-rule stage (``from_spec`` builds it when the spec
        has deferred or broken rules).

        The binary is ``haproxy_binary``, else ``settings.haproxyBinary``, else the detected
        default. The schema family is ``settings.haproxyVersion`` when given (an operator may
        pin it), else the binary's. The external stage is added only when validators are
        configured, so ``stagesRun`` never claims a check that did not exist.
        """
        from controller.validation.external import ExternalStage
        from controller.validation.haproxy import HaproxyBinary, HaproxyBinaryError, HaproxyStage
        from controller.validation.schema import (
            SchemaOverlayError,
            SchemaStage,
            UnsupportedVersionError,
        )
        from controller.validation.syntax import SyntaxStage

        try:
            options = ValidationOptions.from_settings(settings)
        except InvalidOptionError as exc:
            raise PipelineSetupError([make("E0005", Phase.PIPELINE, str(exc))]) from None
        try:
            binary = HaproxyBinary.detect(haproxy_binary or settings.haproxy_binary)
        except HaproxyBinaryError as exc:
            raise PipelineSetupError([exc.diagnostic]) from None
        try:
            # A full version lets the schema stage warn when it falls back to an older family.
            family = settings.haproxy_version or binary.version
            stages: list[Stage] = [
                SyntaxStage(allow_directives=settings.policy.allow_directives),
                SchemaStage(family, overlays=settings.schema_overlays),
                HaproxyStage(binary, timeout=settings.timeout),
            ]
            if rules is not None:
                stages.append(rules)
            if settings.external_validators:
                stages.append(ExternalStage(settings.external_validators))
        except (SchemaOverlayError, UnsupportedVersionError) as exc:
            raise PipelineSetupError(_setup_diagnostics(exc)) from None
        except ValueError as exc:
            raise PipelineSetupError([make("E0006", Phase.PIPELINE, str(exc))]) from None
        return cls(
            stages,
            haproxy_version=binary.version,
            cache=cache if cache is not None else VerdictCache(),
            options=options,
        )

    def warm_up(self) -> dict[str, float]:
        """Pay every per-process first-use cost now instead of on the first candidate.

        A long-running controller builds its pipeline once and then waits for candidates, so
        it calls this right after building: the schema stage compiles all its validators, the
        sandboxed stages probe which isolation layers this host offers (:meth:`Stage.warm_up`;
        the default does nothing). A failing warm-up is logged and only means the first
        candidate pays as it would have. Idempotent. Returns milliseconds spent per stage.

        Blocking (about a second in a fresh process, a few milliseconds for a later pipeline of
        the same HAProxy family); from a running event loop, prefer ``asyncio.to_thread``.
        """
        spent: dict[str, float] = {}
        for stage in self.stages:
            if type(stage).warm_up is Stage.warm_up:
                continue  # the default: nothing to warm
            started = time.perf_counter()
            try:
                stage.warm_up()
            except Exception:
                _log.exception("stage warm-up failed", stage=stage.phase.value)
            spent[f"{stage.phase.value}Ms"] = _ms(started)
        self.warmed_up = True
        return spent

    # --- the entry points ---------------------------------------------------------------

    async def validate(
        self, render: RenderResult, *, options: ValidationOptions | None = None
    ) -> ValidationReport:
        started = time.perf_counter()
        opts = options or self.options
        try:
            render_failed = blocking(render.diagnostics, opts)
            if render_failed or MAIN_CONFIG not in render.files:
                skipped = self._not_run(render, render_failed=render_failed)
                return self._assemble(render, skipped, opts, started, hit=False, judged=False)
            inputs = self._input_keys(render)
            key: CacheKey = (self._candidate_key(render, inputs), self.fingerprint, opts.key())
            if self.cache is not None:
                cached = self.cache.get(key)
                if cached is not None:
                    return self._assemble(render, cached, opts, started, hit=True)
            owner = False

            def work() -> Awaitable[StageRun]:
                nonlocal owner
                owner = True
                return self._run_stages(render, opts, key, inputs)

            # Every millisecond until the report is out delays the verdict, and the collector
            # finds nothing to free in what the stages build (it is their result): its pass
            # over those young objects (5-9 ms after a cold parse) waits until then — or for
            # MAX_PAUSE_S at most, as the pause is the whole process's (a slow external
            # validator must not keep the collector off for everything else).
            pause = gcpause.GcPause().begin()
            limit = asyncio.get_running_loop().call_later(gcpause.MAX_PAUSE_S, pause.end)
            try:
                run = await self._flight.run(key, work)
                # A caller that joined another's run gets template locations from its own map.
                return self._assemble(render, run, opts, started, hit=False, refresh=not owner)
            finally:
                limit.cancel()
                pause.end()
                if owner:
                    # What the stages built is garbage now; give its pages back (see heap).
                    heap.release_soon()
        except Exception as exc:
            # Only a bug in the pipeline itself gets here; still a report, never a crash.
            _log.exception("pipeline failed outside any stage")
            return self._crashed(render, opts, started, exc)

    def _input_keys(self, render: RenderResult) -> dict[Phase, str]:
        """Per stage that judges more than the file set (the rules stage reads resources and
        extraContext): the digest of those inputs. The other stages judge the bytes alone."""
        out: dict[Phase, str] = {}
        for stage in self.stages:
            digest = stage.input_key(render)
            if digest is not None:
                out[stage.phase] = digest
        return out

    def _candidate_key(self, render: RenderResult, inputs: Mapping[Phase, str]) -> str:
        """The file set's checksum, plus the digest of any other input a stage judges, so a
        cached verdict is reused only for the same bytes *and* the same inputs."""
        if not inputs:
            return render.files.checksum
        extra = [f"{phase.value}={digest}" for phase, digest in inputs.items()]
        joined = "\n".join([render.files.checksum, *extra])
        return hashlib.sha256(joined.encode()).hexdigest()

    async def check(
        self, render: RenderResult, *, options: ValidationOptions | None = None
    ) -> Verdict:
        report = await self.validate(render, options=options)
        if not report.valid:
            return Verdict(report, None)
        missing = missing_phases(report)
        if missing and not self.allow_partial:
            return Verdict(undeployable(report, missing), None)
        files, fingerprint, partial = render.files, self.fingerprint, self.allow_partial
        return Verdict(
            report, None, issue=lambda: _issue(files, report, fingerprint, partial=partial)
        )

    # --- running the stages ---------------------------------------------------------------

    async def _run_stages(
        self,
        render: RenderResult,
        opts: ValidationOptions,
        key: CacheKey,
        inputs: Mapping[Phase, str] | None = None,
    ) -> StageRun:
        """``inputs``: :meth:`_input_keys` of ``render`` (computed when not given)."""
        self.stage_runs += 1
        if inputs is None:
            inputs = self._input_keys(render)
        ctx = StageContext(
            render=render,
            haproxy_version=self.haproxy_version,
        )
        files_key: CacheKey = (render.files.checksum, self.fingerprint, opts.key())
        reused = self._reusable(files_key, inputs)
        progress = _Progress()
        ahead: dict[int, asyncio.Task[tuple[StageOutcome, float]]] = {}
        window_started = 0.0
        early_ms = 0.0  # spent starting stages ahead of the window (they overlap from then)
        index = 0
        try:
            for index, stage in enumerate(self.stages):
                known = reused.get(index)
                if self.overlap and index == self._window.start and len(self._window) > 1:
                    # Everything before the window passed: the candidate may reach haproxy.
                    window_started = time.perf_counter()
                    started = self._speculate(ctx, started=ahead, reused=reused)
                    ahead.update(started)
                    if self._checks(started):
                        await asyncio.sleep(0)  # the tasks' first steps: haproxy -c spawned
                        gcpause.collect_young()  # while it runs (see there)
                elif (
                    self.overlap
                    and index + 1 == self._window.start
                    and len(self._window) > 1
                    and known is None
                    and _gate_passes(stage, ctx, progress.timings)
                ):
                    # The stage's security checks will pass: haproxy -c may start while the
                    # stage builds the rest of its reading; it is judged in order all the same.
                    early = time.perf_counter()
                    ahead = self._start_early(ctx)
                    await asyncio.sleep(0)  # the tasks' first steps spawn their processes
                    if self._checks(ahead):
                        gcpause.collect_young()  # while haproxy -c runs (see there)
                    early_ms = _ms(early)
                if known is not None:
                    # These bytes passed this stage before (see _reusable): what it found then.
                    if progress.record(stage, known.outcome(), None, opts):
                        break
                    continue
                self.phase_runs[stage.phase] = self.phase_runs.get(stage.phase, 0) + 1
                task = ahead.pop(index, None)
                if task is None:
                    outcome, elapsed = await self._run_one(stage, ctx)
                else:
                    outcome, elapsed = await task
                    # Wall time of the overlapped stages beyond the stages before the window:
                    # starting some early, then from the window's start to the last one read.
                    progress.timings["overlapMs"] = round(_ms(window_started) + early_ms, 3)
                # A gate is part of its stage's time.
                elapsed += progress.timings.get(f"{stage.phase.value}GateMs", 0.0)
                if progress.record(stage, outcome, elapsed, opts):
                    break
        finally:
            # A stage stopped the run (or the run was cancelled): what ran ahead is discarded.
            await _discard(ahead.values())
        stop = progress.stop
        skipped = [s.phase for s in self.stages[index + 1 :]] if stop else []
        progress.diagnostics.extend(_skipped(p, stop or "") for p in skipped)
        run = StageRun(
            diagnostics=tuple(progress.diagnostics),
            budgets=tuple(progress.budgets),
            stages_run=tuple(progress.ran),
            stages_skipped=tuple(skipped),
            timings=progress.timings,
            failed=stop is not None,
            rules=progress.rules,
        )
        if self.cache is not None and not run.failed and progress.cacheable:
            self.cache.put(key, run)
        if self.cache is not None and inputs:
            self.cache.keep_stages(files_key, progress.passed_on_bytes(inputs, reused, opts))
        return run

    def _reusable(
        self, files_key: CacheKey, inputs: Mapping[Phase, str]
    ) -> dict[int, StageVerdict]:
        """Stage index → the outcome these bytes got from it before, for the stages that judge
        the bytes alone, when some other stage judges more (``inputs``: a candidate with the
        same bytes and other objects misses the whole-run entry, yet only the stages that
        read the objects can find anything new).

        Reused in stage order only, up to the first stage that judges the bytes alone and
        has no kept outcome: a stage that runs may read what the stages before it left in
        the context (the schema stage reads the syntax stage's parse), and a reused stage
        leaves nothing. A stage with inputs of its own must not rely on such state; today
        only the rules stage has inputs, and it reads the render alone."""
        if self.cache is None or not inputs:
            return {}
        kept = self.cache.stages(files_key)
        out: dict[int, StageVerdict] = {}
        for index, stage in enumerate(self.stages):
            if stage.phase in inputs:
                continue
            found = kept.get(stage.phase)
            if found is None:
                break
            out[index] = found
        return out

    def _checks(self, started: Mapping[int, object]) -> bool:
        """Is ``haproxy -c`` among the stages just started?"""
        return any(self.stages[i].phase is Phase.HAPROXY for i in started)

    def _start_early(
        self, ctx: StageContext
    ) -> dict[int, asyncio.Task[tuple[StageOutcome, float]]]:
        """Start the window's stages of :data:`EARLY_PHASES` (the gate of the stage before
        the window passed), ``haproxy -c`` first; the others start with the window."""
        order = sorted(self._window, key=lambda i: _START_ORDER.get(self.stages[i].phase, 2))
        return {
            i: asyncio.create_task(self._run_one(self.stages[i], ctx))
            for i in order
            if self.stages[i].phase in EARLY_PHASES
        }

    def _speculate(
        self,
        ctx: StageContext,
        started: Mapping[int, asyncio.Task[tuple[StageOutcome, float]]] | None = None,
        reused: Mapping[int, StageVerdict] | None = None,
    ) -> dict[int, asyncio.Task[tuple[StageOutcome, float]]]:
        """Start every stage of the window as a task. Tasks take their first step in the order
        they were created: the sandbox writes the files and spawns ``haproxy -c`` first, then
        the schema stage runs (synchronously, while haproxy works on the other CPU), then the
        rules stage forks its worker — after schema rather than during it, so the fork does
        not compete with schema for the interpreter, and the worker still has the time
        haproxy takes. A stage whose outcome is ``reused`` does not run."""
        order = sorted(self._window, key=lambda i: _START_ORDER.get(self.stages[i].phase, 2))
        return {
            i: asyncio.create_task(self._run_one(self.stages[i], ctx))
            for i in order
            if (not started or i not in started) and (not reused or i not in reused)
        }

    async def _run_one(self, stage: Stage, ctx: StageContext) -> tuple[StageOutcome, float]:
        started = time.perf_counter()
        try:
            outcome = await stage.run(ctx)
            if not isinstance(outcome, StageOutcome):
                raise TypeError(f"stage returned {type(outcome).__name__}, not a StageOutcome")
        except Exception as exc:
            _log.exception("stage raised", stage=stage.phase.value)
            outcome = StageOutcome([_internal(stage.phase, exc)])
        return outcome, _ms(started)

    def _not_run(self, render: RenderResult, *, render_failed: bool) -> StageRun:
        reason = "render failed" if render_failed else f"no {MAIN_CONFIG}"
        extra: list[Diagnostic] = []
        if not render_failed:
            extra.append(
                make(
                    "E0004",
                    Phase.PIPELINE,
                    f"the candidate has no {MAIN_CONFIG}; files: "
                    + (", ".join(render.files.files) or "none"),
                )
            )
        return StageRun(
            diagnostics=(*extra, *(_skipped(p, reason) for p in self.phases)),
            stages_skipped=self.phases,
            failed=True,
        )

    # --- the report ---------------------------------------------------------------------

    def _assemble(
        self,
        render: RenderResult,
        run: StageRun,
        opts: ValidationOptions,
        started: float,
        *,
        hit: bool,
        refresh: bool = False,
        judged: bool = True,
    ) -> ValidationReport:
        """The report of ``run``. ``judged=False``: there was no candidate to judge (the
        render failed, or made no main config), so the report names no checksum — the
        files it did make are not what the templates meant to produce."""
        force = hit or refresh
        stage_diags = [_with_template(d, render, force=force) for d in run.diagnostics]
        done = finalize([*render.diagnostics, *stage_diags], opts)
        counts = Counts.of(done.diagnostics)
        budgets = [*run.budgets, *_render_budgets(render)]
        if budgets:
            status = ReportStatus.ANALYSIS_INCOMPLETE
        elif run.failed or counts.fatal or counts.error:
            status = ReportStatus.ERROR
        else:
            status = ReportStatus.OK
        timings = {"renderMs": round(render.render_ms, 3)}
        inline = render.inline_rules
        if inline is not None:
            timings["rulesInlineMs"] = round(inline.ms, 3)
        if not hit:
            timings.update(run.timings)
        timings["totalMs"] = round(render.render_ms + _ms(started), 3)
        return ValidationReport(
            valid=status is ReportStatus.OK,
            status=status,
            diagnostics=done.diagnostics,
            metadata=ReportMetadata(
                counts=counts,
                suppressed=done.suppressed,
                checksum=render.files.checksum if judged else None,
                fingerprint=self.fingerprint,
                haproxy_version=self.haproxy_version,
                cache_hit=hit,
                stages_run=list(run.stages_run),
                stages_skipped=list(run.stages_skipped),
                budget_exhaustions=budgets,
                rules=run.rules,
                inline_rules=None
                if inline is None
                else RuleCounters(
                    evaluated=inline.evaluated, failed=inline.failed, skipped=inline.skipped
                ),
            ),
            timings=timings,
        )

    def _crashed(
        self, render: RenderResult, opts: ValidationOptions, started: float, exc: Exception
    ) -> ValidationReport:
        diag = _internal(Phase.PIPELINE, exc)
        try:
            checksum: str | None = render.files.checksum
        except Exception:
            checksum = None
        return ValidationReport(
            valid=False,
            status=ReportStatus.ERROR,
            diagnostics=[diag],
            metadata=ReportMetadata(
                counts=Counts.of([diag]),
                checksum=checksum,
                fingerprint=self.fingerprint,
                haproxy_version=self.haproxy_version,
                stages_skipped=list(self.phases),
            ),
            timings={"totalMs": _ms(started)},
        )


@dataclass
class _Progress:
    """What the stages said so far, in stage order."""

    diagnostics: list[Diagnostic] = field(default_factory=list)
    budgets: list[BudgetExhaustion] = field(default_factory=list)
    ran: list[Phase] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    rules: RuleCounters | None = None
    stop: str | None = None
    cacheable: bool = True
    outcomes: dict[Phase, StageOutcome] = field(default_factory=dict)
    """Each stage's outcome, as recorded."""

    def record(
        self, stage: Stage, outcome: StageOutcome, elapsed: float | None, opts: ValidationOptions
    ) -> bool:
        """Take one stage's outcome; True when it stops the run. ``elapsed`` None: the outcome
        was reused, the stage did not run now (so it has no timings in this run)."""
        self.outcomes[stage.phase] = outcome
        if elapsed is not None:
            name = f"{stage.phase.value}Ms"
            self.timings[name] = round(self.timings.get(name, 0.0) + elapsed, 3)
            for k, v in outcome.extra_timings.items():
                self.timings[k] = float(v)
        if outcome.rules is not None:
            self.rules = outcome.rules
        self.diagnostics.extend(outcome.diagnostics)
        self.ran.append(stage.phase)
        self.cacheable = self.cacheable and outcome.cacheable
        if outcome.budget is not None:
            self.budgets.append(outcome.budget)
            if not any(d.rule_id == "E0002" for d in outcome.diagnostics):
                self.diagnostics.append(_budget_diagnostic(outcome.budget))
            self.stop = f"{stage.phase.value} could not finish its analysis"
        elif blocking(outcome.diagnostics, opts):
            self.stop = f"{stage.phase.value} failed"
        return self.stop is not None

    def passed_on_bytes(
        self,
        inputs: Mapping[Phase, str],
        reused: Mapping[int, StageVerdict],
        opts: ValidationOptions,
    ) -> dict[Phase, StageVerdict]:
        """The outcomes worth keeping per file set: of stages that judge the bytes alone, ran
        now and passed (no budget ran out, nothing blocking, no failure let pass)."""
        was_reused = {v.phase for v in reused.values()}
        return {
            phase: StageVerdict(phase, tuple(o.diagnostics), dict(o.extra_timings), o.rules)
            for phase, o in self.outcomes.items()
            if phase not in inputs
            and phase not in was_reused
            and o.budget is None
            and o.cacheable
            and not blocking(o.diagnostics, opts)
        }


def _gate_passes(stage: Stage, ctx: StageContext, timings: dict[str, float]) -> bool:
    """Whether ``stage`` has established, before running, that its security checks will
    pass (:meth:`Stage.gate`). Anything but a plain True — the default False, another value,
    a gate that raises — means the window waits for the stage's outcome as always. A True is
    recorded in ``ctx.cleared`` for the stage's own run to read."""
    started = time.perf_counter()
    try:
        passed = stage.gate(ctx) is True
    except Exception:
        _log.exception("stage gate raised", stage=stage.phase.value)
        passed = False
    timings[f"{stage.phase.value}GateMs"] = _ms(started)
    if passed:
        ctx.cleared = ctx.cleared | {stage.phase}
    return passed


def _speculative_window(stages: Sequence[Stage]) -> range:
    """Indexes of the first run of consecutive speculative stages that includes ``haproxy``
    (empty when there is none): the stages that may overlap."""
    i = 0
    while i < len(stages):
        j = i
        while j < len(stages) and stages[j].phase in SPECULATIVE_PHASES:
            j += 1
        if any(stages[k].phase is Phase.HAPROXY for k in range(i, j)):
            return range(i, j)
        i = j + 1
    return range(0)


async def _discard(tasks: Iterable[asyncio.Task[tuple[StageOutcome, float]]]) -> None:
    """Cancel speculative stages whose outcome is no longer wanted and wait until they have
    cleaned up (a cancelled sandbox run kills its process group before it returns)."""
    pending = list(tasks)
    for task in pending:
        task.cancel()
    if pending:
        # Cancelled tasks come back as results; only a cancellation of this run propagates.
        await asyncio.gather(*pending, return_exceptions=True)


def _render_budgets(render: RenderResult) -> list[BudgetExhaustion]:
    """Budgets that ran out while rendering (inline rules); the candidate is not proven."""
    out: list[BudgetExhaustion] = []
    for b in render.budgets:
        try:
            phase = Phase(b.phase)
        except ValueError:
            phase = Phase.RENDER
        out.append(BudgetExhaustion(phase=phase, budget=b.budget, limit=b.limit, used=b.used))
    return out


def _setup_diagnostics(exc: Exception) -> list[Diagnostic]:
    found = getattr(exc, "diagnostics", None) or getattr(exc, "diagnostic", None)
    if isinstance(found, Diagnostic):
        return [found]
    if isinstance(found, list) and found and all(isinstance(d, Diagnostic) for d in found):
        return found
    return [make("E0006", Phase.PIPELINE, str(exc))]


def _internal(phase: Phase, exc: BaseException) -> Diagnostic:
    text = str(exc)
    if len(text) > _MAX_EXCEPTION_TEXT:
        text = text[:_MAX_EXCEPTION_TEXT] + "…"
    where = "pipeline" if phase is Phase.PIPELINE else f"{phase.value} stage"
    return make("F0001", phase, f"the {where} raised {type(exc).__name__}: {text}")


def _budget_diagnostic(budget: BudgetExhaustion) -> Diagnostic:
    used = f" after {budget.used:g}" if budget.used is not None else ""
    return make(
        "E0002",
        budget.phase,
        f"{budget.phase.value} ran out of its {budget.budget} budget "
        f"(limit {budget.limit:g}{used}); the candidate is not proven valid",
    )


def _skipped(phase: Phase, reason: str) -> Diagnostic:
    return make("I0003", phase, f"stage {phase.value} did not run: {reason}")


def _with_template(d: Diagnostic, render: RenderResult, *, force: bool) -> Diagnostic:
    """Fill (or, for a cached run, refresh) the template location from this render's map.

    A cache hit can come from a different render with identical bytes — templates may have
    moved lines without changing output — so the caller's own source map is authoritative.
    """
    loc: Location | None = d.location
    if loc is None or loc.line is None or (d.template_location is not None and not force):
        return d
    found = render.source_map.lookup(loc.file, loc.line)
    if found is None and not force:
        return d
    if found == d.template_location:
        return d
    return d.model_copy(update={"template_location": found})
