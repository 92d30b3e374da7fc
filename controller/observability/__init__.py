"""Metrics and logs. The lowest layer: everything may use it, it uses nothing of ours."""

from controller.observability.logging import bind, configure, get_logger, object_ref
from controller.observability.metrics import CONTENT_TYPE_LATEST, METRICS, Metrics, render_markdown
from controller.observability.text import escape_char, escape_controls

__all__ = [
    "CONTENT_TYPE_LATEST",
    "METRICS",
    "Metrics",
    "bind",
    "configure",
    "escape_char",
    "escape_controls",
    "get_logger",
    "object_ref",
    "render_markdown",
]
