"""THE pipeline: the one way a candidate file set becomes a verdict.

Every trigger path — reconcile, admission, HTTP-source refresh, ``htc validate`` — calls
:meth:`Pipeline.validate` (or :meth:`Pipeline.check`, which also hands out the
:class:`ValidatedFileSet` that deploy targets demand). Keeping one entry point is what makes
"nothing deploys unless it passed every stage" checkable: there is no second code path that
could forget a stage.

The pipeline never raises for a bad candidate or a misbehaving stage. A render error, a
failing stage, a stage that crashes and a stage that runs out of time all come back as a
report; only cancellation propagates.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from controller.diagnostics import Diagnostic, Location, Phase, make
from controller.render import MAIN_CONFIG, RenderResult
from controller.validation.cache import CacheKey, SingleFlight, StageRun, VerdictCache
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
from controller.validation.stage import Stage, StageContext, StageOutcome
from controller.validation.validated import ValidatedFileSet, _issue

if TYPE_CHECKING:
    from controller.spec.models import HAProxyTemplateConfigSpec, ValidationSettings

__all__ = ["Pipeline", "PipelineSetupError", "Verdict"]

log = logging.getLogger(__name__)

_MAX_EXCEPTION_TEXT = 300


@dataclass(frozen=True, slots=True)
class Verdict:
    """A report, plus the deployable file set when (and only when) the report is valid."""

    report: ValidationReport
    validated: ValidatedFileSet | None

    @property
    def valid(self) -> bool:
        return self.validated is not None


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
    ) -> None:
        phases = [s.phase for s in stages]
        if len(set(phases)) != len(phases):
            raise ValueError(f"each phase may appear once in a pipeline, got {phases}")
        self.stages: tuple[Stage, ...] = tuple(stages)
        self.haproxy_version = haproxy_version
        self.cache = cache
        self.options = options or ValidationOptions()
        self.fingerprint = self._fingerprint()
        self.stage_runs = 0
        """How many times the stages actually ran (not cache hits, not joined calls)."""
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
                return self._assemble(render, skipped, opts, started, hit=False)
            key: CacheKey = (self._candidate_key(render), self.fingerprint, opts.key())
            if self.cache is not None:
                cached = self.cache.get(key)
                if cached is not None:
                    return self._assemble(render, cached, opts, started, hit=True)
            owner = False

            def work() -> Awaitable[StageRun]:
                nonlocal owner
                owner = True
                return self._run_stages(render, opts, key)

            run = await self._flight.run(key, work)
            # A caller that joined another's run gets template locations from its own map.
            return self._assemble(render, run, opts, started, hit=False, refresh=not owner)
        except Exception as exc:
            # Only a bug in the pipeline itself gets here; still a report, never a crash.
            log.exception("pipeline failed outside any stage")
            return self._crashed(render, opts, started, exc)

    def _candidate_key(self, render: RenderResult) -> str:
        """The file set's checksum, plus the digest of any other input a stage judges (the
        rules stage reads resources and extraContext), so a cached verdict is reused only for
        the same bytes *and* the same inputs."""
        extra = []
        for stage in self.stages:
            input_key = getattr(stage, "input_key", None)
            if callable(input_key):
                digest = input_key(render)
                if digest is not None:
                    extra.append(f"{stage.phase.value}={digest}")
        if not extra:
            return render.files.checksum
        joined = "\n".join([render.files.checksum, *extra])
        return hashlib.sha256(joined.encode()).hexdigest()

    async def check(
        self, render: RenderResult, *, options: ValidationOptions | None = None
    ) -> Verdict:
        report = await self.validate(render, options=options)
        if not report.valid:
            return Verdict(report, None)
        return Verdict(report, _issue(render.files, report, self.fingerprint))

    # --- running the stages ---------------------------------------------------------------

    async def _run_stages(
        self, render: RenderResult, opts: ValidationOptions, key: CacheKey
    ) -> StageRun:
        self.stage_runs += 1
        ctx = StageContext(
            render=render,
            haproxy_version=self.haproxy_version,
            disable_builtin_rules=opts.disable_builtin_rules,
        )
        diagnostics: list[Diagnostic] = []
        budgets: list[BudgetExhaustion] = []
        ran: list[Phase] = []
        timings: dict[str, float] = {}
        stop: str | None = None
        rules: RuleCounters | None = None
        index = 0
        for index, stage in enumerate(self.stages):  # noqa: B007 - index used after the loop
            outcome, elapsed = await self._run_one(stage, ctx)
            name = f"{stage.phase.value}Ms"
            timings[name] = round(timings.get(name, 0.0) + elapsed, 3)
            for k, v in outcome.extra_timings.items():
                timings[k] = float(v)
            if outcome.rules is not None:
                rules = outcome.rules
            diagnostics.extend(outcome.diagnostics)
            ran.append(stage.phase)
            if outcome.budget is not None:
                budgets.append(outcome.budget)
                if not any(d.rule_id == "E0002" for d in outcome.diagnostics):
                    diagnostics.append(_budget_diagnostic(outcome.budget))
                stop = f"{stage.phase.value} could not finish its analysis"
            elif blocking(outcome.diagnostics, opts):
                stop = f"{stage.phase.value} failed"
            if stop:
                break
        skipped = [s.phase for s in self.stages[index + 1 :]] if stop else []
        diagnostics.extend(_skipped(p, stop or "") for p in skipped)
        run = StageRun(
            diagnostics=tuple(diagnostics),
            budgets=tuple(budgets),
            stages_run=tuple(ran),
            stages_skipped=tuple(skipped),
            timings=timings,
            failed=stop is not None,
            rules=rules,
        )
        if self.cache is not None and not run.failed:
            self.cache.put(key, run)
        return run

    async def _run_one(self, stage: Stage, ctx: StageContext) -> tuple[StageOutcome, float]:
        started = time.perf_counter()
        try:
            outcome = await stage.run(ctx)
            if not isinstance(outcome, StageOutcome):
                raise TypeError(f"stage returned {type(outcome).__name__}, not a StageOutcome")
        except Exception as exc:
            log.exception("stage %s raised", stage.phase.value)
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
    ) -> ValidationReport:
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
                checksum=render.files.checksum,
                fingerprint=self.fingerprint,
                haproxy_version=self.haproxy_version,
                cache_hit=hit,
                stages_run=list(run.stages_run),
                stages_skipped=list(run.stages_skipped),
                budget_exhaustions=budgets,
                rules=run.rules,
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
