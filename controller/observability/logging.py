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

from controller.observability.text import escape_controls, escape_value

LogFormat = Literal["auto", "json", "console"]

__all__ = ["LogFormat", "bind", "configure", "get_logger", "object_ref"]


def configure(
    *, fmt: LogFormat = "auto", level: str = "info", stream: TextIO | None = None
) -> None:
    """Configure structlog process-wide.

    ``auto`` picks the console renderer when the log stream is a terminal and JSON lines
    otherwise, so the same binary is pleasant interactively and parseable under a supervisor.

    While nothing has imported structlog yet, the configuration waits for the first record
    (see :class:`_Deferred`): importing structlog imports rich, about 0.1 s that a command
    logging nothing (``htc validate`` on a clean run) need not pay. Code that imports
    structlog itself has it imported already, so it sees the configuration at once.
    """
    global _pending
    _level(level)  # a wrong level is refused now, not at the first record
    if "structlog" not in sys.modules:
        _pending = (fmt, level, stream)
        return
    _pending = None
    _apply(fmt, level, stream)


_pending: tuple[LogFormat, str, TextIO | None] | None = None
"""A :func:`configure` call made before structlog was imported, applied on first use."""


def _structlog() -> Any:
    """structlog, imported now, with any configuration that waited for it applied."""
    global _pending
    if _pending is not None:
        fmt, level, stream = _pending
        _pending = None
        if "structlog" not in sys.modules and _resolve(fmt, stream) == "json":
            _import_without(_CONSOLE_ONLY)
        _apply(fmt, level, stream)
    import structlog

    return structlog


_CONSOLE_ONLY = ("rich", "colorama", "better_exceptions")
"""What structlog imports, if installed, only for its console renderer: rich (and with it
pygments, some 5 MB resident in a long-running ``htc local``/``htc run``) formats its
tracebacks, colorama its colours on Windows. JSON lines use none of them."""


def _import_without(absent: tuple[str, ...]) -> None:
    """Import structlog as if ``absent`` were not installed (a ``None`` entry in
    ``sys.modules`` makes an import raise ImportError, which structlog expects of optional
    packages); they stay importable for anyone who asks later."""
    hidden = [name for name in absent if name not in sys.modules]
    for name in hidden:
        sys.modules[name] = None  # type: ignore[assignment]
    try:
        import structlog  # noqa: F401
    finally:
        for name in hidden:
            if sys.modules.get(name, False) is None:
                del sys.modules[name]


def _resolve(fmt: LogFormat, stream: TextIO | None) -> LogFormat:
    """``auto`` made definite: the console renderer on a terminal, JSON lines otherwise."""
    if fmt != "auto":
        return fmt
    return "console" if _isatty(stream if stream is not None else sys.stderr) else "json"


def _apply(fmt: LogFormat, level: str, stream: TextIO | None) -> None:
    import structlog

    out = stream if stream is not None else sys.stderr
    fmt = _resolve(fmt, out)
    renderer: Any
    # JSON escapes control characters itself; the console renderer prints strings as they are.
    escape: list[Any] = []
    if fmt == "json":
        renderer = structlog.processors.JSONRenderer(sort_keys=False)
    else:
        renderer = structlog.dev.ConsoleRenderer(colors=_isatty(out))
        escape = [escape_for_terminal]
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.StackInfoRenderer(),
            structlog.processors.format_exc_info,
            *escape,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(_level(level)),
        logger_factory=structlog.PrintLoggerFactory(file=out),
        cache_logger_on_first_use=False,
    )


_MULTILINE = frozenset({"exception", "stack"})
"""Keys whose values are laid out in lines by Python itself (tracebacks)."""


def escape_for_terminal(_logger: Any, _name: str, event_dict: dict[str, Any]) -> dict[str, Any]:
    """structlog processor: no value reaches a terminal with a raw control character.

    Records carry object names and HAProxy's output, both of which anyone who can write a
    manifest influences; see :mod:`controller.observability.text`.
    """
    out: dict[str, Any] = {}
    for key, value in event_dict.items():
        if key in _MULTILINE and isinstance(value, str):
            out[key] = escape_controls(value, keep="\n")
        else:
            out[key] = escape_value(value)
    return out


def get_logger(name: str) -> Any:
    """A logger carrying ``component=name``; structlog's bound loggers are untyped by design.

    The value is bound lazily, so loggers created at import time follow :func:`configure`
    calls made later. structlog itself is imported on the first use, not here: importing it
    imports rich (its console renderer and tracebacks), about 0.1 s that commands which log
    nothing, ``htc validate`` among them, should not pay for a module-level ``_log``.
    """
    return _Deferred(name)


class _Deferred:
    """A module-level logger that becomes structlog's (lazy) logger on its first use."""

    __slots__ = ("_logger", "_name")

    def __init__(self, name: str) -> None:
        self._name = name
        self._logger: Any = None

    def __getattr__(self, attr: str) -> Any:
        if self._logger is None:
            below = _METHOD_LEVELS.get(attr, logging.CRITICAL + 1)
            if _pending is not None and below < _level(_pending[1]):
                return _discard  # what the filtering logger does below its level
            self._logger = _structlog().get_logger(component=self._name)
        return getattr(self._logger, attr)


_METHOD_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "warn": logging.WARNING,
    "error": logging.ERROR,
    "exception": logging.ERROR,
    "critical": logging.CRITICAL,
    "fatal": logging.CRITICAL,
}
"""Record methods of structlog's filtering loggers, by the level they log at."""


def _discard(*_args: Any, **_kwargs: Any) -> None:
    """A record below the configured level, dropped without importing structlog."""


@contextmanager
def bind(**values: Any) -> Iterator[None]:
    """Attach ``values`` to every record logged in this context (task-local)."""
    with _structlog().contextvars.bound_contextvars(**values):
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
