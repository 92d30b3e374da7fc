"""``htc test`` output: text for people, JSON for programs, JUnit XML for CI.

JUnit has one test case per embedded test (a failed assertion is a ``failure``, a test that
could not run an ``error``), with diffs of failed ``equals``/``deterministic`` assertions in
the failure text, where CI systems show them. A config that fails lint gets one failing
``lint`` case instead, so CI counts a failure rather than an empty, green suite.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from typing import Literal, get_args

from controller.diagnostics import Severity
from controller.validation.report import ValidationReport
from controller.validation.testing.model import SuiteReport, TestResult, TestStatus

__all__ = ["TEST_FORMATS", "format_suite"]

TestFormat = Literal["text", "json", "junit"]
TEST_FORMATS: tuple[str, ...] = get_args(TestFormat)

_LABEL = {TestStatus.PASSED: "PASS", TestStatus.FAILED: "FAIL", TestStatus.ERROR: "ERROR"}
_MAX_CONTEXT = 5
_WHOLE = frozenset({"valid", "invalid", "renderError"})
"""Assertions about the whole candidate, not one output."""


def format_suite(report: SuiteReport, fmt: str = "text") -> str:
    if fmt == "text":
        return _text(report)
    if fmt == "json":
        return json.dumps(report.to_json_dict(), indent=2, sort_keys=True) + "\n"
    if fmt == "junit":
        return _junit(report)
    raise ValueError(f"unknown format {fmt!r}; use one of {', '.join(TEST_FORMATS)}")


def _details(t: TestResult) -> list[str]:
    lines: list[str] = []
    for a in t.assertions:
        if a.passed:
            continue
        what = a.type.value if a.type.value in _WHOLE else f"{a.type.value} {a.target}"
        lines.append(f"  assertion {a.index} ({what}): {a.message}")
        if a.description:
            lines.append(f"    {a.description}")
        if a.diff:
            lines.extend("    " + x for x in a.diff.rstrip("\n").splitlines())
    if t.status is TestStatus.ERROR:
        lines.extend(f"  {d.rule_id} {d.message}" for d in t.diagnostics)
    context = [d for d in t.render_diagnostics if d.severity.rank <= Severity.ERROR.rank][
        :_MAX_CONTEXT
    ]
    if context and t.status is not TestStatus.PASSED:
        lines.append("  render reported:")
        lines.extend(f"    {d.rule_id} {d.message}" for d in context)
    return lines


def _lint_lines(lint: ValidationReport) -> list[str]:
    lines: list[str] = []
    for d in lint.errors:
        where = ""
        if d.location is not None:
            where = d.location.file + (f":{d.location.line}" if d.location.line else "") + ": "
        lines.append(f"  {where}{d.rule_id} {d.message}")
    return lines


def _lint_summary(lint: ValidationReport) -> str:
    n = len(lint.errors)
    return f"{n} lint error(s); the controller would refuse this config, so no test ran"


def _text(report: SuiteReport) -> str:
    out: list[str] = []
    if report.lint is not None and not report.lint.valid:
        out.append(f"FAIL lint: {_lint_summary(report.lint)}")
        out.extend(_lint_lines(report.lint))
    for t in report.tests:
        out.append(f"{_LABEL[t.status]} {t.name} ({t.duration_ms:.0f} ms)")
        out.extend(_details(t))
    c = report.counts
    out.append(
        f"{c.get('total', 0)} tests: {c.get('passed', 0)} passed, {c.get('failed', 0)} failed, "
        f"{c.get('error', 0)} could not run ({report.duration_ms:.0f} ms)"
    )
    return "\n".join(out) + "\n"


def _junit(report: SuiteReport) -> str:
    name = f"htc test {report.config}"
    suites = ET.Element("testsuites", name=name)
    suite = ET.SubElement(suites, "testsuite", name=name)
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    if report.lint is not None and not report.lint.valid:
        totals["tests"] += 1
        totals["failures"] += 1
        case = ET.SubElement(suite, "testcase", classname=report.config, name="lint", time="0.000")
        first = report.lint.errors[0] if report.lint.errors else None
        el = ET.SubElement(
            case,
            "failure",
            type=first.rule_id if first else "lint",
            message=_lint_summary(report.lint),
        )
        el.text = "\n".join(x.strip() for x in _lint_lines(report.lint)) or None
    for t in report.tests:
        totals["tests"] += 1
        case = ET.SubElement(
            suite,
            "testcase",
            classname=report.config,
            name=t.name,
            time=f"{t.duration_ms / 1000.0:.3f}",
        )
        if t.status is TestStatus.PASSED:
            continue
        kind = "failure" if t.status is TestStatus.FAILED else "error"
        totals["failures" if kind == "failure" else "errors"] += 1
        first = t.diagnostics[0] if t.diagnostics else None
        el = ET.SubElement(
            case,
            kind,
            type=first.rule_id if first else kind,
            message=first.message if first else kind,
        )
        el.text = "\n".join(x.strip("\n") for x in _details(t)) or None
        if t.description:
            ET.SubElement(case, "system-out").text = t.description
    for el in (suites, suite):
        for k, v in totals.items():
            el.set(k, str(v))
        el.set("time", f"{report.duration_ms / 1000.0:.3f}")
    ET.indent(suites)
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"
    )
