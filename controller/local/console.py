"""What ``htc local`` prints: one line per deployed change, a full report per rejected one.

People watch this terminal while editing manifests, so a rejection prints the same text
report as ``htc validate`` (rendered lines quoted, rule ids, fixes) and says plainly that the
last good configuration keeps serving; a deploy is one line with the checksum and timing.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TextIO

from controller.diagnostics import Diagnostic
from controller.publish import Event, EventKind
from controller.validation import format_report

__all__ = ["ConsoleSink", "format_diagnostics"]


def format_diagnostics(diagnostics: Sequence[Diagnostic]) -> str:
    """Diagnostics that are not part of a validation report (deploy, spec, input files)."""
    out: list[str] = []
    for d in diagnostics:
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
    shown = ", ".join(event.objects[:3])
    more = len(event.objects) - 3
    return f"; {shown}" + (f" and {more} more" if more > 0 else "")


class ConsoleSink:
    def __init__(self, out: TextIO | None = None) -> None:
        self.out = out if out is not None else sys.stdout
        self._inputs: list[Diagnostic] = []

    def __call__(self, event: Event) -> None:
        text = self.format(event)
        if text:
            self.out.write(text if text.endswith("\n") else text + "\n")
            self.out.flush()

    def format(self, event: Event) -> str:
        checksum = (event.checksum or "")[:12]
        if event.kind is EventKind.DEPLOYED:
            results = event.results
            if all(r.outcome.value == "unchanged" for r in results):
                return ""  # a resync or an edit that changed nothing HAProxy sees
            ms = sum(r.duration_ms for r in results)
            warnings = len(event.report.warnings) if event.report else 0
            return (
                f"deployed {checksum} ({event.trigger}{_objects(event)}): "
                f"{', '.join(f'{r.target} {r.outcome.value}' for r in results)} "
                f"in {ms:.0f} ms, {warnings} warning{'s' if warnings != 1 else ''}"
            )
        if event.kind is EventKind.DEPLOY_FAILED:
            lines = [
                f"deploy of {checksum} failed ({event.trigger}{_objects(event)}); "
                "the last good configuration keeps serving:",
                format_diagnostics(event.diagnostics),
            ]
            return "\n".join(lines)
        if event.kind is EventKind.REJECTED:
            assert event.report is not None
            head = (
                f"rejected ({event.trigger}{_objects(event)}); "
                "the last good configuration keeps serving:"
            )
            return head + "\n" + format_report(event.report, "text", render=event.render)
        if event.kind is EventKind.SPEC_REJECTED:
            body = (
                format_report(event.report, "text", render=event.render)
                if event.report is not None
                else format_diagnostics(event.diagnostics[1:])
            )
            rule = event.diagnostics[0].rule_id if event.diagnostics else "E7010"
            return f"{rule} {event.message}:\n{body}"
        if event.kind is EventKind.SPEC_ACCEPTED:
            return ""
        return f"{event.message or 'haproxy event'}\n{format_diagnostics(event.diagnostics)}"

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
