"""Helpers for the schema tests: parsing, render results, and feeding catalog examples to
real haproxy.

The example harness turns every ``example`` in the catalog into a tiny section of one big
configuration (one ``haproxy -c`` run per binary), so the schema's claims — "this keyword
exists here", "this one is ignored there", "that one was removed" — are checked against the
binary itself, line by line, and the schema engine must reach the same verdict on the same
text. (A uniquely named module rather than conftest.py: test modules import from it.)
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from controller.render import FileEntry, FileKind, FileSet, RenderResult, SourceMap
from controller.validation.parsed import Directive, Section, Token
from controller.validation.schema import SchemaEngine, family_for_version
from controller.validation.schema.catalog import PROXY_SECTIONS, Family, KeywordSpec, family
from controller.validation.schema.kwdump import features
from controller.validation.syntax import ParsedConfig, parse

_LINE_RE = re.compile(r"\[[^\]\[]*?:(\d+)\]")
_LEVEL_RE = re.compile(r"^\[(ALERT|WARNING)\]")


def parse_cfg(text: str, file: str = "haproxy.cfg") -> ParsedConfig:
    """The real syntax-stage parser; these tests need its spans and section hashes."""
    parsed, diagnostics = parse(text, file)
    errors = [d for d in diagnostics if d.severity.value in ("error", "fatal")]
    assert not errors, errors
    return parsed


def render_result(
    text: str, path: str = "haproxy.cfg", template: str = "haproxy.cfg.j2"
) -> RenderResult:
    """A render result whose source map says rendered line N came from template line N+100."""
    from controller.diagnostics import TemplateLocation

    lines = text.count("\n") + 1
    smap = SourceMap(
        {
            path: tuple(
                TemplateLocation(template=template, line=i + 100) for i in range(1, lines + 1)
            )
        }
    )
    files = FileSet.of([FileEntry(path, FileKind.CONFIG, text.encode())])
    return RenderResult(files=files, source_map=smap)


def token_section(keyword: str, name: str | None, lines: list[str], file: str = "t.cfg") -> Section:
    """A hand-built section (for tests that must control tokens exactly)."""

    def directive(line_no: int, words: list[str]) -> Directive:
        col = 5
        toks = []
        for w in words:
            toks.append(Token(value=w, raw=w, column=col, end_column=col + len(w) - 1))
            col += len(w) + 1
        return Directive(file=file, line=line_no, tokens=tuple(toks))

    header = directive(1, [keyword, *([name] if name else [])])
    body = tuple(directive(i + 2, line.split()) for i, line in enumerate(lines))
    return Section(header=header, directives=body, end_line=len(lines) + 1, text_hash="")


# --- feeding examples to haproxy -------------------------------------------------------------


@dataclass
class Case:
    kind: str
    """Section kind the example is placed in."""
    line: str
    expect: str
    """``clean``, ``warn`` or ``alert``."""
    what: str
    named: bool = True
    lineno: int = 0


@dataclass
class Outcome:
    rc: int
    by_line: dict[int, set[str]] = field(default_factory=dict)
    text: str = ""
    output: str = ""

    def levels(self, lineno: int) -> set[str]:
        return self.by_line.get(lineno, set())


_PROXY_HEAD = {
    "frontend": ["mode http", "bind 127.0.0.1:{port}"],
    "listen": ["mode http", "bind 127.0.0.1:{port}", "server base 127.0.0.1:8081"],
    "backend": ["mode http", "server base 127.0.0.1:8081"],
    "cache": ["total-max-size 4"],
    "fcgi-app": ["docroot /var/www"],
    "program": ["command /bin/true"],
    "defaults": ["mode http", "timeout connect 1s", "timeout client 1s", "timeout server 1s"],
}
_PRELUDE = [
    "global",
    "    expose-experimental-directives",
    "    master-worker",
    "defaults base",
    "    mode http",
    "    log 127.0.0.1:514 local0",
    "    timeout connect 1s",
    "    timeout client 1s",
    "    timeout server 1s",
    "backend be_schema",
    "    server base 127.0.0.1:8081",
    "    stick-table type ip size 1k store gpc0,gpt0",
    "resolvers dns1",
    "    nameserver ns1 127.0.0.1:53",
    "mailers m1",
    "    mailer smtp1 127.0.0.1:25",
]


def render_cases(cases: list[Case]) -> str:
    """One configuration with one small section per case; sets each case's line number."""
    lines = list(_PRELUDE)
    port = 20000
    # defaults sections reset what follows them, so they all go last
    # global settings such as nbthread must sit in the first global section
    globals_ = [c for c in cases if c.kind == "global"]
    at = _PRELUDE.index("global") + 1
    for n, case in enumerate(globals_):
        port += 1
        lines.insert(at + n, "    " + case.line.replace("{port}", str(port)))
        case.lineno = at + n + 1
    ordered = sorted((c for c in cases if c.kind != "global"), key=lambda c: c.kind == "defaults")
    for n, case in enumerate(ordered):
        port += 1
        name = f"x{n}"
        if case.kind == "defaults":
            lines.append(f"defaults {name}" if case.named else "defaults")
        else:
            lines.append(f"{case.kind} {name}")
        for head in _PROXY_HEAD.get(case.kind, []):
            lines.append("    " + head.replace("{port}", str(port)))
        port += 1
        for part in case.line.replace("{port}", str(port)).split("\n"):
            lines.append("    " + part)
        case.lineno = len(lines)
    return "\n".join(lines) + "\n"


