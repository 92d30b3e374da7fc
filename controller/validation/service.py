"""The engine service: one place that builds an engine from a spec and judges a store view.

Every caller that renders and validates goes through here: the reconcile trigger, ``htc
local``, ``htc run`` and the admission webhook (through ``controller.triggers.engine``, which
re-exports this module and adds what only adapters publish), and ``htc validate``, ``htc
render`` and the embedded test runner directly. It holds no state of its own; the callers
differ only in where objects come from and where verdicts go.

It lives in the validation layer, not among the triggers, because everything it composes is
here or below (the renderer with the spec's inline rules, the pipeline, lint) and because the
embedded test runner, which is part of this layer, must use it too: the layer contract lets
nothing here import a trigger.

* :func:`ruled_renderer` is the renderer every path uses: the templates plus the spec's
  inline CEL rules (objects first, then each output as it renders).
* :func:`checking_pipeline` is the pipeline every path uses for a spec and a binary.
* :func:`default_engine` builds both for a haproxy binary, warmed up for a long-running
  process (one-shot commands skip the warm-up: it pays for candidates they never see).
* :func:`evaluate` renders a view and checks the result; a renderer that raises becomes a
  report (rule ``F0001``), never an exception, so no caller needs its own guard.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from controller.diagnostics import Diagnostic, Phase, RuleId, make
from controller.observability import get_logger
from controller.render import FileSet, RenderResult
from controller.resources import StoreView
from controller.spec import HAProxyTemplateConfigSpec
from controller.validation.gcpause import MAX_PAUSE_S, GcPause
from controller.validation.options import ValidationOptions
from controller.validation.report import ReportMetadata, ReportStatus, ValidationReport
from controller.validation.validated import ValidatedFileSet

if TYPE_CHECKING:
    from controller.validation.pipeline import Pipeline
    from controller.validation.rules import Locator, RuledRenderer, RuleSet

__all__ = [
    "CheckerLike",
    "Engine",
    "EngineFactory",
    "RendererLike",
    "VerdictLike",
    "checking_pipeline",
    "cpu_slots",
    "default_engine",
    "evaluate",
    "failure_report",
    "ruled_renderer",
    "spec_lint",
    "verdict",
]

_log = get_logger("controller.engine")


class RendererLike(Protocol):
    def render(self, view: StoreView, *, http: Mapping[str, str] | None = None) -> RenderResult:
        """``http``: the content of each HTTP source (None: the renderer has none)."""
        ...


class VerdictLike(Protocol):
    @property
    def report(self) -> ValidationReport: ...

    @property
    def validated(self) -> ValidatedFileSet | None: ...

    @property
    def valid(self) -> bool:
        """Whether ``validated`` is a file set (a pipeline's verdict answers without issuing
        it: admission needs no file set)."""
        ...


class CheckerLike(Protocol):
    async def check(
        self, render: RenderResult, *, options: ValidationOptions | None = None
    ) -> VerdictLike:
        """``options``: the caller's reporting options (None: the pipeline's own)."""
        ...


@dataclass(frozen=True)
class Engine:
    """A spec and the renderer and pipeline built from it; swapped as one."""

    spec: HAProxyTemplateConfigSpec | None
    renderer: RendererLike
    pipeline: CheckerLike
    lint: Callable[[HAProxyTemplateConfigSpec], Sequence[Diagnostic]] | None = None


EngineFactory = Callable[[HAProxyTemplateConfigSpec], Engine]
"""Builds an engine; raises (ideally with ``.diagnostics``) when the spec cannot be used."""


def failure_report(
    rule_id: RuleId, phase: Phase, message: str, files: FileSet | None = None
) -> ValidationReport:
    """A report for a failure outside the pipeline (a crashing renderer, a broken engine)."""
    diag = make(rule_id, phase, message)
    return ValidationReport(
        valid=False,
        status=ReportStatus.ERROR,
        diagnostics=[diag],
        metadata=ReportMetadata(checksum=files.checksum if files else None),
    )


@dataclass(frozen=True)
class _Verdict:
    report: ValidationReport
    validated: ValidatedFileSet | None

    @property
    def valid(self) -> bool:
        return self.validated is not None


def verdict(report: ValidationReport, validated: ValidatedFileSet | None) -> VerdictLike:
    """A verdict made outside the pipeline (a failure report, never a validated set)."""
    return _Verdict(report, validated)


def ruled_renderer(
    spec: HAProxyTemplateConfigSpec,
    *,
    locate: Locator | None = None,
    ruleset: RuleSet | None = None,
) -> RuledRenderer:
    """The renderer of every path: the templates plus the spec's inline CEL rules, with the
    spec's rule time budget. ``locate`` points rule errors at the config file's lines."""
    from controller.validation.rules import RuledRenderer  # heavy; only when rendering

    return RuledRenderer.from_spec(spec, locate=locate, ruleset=ruleset)


def checking_pipeline(spec: HAProxyTemplateConfigSpec, binary: str | None) -> Pipeline:
    """The pipeline of every path for ``spec`` and ``binary`` (None: the spec's, else the
    detected one). Raises ``PipelineSetupError`` when the settings cannot be honoured."""
    from controller.validation.pipeline import Pipeline

    return Pipeline.from_spec(spec, haproxy_binary=binary)


def cpu_slots() -> int:
    """The CPUs this process may use (affinity and cgroup quota): the bound the sandbox puts
    on ``haproxy -c`` runs (the admission judge allows one judgement more in flight)."""
    from controller.validation.sandbox import max_concurrency

    return max_concurrency()


def default_engine(
    binary: str | None, *, locate: Locator | None = None, warm: bool = True
) -> EngineFactory:
    """The production engine: :func:`ruled_renderer` and :func:`checking_pipeline`.

    ``warm``: pay the pipeline's first-use costs once per spec (compiling validators, probing
    the sandbox: about half a second the first time in a process, milliseconds after), so
    no candidate of a long-running process pays them; a one-shot command judges one
    candidate and passes False.
    """

    def build(spec: HAProxyTemplateConfigSpec) -> Engine:
        pipeline = checking_pipeline(spec, binary)
        if warm:
            pipeline.warm_up()
        return Engine(spec, ruled_renderer(spec, locate=locate), pipeline, lint=spec_lint)

    return build


def spec_lint(spec: HAProxyTemplateConfigSpec) -> Sequence[Diagnostic]:
    """``htc lint``'s static checks; a new spec with lint errors is refused before it renders."""
    from controller.validation.lint import lint_spec

    return lint_spec(spec).diagnostics


