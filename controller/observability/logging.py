"""structlog setup: JSON lines for machines, a readable console for people.

Every runtime event is a structured record, so a log pipeline can filter by ``trigger``,
``checksum`` or object reference without parsing prose. Those keys are bound with
:func:`bind` (contextvars) by the code that knows them, the reconcile trigger above all, so
that lower layers log plain events and still carry the context of the run they belong to.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Literal, TextIO

import structlog

LogFormat = Literal["auto", "json", "console"]

__all__ = ["LogFormat", "bind", "configure", "get_logger", "object_ref"]


def configure(
    *, fmt: LogFormat = "auto", level: str = "info", stream: TextIO | None = None
) -> None:
    """Configure structlog process-wide.

    ``auto`` picks the console renderer when the log stream is a terminal and JSON lines
    otherwise, so the same binary is pleasant interactively and parseable under a supervisor.
    """
    out = stream if stream is not None else sys.stderr
    if fmt == "auto":
        fmt = "console" if _isatty(out) else "json"
    renderer: Any
    if fmt == "json":
        renderer = structlog.processors.JSONRenderer(sort_keys=False)
    else:
        renderer = structlog.dev.ConsoleRenderer(colors=_isatty(out))
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.StackInfoRenderer(),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(_level(level)),
        logger_factory=structlog.PrintLoggerFactory(file=out),
        cache_logger_on_first_use=False,
    )


def get_logger(name: str) -> Any:
    """A logger carrying ``component=name``; structlog's bound loggers are untyped by design.

    The value is bound lazily, so loggers created at import time follow :func:`configure`
    calls made later.
    """
    return structlog.get_logger(component=name)


@contextmanager
def bind(**values: Any) -> Iterator[None]:
    """Attach ``values`` to every record logged in this context (task-local)."""
    with structlog.contextvars.bound_contextvars(**values):
        yield


def object_ref(obj: Mapping[str, Any]) -> str:
    """``Kind/namespace/name`` of a Kubernetes object, the form logs use for references."""
    meta = obj.get("metadata") or {}
    kind = obj.get("kind") or "?"
    ns = meta.get("namespace")
    name = meta.get("name") or "?"
    return f"{kind}/{ns}/{name}" if ns else f"{kind}/{name}"


def _level(name: str) -> int:
    value = logging.getLevelName(name.upper())
    if not isinstance(value, int):
        raise ValueError(f"unknown log level {name!r}")
    return value


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