def run_haproxy(binary: str, text: str, workdir: Path) -> Outcome:
    cfg_path = workdir / "t.cfg"
    cfg_path.write_text(text)
    proc = subprocess.run(
        [binary, "-c", "-f", "t.cfg"],
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=30,
        env={},
        check=False,
    )
    out = Outcome(rc=proc.returncode, text=text, output=proc.stdout + proc.stderr)
    for raw in out.output.splitlines():
        level = _LEVEL_RE.match(raw)
        if not level:
            continue
        m = _LINE_RE.search(raw)
        if m:
            out.by_line.setdefault(int(m.group(1)), set()).add(level.group(1))
    return out


def mismatches(cases: list[Case], outcome: Outcome) -> list[str]:
    bad = []
    for case in cases:
        got = outcome.levels(case.lineno)
        ok = {
            "clean": not got,
            "warn": got == {"WARNING"},
            "alert": "ALERT" in got,
        }[case.expect]
        if not ok:
            bad.append(
                f"{case.what} in {case.kind}: expected {case.expect}, got {sorted(got)}: {case.line}"
            )
    return bad


def chunks(cases: list[Case], size: int) -> Iterator[list[Case]]:
    for i in range(0, len(cases), size):
        yield cases[i : i + size]


def proxy_placements(spec: KeywordSpec) -> Iterator[tuple[str, bool, str]]:
    """(section kind, named, expected placement) for every proxy section kind."""
    for kind in PROXY_SECTIONS:
        if kind == "defaults":
            yield kind, True, spec.placement(kind, named=True)
            if spec.sections and spec.sections[0] == "n":
                yield kind, False, spec.placement(kind, named=False)
        else:
            yield kind, True, spec.placement(kind, named=True)


def sections_of(fam: Family, group: str) -> list[str]:
    return sorted(k for k, s in fam.sections.items() if s.group == group)


def family_features_ok(spec_feature: str | None, features: set[str]) -> bool:
    return spec_feature is None or spec_feature in features


# --- verdicts -----------------------------------------------------------------------------


@cache
def family_of(binary: str) -> Family:
    out = subprocess.run([binary, "-v"], capture_output=True, text=True, check=True).stdout
    return family(family_for_version(out.split()[2]))


@cache
def features_of(binary: str) -> frozenset[str]:
    return frozenset(features(binary))


SCHEMA_EXPECT = {
    "clean": set(),
    "warn": {"W3003", "W3008"},
    "alert": {"E3002", "E3007"},
}


def schema_agrees(fam: Family, cases: list[Case], text: str) -> list[str]:
    """The schema stage must reach haproxy's verdict on the very same lines."""
    parsed = parse_cfg(text, "t.cfg")
    by_line: dict[int, set[str]] = {}
    for d in SchemaEngine(fam.name).diagnostics(parsed, "t.cfg"):
        if d.location and d.location.line and d.severity.value != "info":
            by_line.setdefault(d.location.line, set()).add(d.rule_id)
    bad = []
    for case in cases:
        got = by_line.get(case.lineno, set())
        want = SCHEMA_EXPECT[case.expect]
        if (not want and got) or (want and not got & want) or (want and got - want - {"W3008"}):
            bad.append(
                f"schema: {case.what} in {case.kind}: expected {sorted(want)}, got {sorted(got)}"
            )
    return bad


def check_cases(
    binary: str, cases: list[Case], tmp_path: Path, *, chunk: int = 10_000, strict: bool = True
) -> None:
    """``strict``: nothing may fail, not even the checks haproxy runs after parsing (used for
    the "allowed" examples, which must form a valid configuration)."""
    assert cases
    bad: list[str] = []
    for part in chunks(cases, chunk):
        text = render_cases(part)
        outcome = run_haproxy(binary, text, tmp_path)
        bad += mismatches(part, outcome)
        bad += schema_agrees(family_of(binary), part, text)
        lines = {c.lineno for c in part}
        stray = [n for n, levels in outcome.by_line.items() if "ALERT" in levels and n not in lines]
        if stray or (strict and outcome.rc not in (0, 2)):
            alerts = [ln for ln in outcome.output.splitlines() if "ALERT" in ln]
            bad.append(f"haproxy exited {outcome.rc}: " + "\n".join(alerts[:20]))
    assert not bad, "\n".join(bad)


def check_alerts(binary: str, cases: list[Case], tmp_path: Path, *, schema: bool = True) -> int:
    """Cases that must all be refused. Some refusals make haproxy stop reading the file, so
    cases after the last reported line are run again until each has been seen; returns the
    number of haproxy runs this took."""
    pending = list(cases)
    bad: list[str] = []
    runs = 0
    while pending:
        runs += 1
        text = render_cases(pending)
        outcome = run_haproxy(binary, text, tmp_path)
        reported = [c for c in pending if outcome.levels(c.lineno)]
        last = max((c.lineno for c in reported), default=0)
        judged = [c for c in pending if c.lineno <= last] or pending[:1]
        bad += mismatches(judged, outcome)
        if schema:
            bad += schema_agrees(family_of(binary), judged, text)
        pending = [c for c in pending if c not in judged]
    assert not bad, "\n".join(bad)
    return runs
