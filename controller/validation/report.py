"""The pipeline's verdict as data.

A report is what every trigger path receives from ``Pipeline.validate``: admission turns it into
allow/deny, reconcile into publish/deploy, the CLI into an exit code. ``valid`` is the only
verdict; ``status`` says whether the analysis was complete. A render or parse failure is a
report with status ``error``, never an exception.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from controller.diagnostics import (
    Diagnostic,
    Location,
    ObjectRef,
    Phase,
    Severity,
    TemplateLocation,
)

__all__ = [
    "BudgetExhaustion",
    "Diagnostic",
    "Location",
    "ObjectRef",
    "Phase",
    "ReportMetadata",
    "ReportStatus",
    "Severity",
    "TemplateLocation",
    "ValidationReport",
]


class ReportStatus(StrEnum):
    OK = "ok"
    ANALYSIS_INCOMPLETE = "analysis_incomplete"
    ERROR = "error"


class _Wire(BaseModel):
    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        alias_generator=to_camel,
        populate_by_name=True,
        use_attribute_docstrings=True,
    )


class BudgetExhaustion(_Wire):
    """A budget that ran out, making the analysis incomplete."""

    phase: Phase
    """The stage that ran out."""
    budget: str
    """Which budget: e.g. "timeout", "celCost", "runTime"."""
    limit: float
    """The configured limit (seconds for time budgets)."""
    used: float | None = None
    """How much was used when the stage was stopped, when known."""


class Counts(_Wire):
    """Findings per severity, counted after finalization (what the report shows)."""

    fatal: int = 0
    """Findings at fatal severity."""
    error: int = 0
    """Findings at error severity (including warnings promoted by strict mode)."""
    warning: int = 0
    """Findings at warning severity."""
    info: int = 0
    """Findings at info severity."""

    @classmethod
    def of(cls, diagnostics: Iterable[Diagnostic]) -> Counts:
        c = {s.value: 0 for s in Severity}
        for d in diagnostics:
            c[d.severity.value] += 1
        return cls(**c)


class RuleCounters(_Wire):
    """Rule accounting: evaluated + skipped + suppressed = total units."""

    evaluated: int = 0
    """Rule units evaluated."""
    failed: int = 0
    """Evaluated units that failed."""
    skipped: int = 0
    """Units skipped because their owner was skipped or their condition was false."""
    suppressed: int = 0
    """Failures suppressed as cascades of an already reported root cause."""


class ReportMetadata(_Wire):
    """What was judged, by which pipeline, and how much of the analysis ran."""

    counts: Counts = Field(default_factory=Counts)
    """Findings per severity in ``diagnostics``."""
    suppressed: int = 0
    """Findings removed by the severity gate, rule filters and de-duplication."""
    checksum: str | None = None
    """sha256 over the candidate file set (kinds, paths and bytes)."""
    fingerprint: str | None = None
    """sha256 identifying the pipeline: haproxy binary and version, schemas, policy, rules and
    validators. Same checksum and fingerprint means the same verdict."""
    haproxy_version: str | None = None
    """Version of the haproxy binary the pipeline checks with."""
    cache_hit: bool = False
    """True when the verdict was reused from an earlier identical run."""
    stages_run: list[Phase] = Field(default_factory=list)
    """Stages that produced this verdict, in order."""
    stages_skipped: list[Phase] = Field(default_factory=list)
    """Stages that did not run because the render or an earlier stage failed."""
    budget_exhaustions: list[BudgetExhaustion] = Field(default_factory=list)
    """Budgets that ran out; any entry makes the status analysis_incomplete."""
    rules: RuleCounters | None = None
    """Deferred-rule accounting, when the rules stage ran."""
    inline_rules: RuleCounters | None = None
    """Inline-rule accounting (objects judged before the render, outputs right after it),
    when the render ran inline rules; their time is ``timings.rulesInlineMs``, part of
    ``renderMs``. Never suppressed: a failing inline rule stops what depends on it instead."""


class ValidationReport(_Wire):
    """The pipeline's verdict on one candidate file set."""

    valid: bool
    """The verdict: true only when every stage ran and nothing at error severity remains."""
    status: ReportStatus
    """ok, error (render or a stage failed), or analysis_incomplete (a budget ran out)."""
    diagnostics: list[Diagnostic] = Field(default_factory=list)
    """Findings after strict mode, filters, severity gate, sorting and de-duplication."""
    metadata: ReportMetadata = Field(default_factory=ReportMetadata)
    """What was judged and how."""
    timings: dict[str, float] = Field(default_factory=dict)
    """Milliseconds per phase (``renderMs``, ``syntaxMs``, ...) and ``totalMs``."""

    @property
    def errors(self) -> list[Diagnostic]:
        return [d for d in self.diagnostics if d.severity.rank <= Severity.ERROR.rank]

    @property
    def warnings(self) -> list[Diagnostic]:
        return [d for d in self.diagnostics if d.severity is Severity.WARNING]

    def rule_ids(self) -> list[str]:
        return sorted({d.rule_id for d in self.diagnostics})

    def to_json_dict(self) -> dict[str, object]:
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)
