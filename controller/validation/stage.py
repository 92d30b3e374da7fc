"""What a pipeline stage is: a named step that judges a candidate and says how it went.

Stages are async because ``haproxy -c`` and external validators are subprocesses or HTTP calls
and the admission webhook and the reconcile loop share one event loop; CPU-only stages simply
do their work synchronously inside ``run``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from controller.diagnostics import Diagnostic, Phase
from controller.render import FileSet, RenderResult
from controller.validation.parsed import ParsedConfig
from controller.validation.report import BudgetExhaustion, RuleCounters


@dataclass
class StageContext:
    """Shared state of one pipeline run; earlier stages leave results for later ones."""

    render: RenderResult
    haproxy_version: str | None = None
    """Version of the haproxy binary (``2.8.25``), known before the first stage runs."""
    parsed: dict[str, ParsedConfig] = field(default_factory=dict)
    """Parsed HAProxy configurations by path, filled by the syntax stage."""
    security_cleared: bool = False
    """The syntax stage's gate established that its directive policy and file-reference
    rule find nothing in this candidate (only ``SyntaxStage.gate`` sets it); the stage then
    does not run the same checks a second time on its full parse."""

    @property
    def files(self) -> FileSet:
        return self.render.files


@dataclass
class StageOutcome:
    diagnostics: list[Diagnostic] = field(default_factory=list)
    budget: BudgetExhaustion | None = None
    """Set when the stage ran out of a budget: the analysis is incomplete, never a pass."""
    extra_timings: Mapping[str, float] = field(default_factory=dict)
    rules: RuleCounters | None = None
    """Deferred-rule accounting (the rules stage sets it); copied into report metadata."""
    cacheable: bool = True
    """False when the outcome lets a failure pass (an external validator that crashed, hung
    or answered garbage under ``failurePolicy: ignore``): such a verdict is not stored, so the
    next identical candidate gives the validator a fresh chance."""


class Stage(Protocol):
    phase: Phase

    def fingerprint(self) -> str:
        """Everything about this stage's configuration that could change a verdict."""
        ...

    async def run(self, ctx: StageContext) -> StageOutcome: ...
