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
        frozen=True, extra="forbid", alias_generator=to_camel, populate_by_name=True
    )


class BudgetExhaustion(_Wire):
    """A budget that ran out, making the analysis incomplete."""

    phase: Phase
    budget: str  # e.g. "timeout", "celCost", "runTime"
    limit: float
    used: float | None = None


class Counts(_Wire):
    fatal: int = 0
    error: int = 0
    warning: int = 0
    info: int = 0

    @classmethod
    def of(cls, diagnostics: Iterable[Diagnostic]) -> Counts:
        c = {s.value: 0 for s in Severity}
        for d in diagnostics:
            c[d.severity.value] += 1
        return cls(**c)


class RuleCounters(_Wire):
    """Deferred-rule accounting: evaluated + skipped + suppressed = total units."""

    evaluated: int = 0
    failed: int = 0
    skipped: int = 0
    suppressed: int = 0


class ReportMetadata(_Wire):
    counts: Counts = Field(default_factory=Counts)
    suppressed: int = 0
    checksum: str | None = None
    fingerprint: str | None = None
    haproxy_version: str | None = None
    cache_hit: bool = False
    stages_run: list[Phase] = Field(default_factory=list)
    stages_skipped: list[Phase] = Field(default_factory=list)
    budget_exhaustions: list[BudgetExhaustion] = Field(default_factory=list)
    rules: RuleCounters | None = None


class ValidationReport(_Wire):
    valid: bool
    status: ReportStatus
    diagnostics: list[Diagnostic] = Field(default_factory=list)
    metadata: ReportMetadata = Field(default_factory=ReportMetadata)
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
