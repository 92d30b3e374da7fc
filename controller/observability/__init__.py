"""Metrics and logs. The lowest layer: everything may use it, it uses nothing of ours.

The metrics names load on first use: the Prometheus client (with the HTTP server and URL
libraries it imports) costs the command line's one-shot commands some 30-50 ms of start-up
and they export nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from controller.observability.logging import bind, configure, get_logger, object_ref
from controller.observability.text import escape_char, escape_controls

if TYPE_CHECKING:
    from controller.observability.metrics import (
        CONTENT_TYPE_LATEST,
        METRICS,
        Metrics,
        render_markdown,
    )

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

_METRICS_NAMES = frozenset({"CONTENT_TYPE_LATEST", "METRICS", "Metrics", "render_markdown"})


def __getattr__(name: str) -> Any:
    if name in _METRICS_NAMES:
        from controller.observability import metrics

        return getattr(metrics, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
