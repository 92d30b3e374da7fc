"""Pipeline-test shorthands over the public kit (:mod:`controller.testing`): its
:class:`FakeStage` and render builder, with this directory's default configuration."""

from __future__ import annotations

from typing import Any

from controller import testing
from controller.diagnostics import Diagnostic, Location, Phase, RuleId, Severity, make
from controller.render import RenderResult
from controller.testing import FakeStage

__all__ = ["ALL", "CFG", "FakeStage", "at", "registered", "render_of", "stages"]

CFG = "global\n    maxconn 100\n\ndefaults\n    mode http\n"


def render_of(cfg: str = CFG, **kw: Any) -> RenderResult:
    """:func:`controller.testing.render_of` of ``cfg`` (this directory's CFG by default)."""
    return testing.render_of(cfg, **kw)


def stages(*phases: Phase, log: list[str] | None = None) -> list[FakeStage]:
    shared = log if log is not None else []
    return [FakeStage(p, log=shared) for p in phases]


ALL = (Phase.SYNTAX, Phase.SCHEMA, Phase.HAPROXY, Phase.EXTERNAL)


def at(
    rule: str, phase: Phase, line: int | None = 2, msg: str = "finding", column: int | None = None
) -> Diagnostic:
    """A finding at haproxy.cfg:line. Built directly (not with ``make``) so tests can use ids
    of blocks other engineers have not registered yet; the pipeline never consults the
    registry for ids it merely passes on."""
    loc = Location(file="haproxy.cfg", line=line, column=column, end_column=column)
    return Diagnostic(
        rule_id=rule, severity=Severity.from_prefix(rule), phase=phase, message=msg, location=loc
    )


def registered(rule: RuleId, phase: Phase, msg: str = "finding") -> Diagnostic:
    return make(rule, phase, msg)
