"""JUnit XML, for CI systems that show test results but know nothing about SARIF.

One test case per phase: ``render`` first, then every pipeline stage in order (run or
skipped), then any other phase a finding names. A case fails when its phase has findings at
error severity, is an error when its stage ran out of budget or crashed, and is skipped when
the stage did not run. Warnings and infos go to the case's ``system-out``.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

from controller.diagnostics import Diagnostic, Phase, Severity
from controller.validation.formats.text import printable, template_where
from controller.validation.report import ValidationReport

__all__ = ["format_junit"]

SUITE = "haproxy-template-controller validation"


def _line(d: Diagnostic) -> str:
    where = ""
    if d.location is not None:
        where = d.location.file + (f":{d.location.line}" if d.location.line else "") + ": "
    text = f"{where}{d.rule_id} {d.severity.value}: {d.message}"
    if d.template_location is not None:
        text += f" (template {template_where(d.template_location)})"
    if d.occurrences is not None and d.occurrences.count > 1:
        text += f" [{d.occurrences.count} rendered lines]"
    # XML 1.0 cannot carry most control characters at all, and CI pages show them raw.
    return printable(text)


def _phases(report: ValidationReport) -> list[Phase]:
    m = report.metadata
    order: list[Phase] = [Phase.RENDER, *m.stages_run, *m.stages_skipped]
    order += [d.phase for d in report.diagnostics]
    seen: list[Phase] = []
    for p in order:
        if p not in seen:
            seen.append(p)
    return seen


def format_junit(report: ValidationReport) -> str:
    m = report.metadata
    budgets = {b.phase for b in m.budget_exhaustions}
    skipped = set(m.stages_skipped)
    suites = ET.Element("testsuites", name=SUITE)
    suite = ET.SubElement(suites, "testsuite", name=SUITE)
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for phase in _phases(report):
        diags = [d for d in report.diagnostics if d.phase is phase]
        ms = report.timings.get(f"{phase.value}Ms", 0.0)
        case = ET.SubElement(
            suite,
            "testcase",
            classname="validation",
            name=phase.value,
            time=f"{ms / 1000.0:.3f}",
        )
        totals["tests"] += 1
        bad = [d for d in diags if d.severity.rank <= Severity.ERROR.rank]
        crashed = [d for d in bad if d.rule_id == "F0001"]
        if phase in budgets or crashed:
            totals["errors"] += 1
            kind = "analysis_incomplete" if phase in budgets else "internal_error"
            el = ET.SubElement(case, "error", type=kind, message=f"{phase.value}: {kind}")
            el.text = "\n".join(_line(d) for d in bad) or None
        elif bad:
            totals["failures"] += 1
            first = bad[0]
            el = ET.SubElement(
                case,
                "failure",
                type=first.rule_id,
                message=printable(f"{len(bad)} error(s); first: {first.rule_id} {first.message}"),
            )
            el.text = "\n".join(_line(d) for d in bad)
        elif phase in skipped:
            totals["skipped"] += 1
            reason = next((d.message for d in diags if d.rule_id == "I0003"), "not run")
            ET.SubElement(case, "skipped", message=printable(reason))
        rest = [d for d in diags if d.severity.rank > Severity.ERROR.rank and d.rule_id != "I0003"]
        if rest:
            ET.SubElement(case, "system-out").text = "\n".join(_line(d) for d in rest)
    total_s = f"{report.timings.get('totalMs', 0.0) / 1000.0:.3f}"
    for el in (suites, suite):
        for k, v in totals.items():
            el.set(k, str(v))
        el.set("time", total_s)
    ET.indent(suites)
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"
    )
