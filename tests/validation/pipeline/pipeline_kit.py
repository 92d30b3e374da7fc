"""Small, honest Stage implementations and render builders for pipeline tests.

The stages implement the real ``Stage`` protocol: they read the context, return a
``StageOutcome`` and record what they saw, so tests can assert ordering, skipping and
single-flight behaviour without depending on the real stages' findings.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from controller.diagnostics import Diagnostic, Location, Phase, Severity, TemplateLocation, make
from controller.render import FileEntry, FileKind, FileSet, RenderResult, SourceMap
from controller.validation.report import BudgetExhaustion
from controller.validation.stage import Stage, StageContext, StageOutcome

CFG = "global\n    maxconn 100\n\ndefaults\n    mode http\n"


def render_of(
    cfg: str = CFG,
    *,
    extra: Sequence[FileEntry] = (),
    diagnostics: Sequence[Diagnostic] = (),
    template: str = "haproxy.cfg",
    offset: int = 0,
    render_ms: float = 1.5,
) -> RenderResult:
    """A RenderResult whose source map says rendered line N came from template line N+offset."""
    files = FileSet.of([FileEntry("haproxy.cfg", FileKind.CONFIG, cfg.encode()), *extra])
    n = cfg.count("\n") + 1
    smap = SourceMap(
        {
            "haproxy.cfg": tuple(
                TemplateLocation(template=template, line=i + 1 + offset) for i in range(n)
            )
        }
    )
    return RenderResult(
        files=files, source_map=smap, diagnostics=tuple(diagnostics), render_ms=render_ms
    )


Behaviour = Callable[[StageContext], StageOutcome]


@dataclass
class FakeStage(Stage):
    phase: Phase
    diagnostics: list[Diagnostic] = field(default_factory=list)
    budget: BudgetExhaustion | None = None
    raises: BaseException | None = None
    delay: float = 0.0
    fp: str = "v1"
    log: list[str] = field(default_factory=list)
    calls: int = 0
    seen_checksums: list[str] = field(default_factory=list)
    returns: object = None

    def fingerprint(self) -> str:
        return f"{self.phase.value}:{self.fp}"

    async def run(self, ctx: StageContext) -> StageOutcome:
        self.calls += 1
        self.log.append(self.phase.value)
        self.seen_checksums.append(ctx.files.checksum)
        if self.delay:
            await asyncio.sleep(self.delay)
        if self.raises is not None:
            raise self.raises
        if self.returns is not None:
            return self.returns  # type: ignore[return-value]
        return StageOutcome(list(self.diagnostics), budget=self.budget)


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


def registered(rule: str, phase: Phase, msg: str = "finding") -> Diagnostic:
    return make(rule, phase, msg)
