"""Asking a real haproxy binary which of many candidate lines it accepts, in few runs.

The differential tests need a per-line verdict for hundreds of lines, and one ``haproxy -c``
per line is far too slow. Putting them all in one file is not enough either: HAProxy stops
reading after 50 fatal errors or after an error that aborts parsing, and the checks it runs
after parsing (server weights, missing references, ...) only run when parsing found no error
at all. So a line without an alert is only *accepted* once it was part of a run that ended
clean. The oracle runs the lines together, removes those that drew an alert, runs the rest
again, and splits a group in halves when a run fails without naming any of its lines.
"""

from __future__ import annotations

from pathlib import Path

from tests.validation.schema.schema_helpers import Case, render_cases, run_haproxy

#: Lines per run: HAProxy gives up after 50 fatal errors, and small files parse fast.
GROUP = 40


def accepted(binary: str, cases: list[Case], workdir: Path) -> list[bool]:
    """One verdict per case, in order: True when haproxy loads it without an alert."""
    verdict: dict[int, bool] = {}
    for start in range(0, len(cases), GROUP):
        _judge(binary, cases, list(range(start, min(start + GROUP, len(cases)))), workdir, verdict)
    return [verdict[i] for i in range(len(cases))]


def _judge(
    binary: str, cases: list[Case], group: list[int], workdir: Path, verdict: dict[int, bool]
) -> None:
    while group:
        part = [cases[i] for i in group]
        outcome = run_haproxy(binary, render_cases(part), workdir)
        alerted = [i for i in group if "ALERT" in outcome.levels(cases[i].lineno)]
        clean = outcome.rc in (0, 2) and not any(
            "ALERT" in line for line in outcome.output.splitlines()
        )
        if clean:
            for i in group:
                verdict[i] = True
            return
        for i in alerted:
            verdict[i] = False
        rest = [i for i in group if i not in alerted]
        if alerted:
            group = rest
            continue
        # the run failed, but no alert names one of these lines: find the culprit by halves
        if len(group) == 1:
            verdict[group[0]] = False
            return
        half = len(group) // 2
        _judge(binary, cases, group[:half], workdir, verdict)
        _judge(binary, cases, group[half:], workdir, verdict)
        return
