"""What ``htc local`` prints: one line per deployed change, a full report per rejected one.

People watch this terminal while editing manifests, so a rejection prints the same text
report as ``htc validate`` (rendered lines quoted, rule ids, fixes) and says plainly what
keeps serving — the last good configuration, or nothing yet when none was ever deployed; a
deploy is one line with the checksum and timing, followed by its warnings if it has any.

Object names, file names and messages are written by whoever writes manifests, so every one
of them is escaped before it reaches the terminal (:mod:`controller.observability.text`): a
name cannot clear the screen or forge a "deployed" line.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TextIO

from controller.diagnostics import Diagnostic
from controller.observability import escape_controls
from controller.publish import Event, EventKind
from controller.validation import Origin, ValidationReport, format_report, with_origins

__all__ = ["ConsoleSink", "format_diagnostics", "safe_diagnostic"]


def safe_diagnostic(d: Diagnostic) -> Diagnostic:
    """``d`` with its untrusted text (message, file, object reference) escaped."""
    update: dict[str, object] = {}
    message = escape_controls(d.message)
    if message != d.message:
        update["message"] = message
    if d.location is not None:
        file = escape_controls(d.location.file)
        if file != d.location.file:
            update["location"] = d.location.model_copy(update={"file": file})
    if d.object is not None:
        fields = d.object.model_dump()
        clean = {k: escape_controls(v) for k, v in fields.items() if isinstance(v, str)}
        if any(clean[k] != fields[k] for k in clean):
            update["object"] = d.object.model_copy(update=clean)
    if d.suggested_fix is not None:
        fix = escape_controls(d.suggested_fix)
        if fix != d.suggested_fix:
            update["suggested_fix"] = fix
    return d.model_copy(update=update) if update else d


def _safe_report(report: ValidationReport) -> ValidationReport:
    return report.model_copy(
        update={"diagnostics": [safe_diagnostic(d) for d in report.diagnostics]}
    )


def format_diagnostics(diagnostics: Sequence[Diagnostic]) -> str:
    """Diagnostics that are not part of a validation report (deploy, spec, input files)."""
    out: list[str] = []
    for d in map(safe_diagnostic, diagnostics):
        where = ""
        if d.location is not None:
            where = d.location.file
            if d.location.line:
                where += f":{d.location.line}"
            where += ": "
        out.append(f"  {d.rule_id} {d.severity.value} [{d.phase.value}] {where}{d.message}")
    return "\n".join(out)


def _objects(event: Event) -> str:
    if not event.objects:
        return ""
    shown = ", ".join(escape_controls(o) for o in event.objects[:3])
    more = len(event.objects) - 3
    return f"; {shown}" + (f" and {more} more" if more > 0 else "")


def _report(event: Event, origin: Origin | None = None) -> str:
    assert event.report is not None
    report = event.report
    if origin is not None:
        located = with_origins(report.diagnostics, origin)
        report = report.model_copy(update={"diagnostics": located})
    text = format_report(_safe_report(report), "text", render=event.render)
    # Quoted rendered lines are the templates' output, not ours: whatever control character
    # got that far is shown, not obeyed. The report's own line breaks stay.
    return escape_controls(text, keep="\n\t")


def _retry(event: Event) -> str:
    return f"; retrying in {event.retry_in:g} s" if event.retry_in is not None else ""


class ConsoleSink:
    def __init__(self, out: TextIO | None = None) -> None:
        self.out = out if out is not None else sys.stdout
        self._inputs: list[Diagnostic] = []
        self._rejected = False
        """The latest verdict was a rejection: the next deploy says the set is valid again."""
        self.origin: Origin | None = None
        """Completes template locations with the config file's lines (set by the app)."""

    def __call__(self, event: Event) -> None:
        text = self.format(event)
        if text:
            self.out.write(text if text.endswith("\n") else text + "\n")
            self.out.flush()

    def format(self, event: Event) -> str:
        checksum = (event.checksum or "")[:12]
        if event.kind is EventKind.DEPLOYED:
            results = event.results
            recovered = self._rejected
            self._rejected = False
            if recovered:
                line = f"valid again: {checksum} serving ({event.trigger}{_objects(event)})"
                if any(r.outcome.value != "unchanged" for r in results):
                    ms = sum(r.duration_ms for r in results)
                    line += f", deployed in {ms:.0f} ms"
                return line
            if all(r.outcome.value == "unchanged" for r in results):
                return ""  # a resync or an edit that changed nothing HAProxy sees
            ms = sum(r.duration_ms for r in results)
            warnings = list(event.report.warnings) if event.report else []
            line = (
                f"deployed {checksum} ({event.trigger}{_objects(event)}): "
                f"{', '.join(f'{r.target} {r.outcome.value}' for r in results)} "
                f"in {ms:.0f} ms, {len(warnings)} warning{'s' if len(warnings) != 1 else ''}"
            )
            return line + ("\n" + format_diagnostics(warnings) if warnings else "")
        if event.kind is EventKind.DEPLOY_FAILED:
            lines = [
                f"deploy of {checksum} failed ({event.trigger}{_objects(event)}); "
                f"{event.fallback()}{_retry(event)}:",
                format_diagnostics(event.diagnostics),
            ]
            return "\n".join(lines)
        if event.kind is EventKind.REJECTED:
            self._rejected = True
            head = f"rejected ({event.trigger}{_objects(event)}); {event.fallback()}:"
            return head + "\n" + _report(event, self.origin)
        if event.kind is EventKind.SPEC_REJECTED:
            body = (
                _report(event, self.origin)
                if event.report is not None
                else format_diagnostics(event.diagnostics[1:])
            )
            rule = event.diagnostics[0].rule_id if event.diagnostics else "E7010"
            return f"{rule} {escape_controls(event.message)}:\n{body}"
        if event.kind is EventKind.SPEC_ACCEPTED:
            return ""
        message = escape_controls(event.message or "haproxy event")
        return f"{message}\n{format_diagnostics(event.diagnostics)}"

    def inputs(self, diagnostics: list[Diagnostic]) -> None:
        """Directory adapter callback: the complete current list of input-file problems."""
        if diagnostics == self._inputs:
            return
        if diagnostics:
            self.out.write(f"input files: {len(diagnostics)} problem(s)\n")
            self.out.write(format_diagnostics(diagnostics) + "\n")
        elif self._inputs:
            self.out.write("input files: all problems fixed\n")
        self.out.flush()
        self._inputs = list(diagnostics)
