"""Exceptions raised while compiling or rendering a template, turned into diagnostics.

The renderer never raises to its caller; everything that can go wrong inside a template ends
up here. The template location is read from the traceback: Jinja2's generated code carries
its template in the module globals and maps Python lines back to template lines, and the
innermost template frame is the most precise place (a macro in a snippet, not the line that
called it). The object is a guess that is right in the common case: the innermost loop or
macro variable that looks like a Kubernetes object (``apiVersion``/``kind``/``metadata``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from types import TracebackType
from typing import Any

from jinja2 import TemplateNotFound, TemplateSyntaxError, UndefinedError
from jinja2.exceptions import SecurityError

from controller.diagnostics import (
    Diagnostic,
    Location,
    ObjectRef,
    Phase,
    RuleId,
    TemplateLocation,
    make,
)
from controller.render.budget import BudgetExceeded
from controller.render.context import UnknownOutputError
from controller.render.filters import FilterError

_LOCAL = re.compile(r"^l_(\d+)_")


def template_frames(tb: TracebackType | None) -> list[tuple[TemplateLocation, Mapping[str, Any]]]:
    """(location, locals) of every template frame in the traceback, outermost first."""
    found: list[tuple[TemplateLocation, Mapping[str, Any]]] = []
    while tb is not None:
        template = tb.tb_frame.f_globals.get("__jinja_template__")
        if template is not None:
            line = template.get_corresponding_lineno(tb.tb_lineno)
            found.append(
                (
                    TemplateLocation(template=template.name or "<template>", line=line),
                    tb.tb_frame.f_locals,
                )
            )
        tb = tb.tb_next
    return found


def _looks_like_object(value: Any) -> bool:
    return (
        isinstance(value, Mapping)
        and isinstance(value.get("kind"), str)
        and isinstance(value.get("metadata"), Mapping)
    )


def object_from_frames(
    frames: list[tuple[TemplateLocation, Mapping[str, Any]]],
) -> ObjectRef | None:
    for _, local_vars in reversed(frames):
        best: tuple[int, Any] | None = None
        for key, value in local_vars.items():
            m = _LOCAL.match(key)
            if m and _looks_like_object(value):
                depth = int(m.group(1))
                if best is None or depth > best[0]:
                    best = (depth, value)
        if best is not None:
            obj = best[1]
            meta = obj["metadata"]
            return ObjectRef(
                api_version=obj.get("apiVersion")
                if isinstance(obj.get("apiVersion"), str)
                else None,
                kind=obj["kind"],
                namespace=meta.get("namespace") if isinstance(meta.get("namespace"), str) else None,
                name=meta.get("name") if isinstance(meta.get("name"), str) else None,
            )
    return None


def _cause(exc: BaseException) -> tuple[RuleId, str]:
    """(rule id, message) for an exception raised inside a template."""
    if isinstance(exc, TemplateSyntaxError):
        return "E1001", exc.message or str(exc)
    if isinstance(exc, TemplateNotFound):
        return "E1007", f"snippet {exc.name!r} is not defined"
    if isinstance(exc, BudgetExceeded):
        return "E1012", str(exc)
    if isinstance(exc, SecurityError):
        return "E1003", str(exc)
    if isinstance(exc, UndefinedError):
        return "E1002", str(exc)
    if isinstance(exc, UnknownOutputError):
        return "E1006", str(exc)
    if isinstance(exc, RecursionError):
        return "E1003", "recursion too deep (a macro or include calls itself without end)"
    if isinstance(exc, FilterError):
        return "E1004", str(exc)
    if isinstance(exc, UnicodeEncodeError):
        return "E1004", (
            f"the output is not valid Unicode text ({exc.reason} at position {exc.start}); "
            "a value from a resource cannot be written to a file"
        )
    if isinstance(exc, MemoryError):
        return "E1003", "the template ran out of memory"
    text = str(exc)
    return "E1004", f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def render_error(
    exc: BaseException,
    *,
    output_path: str | None,
    fallback_template: str,
    prefix: str = "",
) -> Diagnostic:
    """A diagnostic for an exception raised while rendering the output at ``output_path``."""
    rule_id, message = _cause(exc)
    frames = template_frames(exc.__traceback__)
    if isinstance(exc, TemplateSyntaxError) and exc.name:
        where = TemplateLocation(template=exc.name, line=exc.lineno)
    elif frames:
        where = frames[-1][0]
    else:
        where = TemplateLocation(template=fallback_template)
    return make(
        rule_id,
        Phase.RENDER,
        prefix + message,
        location=Location(file=output_path) if output_path else None,
        template_location=where,
        object=object_from_frames(frames),
    )


def syntax_error(exc: TemplateSyntaxError, template: str, *, output_path: str | None) -> Diagnostic:
    """E1001 for a template that does not parse."""
    return make(
        "E1001",
        Phase.RENDER,
        exc.message or str(exc),
        location=Location(file=output_path) if output_path else None,
        template_location=TemplateLocation(template=template, line=exc.lineno),
    )
