"""Reports for format tests, built through a real Pipeline with tiny honest stages."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from controller.diagnostics import (
    Diagnostic,
    Location,
    ObjectRef,
    Phase,
    Severity,
    TemplateLocation,
)
from controller.render import FileEntry, FileKind, FileSet, RenderResult, SourceMap
from controller.validation import Pipeline, ValidationReport
from controller.validation.report import BudgetExhaustion
from controller.validation.stage import Stage, StageContext, StageOutcome

CFG = "global\n\tmaxconn 100\n\nfrontend fe\n    bind 127.0.0.1:8080 ssl crt certs/site.pem\n"
PEM = b"-----BEGIN PRIVATE KEY-----\nSECRETSECRET\n-----END PRIVATE KEY-----\n"


@dataclass
class Says(Stage):
    phase: Phase
    diagnostics: list[Diagnostic] = field(default_factory=list)
    budget: BudgetExhaustion | None = None

    def fingerprint(self) -> str:
        return self.phase.value

    async def run(self, ctx: StageContext) -> StageOutcome:
        return StageOutcome(list(self.diagnostics), budget=self.budget)


def finding(
    rule: str,
    phase: Phase,
    file: str = "haproxy.cfg",
    line: int | None = 5,
    column: int | None = None,
    end: int | None = None,
    msg: str = "finding",
    **kw: object,
) -> Diagnostic:
    return Diagnostic(
        rule_id=rule,
        severity=Severity.from_prefix(rule),
        phase=phase,
        message=msg,
        location=Location(file=file, line=line, column=column, end_column=end),
        **kw,
    )


def sample_render() -> RenderResult:
    files = FileSet.of(
        [
            FileEntry("haproxy.cfg", FileKind.CONFIG, CFG.encode()),
            FileEntry("certs/site.pem", FileKind.CERT, PEM),
        ]
    )
    lines = tuple(TemplateLocation(template="haproxy.cfg", line=i + 20) for i in range(6))
    return RenderResult(files=files, source_map=SourceMap({"haproxy.cfg": lines}), render_ms=3.0)


def report_with(*by_stage: Says, render: RenderResult | None = None) -> ValidationReport:
    p = Pipeline(list(by_stage), haproxy_version="2.8.25", cache=None)
    return asyncio.run(p.validate(render or sample_render()))


def typical() -> tuple[ValidationReport, RenderResult]:
    """A failing report with an error (with span), a warning with an object, and a skip."""
    render = sample_render()
    err = finding(
        "E4001", Phase.HAPROXY, line=5, column=29, end=31, msg="unable to load certs/site.pem"
    )
    warn = finding(
        "W3001",
        Phase.SCHEMA,
        line=2,
        column=2,
        end=8,
        msg="maxconn in global is deprecated here",
        suggested_fix="move it",
        object=ObjectRef(
            api_version="networking.k8s.io/v1", kind="Ingress", namespace="default", name="echo"
        ),
    )
    key = finding(
        "E4002", Phase.HAPROXY, file="certs/site.pem", line=2, column=1, end=12, msg="bad key"
    )
    report = report_with(
        Says(Phase.SYNTAX),
        Says(Phase.SCHEMA, [warn]),
        Says(Phase.HAPROXY, [err, key]),
        Says(Phase.EXTERNAL),
        render=render,
    )
    return report, render
