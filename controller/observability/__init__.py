"""Metrics and logs. The lowest layer: everything may use it, it uses nothing of ours."""

from controller.observability.logging import bind, configure, get_logger, object_ref
from controller.observability.metrics import METRICS, Metrics, render_markdown

__all__ = ["METRICS", "Metrics", "bind", "configure", "get_logger", "object_ref", "render_markdown"]
