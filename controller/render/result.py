"""What the renderer hands to the pipeline: files, where each line came from, and problems."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from controller.diagnostics import Diagnostic, Severity, TemplateLocation
from controller.render.fileset import FileSet
from controller.resources import StoreView


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


@dataclass(frozen=True, slots=True)
class RuleTally:
    """What the inline rules of one render did: rule units and the time they took.

    Rendering itself runs no rules; the rules layer renders with them and fills this in, so
    a report can say how much of the render was rule evaluation."""

    evaluated: int = 0
    failed: int = 0
    skipped: int = 0
    ms: float = 0.0


@dataclass(frozen=True)
class RenderResult:
    files: FileSet
    source_map: SourceMap = field(default_factory=SourceMap)
    diagnostics: tuple[Diagnostic, ...] = ()
    outputs: Mapping[str, OutputStatus] = field(default_factory=dict)
    render_ms: float = 0.0
    inputs: RenderInputs | None = None
    budgets: tuple[RenderBudget, ...] = ()
    inline_rules: RuleTally | None = None
    """Set when the render ran inline rules (``RuledRenderer``); None for a plain render."""

    @property
    def ok(self) -> bool:
        """True when nothing at error severity or worse was reported while rendering."""
        return not any(d.severity.rank <= Severity.ERROR.rank for d in self.diagnostics)