async def evaluate(
    engine: Engine,
    view: StoreView,
    http: Mapping[str, str] | None = None,
    *,
    options: ValidationOptions | None = None,
    extra_context: Mapping[str, Any] | None = None,
    gate: contextlib.AbstractAsyncContextManager[Any] | None = None,
) -> tuple[RenderResult | None, VerdictLike]:
    """Render ``view`` (with the HTTP sources' ``http`` content, and ``extra_context`` over
    the spec's) off the event loop, then run the pipeline on the result (with ``options``
    instead of the pipeline's own, for a command's ``--strict`` or ``--severity``).

    ``gate`` is entered for the render alone and left before the pipeline runs: a render
    holds the GIL, so renders that run side by side only share one CPU and all finish late;
    admission queues its renders through one gate and lets the checks (``haproxy -c`` is a
    process of its own) overlap the next render."""
    kwargs: dict[str, Any] = {}
    if http is not None:
        kwargs["http"] = http
    if extra_context is not None:
        kwargs["extra_context"] = extra_context
    render_call = functools.partial(engine.renderer.render, view, **kwargs)
    # One pause of the collector from the render to the verdict: the pipeline has the young
    # objects the render left examined once haproxy -c runs (see gcpause.collect_young).
    # It begins past the gate, so requests that wait there do not hold the collector off,
    # and it lasts MAX_PAUSE_S at most, as the pipeline's own does.
    pause = GcPause()
    limit: asyncio.TimerHandle | None = None
    try:
        try:
            async with gate if gate is not None else contextlib.nullcontext():
                pause.begin()
                limit = asyncio.get_running_loop().call_later(MAX_PAUSE_S, pause.end)
                render = await asyncio.to_thread(render_call)
        except Exception as exc:
            _log.exception("renderer raised")
            report = failure_report("F0001", Phase.RENDER, f"the renderer raised {exc!r}")
            return None, verdict(report, None)
        if options is None:
            return render, await engine.pipeline.check(render)
        return render, await engine.pipeline.check(render, options=options)
    finally:
        if limit is not None:
            limit.cancel()
        pause.end()
