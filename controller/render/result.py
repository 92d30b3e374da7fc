"""What the renderer hands to the pipeline: files, where each line came from, and problems."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from controller.diagnostics import Diagnostic, Severity, TemplateLocation
from controller.render.fileset import FileSet
from controller.resources.api import StoreView


@dataclass(frozen=True, slots=True)
class SourceMap:
    """Per rendered file: rendered line (1-based) → template location that produced it."""

    lines: Mapping[str, tuple[TemplateLocation | None, ...]] = field(default_factory=dict)

    def lookup(self, path: str, line: int) -> TemplateLocation | None:
        per_file = self.lines.get(path)
        if per_file is None or line < 1 or line > len(per_file):
            return None
        return per_file[line - 1]


@dataclass(frozen=True, slots=True)
class OutputStatus:
    """How one named output fared: rendered, skipped by `when`, failed, or blocked."""

    name: str
    path: str
    state: str  # "rendered" | "skipped" | "failed" | "blocked"
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class RenderInputs:
    """What a render read besides the spec. Deferred CEL rules judge the outputs against the
    same objects and extraContext, so the pipeline gets them with the result."""

    view: StoreView
    http: Mapping[str, str] = field(default_factory=dict)
    extra_context: Mapping[str, Any] = field(default_factory=dict)
    """spec.extraContext merged with the render call's overrides."""


@dataclass(frozen=True, slots=True)
class RenderBudget:
    """A budget that ran out while rendering (e.g. in an ``after_output`` hook); the pipeline
    reports the result as analysis incomplete, never as a pass."""

    phase: str
    budget: str
    limit: float
    used: float | None = None


@dataclass(frozen=True)
class RenderResult:
    files: FileSet
    source_map: SourceMap = field(default_factory=SourceMap)
    diagnostics: tuple[Diagnostic, ...] = ()
    outputs: Mapping[str, OutputStatus] = field(default_factory=dict)
    render_ms: float = 0.0
    inputs: RenderInputs | None = None
    budgets: tuple[RenderBudget, ...] = ()

    @property
    def ok(self) -> bool:
        """True when nothing at error severity or worse was reported while rendering."""
        return not any(d.severity.rank <= Severity.ERROR.rank for d in self.diagnostics)
