"""Judging one assertion of an embedded test against what the test produced.

Text assertions look at an output's rendered content; an output that produced nothing
(skipped, failed, blocked) fails every text assertion, ``notContains`` included — a test
that says "hosts.map does not mention other.local" must not pass because hosts.map vanished.
Regular expressions use Python's ``re`` with MULTILINE, so ``^`` and ``$`` anchor at lines.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from dataclasses import dataclass

from controller.render import RenderResult
from controller.spec import AssertionType, TestAssertion
from controller.validation.report import ValidationReport
from controller.validation.testing.model import AssertionResult

__all__ = ["Produced", "judge_assertion", "unified_diff"]

_MAX_LISTED = 5
_MAX_DIFF_LINES = 200


@dataclass(frozen=True)
class Produced:
    """Everything one test run produced that assertions may look at."""

    render: RenderResult
    paths: Mapping[str, str]
    """Output name → deploy path."""
    report: ValidationReport | None = None
    second: RenderResult | None = None
    """The second render of a ``deterministic`` assertion."""

    def content(self, render: RenderResult, target: str) -> str | None:
        path = self.paths.get(target)
        entry = render.files.get(path) if path is not None else None
        status = render.outputs.get(target)
        if entry is None or (status is not None and status.state != "rendered"):
            return None
        return entry.content.decode("utf-8", errors="replace")

    def absent(self, target: str) -> str:
        status = self.render.outputs.get(target)
        why = f" ({status.state}: {status.reason})" if status and status.reason else ""
        state = status.state if status else "not rendered"
        return f"output {target!r} produced no content: {state}{why}"


def unified_diff(expected: str, actual: str, expected_name: str, actual_name: str) -> str:
    lines = list(
        difflib.unified_diff(
            expected.splitlines(keepends=True),
            actual.splitlines(keepends=True),
            fromfile=expected_name,
            tofile=actual_name,
        )
    )
    if len(lines) > _MAX_DIFF_LINES:
        lines = [*lines[:_MAX_DIFF_LINES], f"... {len(lines) - _MAX_DIFF_LINES} more lines\n"]
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


def _ids(report: ValidationReport | None, render: RenderResult) -> set[str]:
    found = {d.rule_id for d in render.diagnostics}
    if report is not None:
        found |= {d.rule_id for d in report.diagnostics}
    return found


def _errors(report: ValidationReport) -> str:
    errs = report.errors[:_MAX_LISTED]
    listed = "; ".join(f"{d.rule_id} {d.message}" for d in errs)
    more = len(report.errors) - len(errs)
    return listed + (f"; and {more} more" if more > 0 else "")


def judge_assertion(index: int, a: TestAssertion, got: Produced) -> AssertionResult:
    def result(
        passed: bool, message: str | None = None, diff: str | None = None
    ) -> AssertionResult:
        return AssertionResult(
            index=index,
            type=a.type,
            target=a.target,
            passed=passed,
            message=None if passed else message,
            diff=None if passed else diff,
            description=a.description,
        )

    kind = a.type
    if kind is AssertionType.VALID:
        if got.report is None:
            return result(False, "the pipeline did not run")
        if got.report.valid:
            return result(True)
        return result(
            False, f"expected valid, got {got.report.status.value}: {_errors(got.report)}"
        )
    if kind is AssertionType.INVALID:
        if got.report is None:
            return result(False, "the pipeline did not run")
        missing = sorted(set(a.rule_ids) - _ids(got.report, got.render))
        if got.report.valid:
            return result(False, "expected invalid, but the candidate passed every stage")
        if missing:
            found = ", ".join(got.report.rule_ids()) or "none"
            return result(False, f"expected rule ids {', '.join(missing)}; found {found}")
        return result(True)
    if kind is AssertionType.RENDER_ERROR:
        if got.render.ok:
            return result(False, "expected a render error, but rendering succeeded")
        render_ids = {d.rule_id for d in got.render.diagnostics}
        missing = sorted(set(a.rule_ids) - render_ids)
        if missing:
            found = ", ".join(sorted(render_ids)) or "none"
            return result(False, f"expected render rule ids {', '.join(missing)}; found {found}")
        return result(True)

    text = got.content(got.render, a.target)
    if text is None:
        return result(False, got.absent(a.target))
    value = a.value or ""
    if kind is AssertionType.CONTAINS:
        return result(value in text, f"{a.target} does not contain {value!r}")
    if kind is AssertionType.NOT_CONTAINS:
        line = next((n for n, x in enumerate(text.splitlines(), 1) if value in x), None)
        return result(line is None, f"{a.target} contains {value!r} (line {line})")
    if kind is AssertionType.MATCHES:
        return result(
            re.search(value, text, re.MULTILINE) is not None,
            f"no match for /{value}/ in {a.target}",
        )
    if kind is AssertionType.MATCH_COUNT:
        n = sum(1 for _ in re.finditer(value, text, re.MULTILINE))
        return result(
            n == a.count, f"/{value}/ matched {n} time(s) in {a.target}, expected {a.count}"
        )
    if kind is AssertionType.MATCH_ORDER:
        pos = 0
        for i, pattern in enumerate(a.patterns, start=1):
            m = re.compile(pattern, re.MULTILINE).search(text, pos)
            if m is None:
                where = "at all" if i == 1 else f"after the match of pattern {i - 1}"
                return result(
                    False, f"pattern {i} /{pattern}/ does not match {where} in {a.target}"
                )
            pos = m.end()
        return result(True)
    if kind is AssertionType.EQUALS:
        if text == value:
            return result(True)
        diff = unified_diff(value, text, "expected", f"{a.target} (rendered)")
        return result(False, f"{a.target} differs from the expected content", diff)
    if kind is AssertionType.DETERMINISTIC:
        second = got.content(got.second, a.target) if got.second is not None else None
        if second is None:
            return result(False, f"the second render of {a.target} produced no content")
        if second == text:
            return result(True)
        diff = unified_diff(
            text, second, f"{a.target} (first render)", f"{a.target} (second render)"
        )
        return result(False, f"two renders of {a.target} differ", diff)
    return result(False, f"unknown assertion type {kind.value}")  # pragma: no cover
