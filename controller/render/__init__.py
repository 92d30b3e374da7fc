"""Sandboxed Jinja2 rendering of a HAProxyTemplateConfig over a store snapshot."""

from controller.render.fileset import MAIN_CONFIG, FileEntry, FileKind, FileSet, path_for
from controller.render.result import OutputStatus, RenderResult, SourceMap

__all__ = [
    "MAIN_CONFIG",
    "FileEntry",
    "FileKind",
    "FileSet",
    "OutputStatus",
    "RenderResult",
    "SourceMap",
    "path_for",
]
