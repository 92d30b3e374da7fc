"""What the renderer hands to the pipeline: files, where each line came from, and problems."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from controller.diagnostics import Diagnostic, Severity, TemplateLocation
from controller.render.fileset import FileSet


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


@dataclass(frozen=True)
class RenderResult:
    files: FileSet
    source_map: SourceMap = field(default_factory=SourceMap)
    diagnostics: tuple[Diagnostic, ...] = ()
    outputs: Mapping[str, OutputStatus] = field(default_factory=dict)
    render_ms: float = 0.0

    @property
    def ok(self) -> bool:
        """True when nothing at error severity or worse was reported while rendering."""
        return not any(d.severity.rank <= Severity.ERROR.rank for d in self.diagnostics)
