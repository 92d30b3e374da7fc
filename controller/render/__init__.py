"""Sandboxed Jinja2 rendering of a HAProxyTemplateConfig over a store snapshot.

``Renderer(spec).render(view)`` → :class:`RenderResult` (FileSet + source map + diagnostics).
``docs/templates.md`` is the template author's reference. Compiled templates are reused across
Renderers of a process, and by commands across runs (:mod:`controller.render.codecache`).
"""

from controller.render.codecache import CodeCache, disk_cache
from controller.render.context import RenderedOutput
from controller.render.expression import parse_expression
from controller.render.fileset import (
    KIND_DIRS,
    MAIN_CONFIG,
    FileEntry,
    FileKind,
    FileSet,
    check_name,
    path_for,
)
from controller.render.filters import FilterError
from controller.render.graph import FRAGMENTS_CALL, Reference, RenderGraph, TemplateRefs
from controller.render.renderer import AfterOutput, OutputDef, Renderer
from controller.render.result import (
    OutputStatus,
    RenderBudget,
    RenderInputs,
    RenderResult,
    RuleTally,
    SourceMap,
)
from controller.render.runs import same_ends, scattered
from controller.render.scc import strongly_connected

__all__ = [
    "FRAGMENTS_CALL",
    "KIND_DIRS",
    "MAIN_CONFIG",
    "AfterOutput",
    "CodeCache",
    "FileEntry",
    "FileKind",
    "FileSet",
    "FilterError",
    "OutputDef",
    "OutputStatus",
    "Reference",
    "RenderBudget",
    "RenderGraph",
    "RenderInputs",
    "RenderResult",
    "RenderedOutput",
    "Renderer",
    "RuleTally",
    "SourceMap",
    "TemplateRefs",
    "check_name",
    "disk_cache",
    "parse_expression",
    "path_for",
    "same_ends",
    "scattered",
    "strongly_connected",
]
