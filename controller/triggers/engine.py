"""The engine service: one place that builds an engine from a spec and judges a store view.

Every caller that renders and validates goes through here: the reconcile trigger, ``htc
local``, ``htc run`` and, next, the admission webhook. It holds no state of its own; the
adapters differ only in where objects come from and where verdicts go.

* :func:`default_engine` builds the production engine for a haproxy binary: the sandboxed
  renderer with the spec's inline rules, and the full pipeline, warmed up once per spec.
* :func:`evaluate` renders a view and checks the result; a renderer that raises becomes a
  report (rule ``F0001``), never an exception, so no caller needs its own guard.
* :func:`spec_rejection` is the event every adapter publishes for a spec it cannot use.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from controller.diagnostics import Diagnostic, Phase, RuleId, make
from controller.observability.logging import get_logger
from controller.publish.events import Event, EventKind
from controller.render import FileSet, RenderResult
from controller.resources.api import StoreView
from controller.spec.models import HAProxyTemplateConfigSpec
from controller.validation.report import ReportMetadata, ReportStatus, ValidationReport
from controller.validation.validated import ValidatedFileSet

__all__ = [
    "CheckerLike",
    "Engine",
    "EngineFactory",
    "RendererLike",
    "VerdictLike",
    "default_engine",
    "evaluate",
    "failure_report",
    "spec_lint",
    "spec_rejection",
    "verdict",
    "with_listen",
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


class CheckerLike(Protocol):
    async def check(self, render: RenderResult) -> VerdictLike: ...


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


def verdict(report: ValidationReport, validated: ValidatedFileSet | None) -> VerdictLike:
    """A verdict made outside the pipeline (a failure report, never a validated set)."""
    return _Verdict(report, validated)


def default_engine(binary: str) -> Callable[[HAProxyTemplateConfigSpec], Engine]:
    """The production engine: the sandboxed renderer and the full pipeline for ``binary``."""

    def build(spec: HAProxyTemplateConfigSpec) -> Engine:
        from controller.validation import Pipeline
        from controller.validation.rules.render import RuledRenderer

        # RuledRenderer is the Renderer plus the spec's inline CEL rules (objects first,
        # then each output as it renders), the same render path `htc validate` takes.
        pipeline = Pipeline.from_spec(spec, haproxy_binary=binary)
        # Once per spec, so no candidate pays for compiling validators or probing the sandbox
        # (about half a second the first time in a process, milliseconds after).
        pipeline.warm_up()
        return Engine(spec, RuledRenderer.from_spec(spec), pipeline, lint=spec_lint)

    return build


def with_listen(spec: HAProxyTemplateConfigSpec, listen: str | None) -> HAProxyTemplateConfigSpec:
    """``spec`` with ``extraContext.listen`` set (``--listen`` of ``htc local`` and ``htc run``)."""
    if listen is None:
        return spec
    return spec.model_copy(update={"extra_context": {**spec.extra_context, "listen": listen}})


def spec_lint(spec: HAProxyTemplateConfigSpec) -> Sequence[Diagnostic]:
    """``htc lint``'s static checks; a new spec with lint errors is refused before it renders."""
    from controller.validation.lint import lint_spec

    return lint_spec(spec).diagnostics


async def evaluate(
    engine: Engine, view: StoreView, http: Mapping[str, str] | None = None
) -> tuple[RenderResult | None, VerdictLike]:
    """Render ``view`` (with the HTTP sources' ``http`` content) off the event loop, then run
    the pipeline on the result."""
    render_call = (
        functools.partial(engine.renderer.render, view, http=http)
        if http is not None
        else functools.partial(engine.renderer.render, view)
    )
    try:
        render = await asyncio.to_thread(render_call)
    except Exception as exc:
        _log.exception("renderer raised")
        report = failure_report("F0001", Phase.RENDER, f"the renderer raised {exc!r}")
        return None, verdict(report, None)
    return render, await engine.pipeline.check(render)


def spec_rejection(
    diagnostics: Sequence[Diagnostic], *, running: bool, trigger: str = "config"
) -> Event:
    """The event for a spec that cannot be used (it does not parse, or it failed its check)."""
    state = (
        "the running configuration stays in place" if running else "no configuration is running yet"
    )
    head = make("E7010", Phase.SPEC, f"configuration change rejected; {state}")
    return Event(
        EventKind.SPEC_REJECTED, trigger, diagnostics=(head, *diagnostics), message=head.message
    )
