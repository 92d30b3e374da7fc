"""The human format: what a person at a terminal needs to fix the problem.

Each finding shows the rendered line with a caret under the offending span (the rendered
config is what HAProxy saw), the template line that produced it (where the fix goes), and the
registry's fix hint. Lines of certificate files are never shown: they may hold key material.
A finding that stands for many rendered lines (a template line in a loop) names how many and
the first few; the stages that did not run are one line, not one finding each.
"""

from __future__ import annotations

from controller.diagnostics import Diagnostic, Severity, TemplateLocation
from controller.observability import escape_controls
from controller.render import FileKind, RenderResult
from controller.validation.report import ValidationReport

__all__ = ["format_text", "template_where"]

_MAX_LINE = 200


def _source_line(render: RenderResult | None, path: str, line: int) -> str | None:
    if render is None:
        return None
    entry = render.files.get(path)
    if entry is None or entry.kind is FileKind.CERT:
        return None
    # Lines end at "\n" only, as HAProxy reads them (a form feed or a lone "\r" does not end
    # one), and a byte that is not UTF-8 stays one character, as the parser counts columns.
    lines = entry.content.decode("utf-8", "surrogateescape").split("\n")
    if not 1 <= line <= len(lines):
        return None
    text = lines[line - 1]
    return text[:-1] if text.endswith("\r") else text


def printable(text: str) -> str:
    """``text`` safe to print on a terminal. Tabs are kept so that carets under a quoted line
    line up in any terminal; every other control is written ``\\xNN``, never by short name."""
    return escape_controls(text, keep="\t", named=False)


def _width(c: str) -> int:
    """How many columns one character takes once :func:`printable` has escaped it."""
    return len(printable(c))


def _caret(text: str, column: int, end_column: int | None) -> str:
    """Carets under columns ``column..end_column`` (1-based, inclusive) of ``text`` as
    :func:`printable` shows it: tabs kept so the carets line up in any terminal, and as many
    carets or blanks per character as it is wide once escaped."""
    start = max(column, 1)
    end = max(end_column or start, start)
    end = min(end, max(len(text), start))
    pad = "".join("\t" if c == "\t" else " " * _width(c) for c in text[: start - 1])
    span = text[start - 1 : end]
    width = sum(_width(c) for c in span) + (end - start + 1 - len(span))
    return pad + "^" * width


def _where(d: Diagnostic) -> str:
    loc = d.location
    if loc is None:
        return ""
    out = loc.file
    if loc.line is not None:
        out += f":{loc.line}"
        if loc.column is not None:
            out += f":{loc.column}"
    return out + ": "


def _label(d: Diagnostic) -> str:
    declared = Severity.from_prefix(d.rule_id)
    if d.severity is not declared:
        return f"{d.severity.value} (strict, was {declared.value})"
    return d.severity.value


def _diagnostic(d: Diagnostic, render: RenderResult | None) -> list[str]:
    # Messages quote configuration words and HAProxy's output; template and object names come
    # from resources: none of it may reach the terminal as control characters.
    out = [printable(f"{_where(d)}{_label(d)} {d.rule_id} [{d.phase.value}] {d.message}")]
    loc = d.location
    if loc is not None and loc.line is not None:
        text = _source_line(render, loc.file, loc.line)
        if text is not None:
            more = "…" if len(text) > _MAX_LINE else ""
            text = text[:_MAX_LINE]
            gutter = f"{loc.line:>5} | "
            out.append(gutter + printable(text) + more)
            if loc.column is not None:
                out.append(
                    " " * (len(gutter) - 2) + "| " + _caret(text, loc.column, loc.end_column)
                )
    if d.occurrences is not None and d.occurrences.count > 1:
        out.append(printable("      " + _occurrences(d)))
    if d.template_location is not None:
        t = d.template_location
        out.append(printable(f"      template: {template_where(t)}"))
    if d.object is not None:
        o = d.object
        name = "/".join(p for p in (o.namespace, o.name) if p)
        out.append(printable(f"      object: {o.kind or '?'} {name}".rstrip()))
    if d.suggested_fix:
        out.append(printable(f"      fix: {d.suggested_fix}"))
    return out


def _occurrences(d: Diagnostic) -> str:
    """``and 1999 more rendered lines like it: haproxy.cfg:36, 44, 52, …``"""
    occ = d.occurrences
    assert occ is not None
    own = (d.location.file, d.location.line) if d.location is not None else None
    others = [x for x in occ.locations if (x.file, x.line) != own]
    parts: list[str] = []
    last_file = None
    for x in others:
        if x.line is None:
            parts.append(x.file)
        else:
            parts.append(f"{x.file}:{x.line}" if x.file != last_file else str(x.line))
        last_file = x.file
    more = ", …" if occ.count - 1 > len(others) else ""
    n = occ.count - 1
    lines = _plural(n, "more rendered line") if any(x.line for x in occ.locations) else f"{n} more"
    return f"and {lines} like it: {', '.join(parts)}{more}"


_SKIPPED = "I0003"
_SKIPPED_PREFIX = "did not run: "


def _skipped_line(skipped: list[Diagnostic]) -> str:
    """The stages that did not run, as one line: ``not run: haproxy, rules (schema failed)``."""
    by_reason: dict[str, list[str]] = {}
    for d in skipped:
        _, _, reason = d.message.partition(_SKIPPED_PREFIX)
        by_reason.setdefault(reason or d.message, []).append(d.phase.value)
    parts = [f"{', '.join(phases)} ({reason})" for reason, phases in by_reason.items()]
    return "not run: " + "; ".join(parts)


def template_where(t: TemplateLocation) -> str:
    """``haproxy.cfg:53, in config.yaml:600``: the template line, and the file line that
    holds it when the command read the config from a file."""
    out = t.template + (f":{t.line}" if t.line else "")
    if t.file:
        out += f", in {t.file}" + (f":{t.file_line}" if t.file_line else "")
    return out


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def _summary(report: ValidationReport) -> str:
    m = report.metadata
    c = m.counts
    verdict = "valid" if report.valid else "INVALID"
    if report.status.value == "analysis_incomplete":
        verdict = "INVALID (analysis incomplete)"
    parts = [
        verdict + ":",
        _plural(c.fatal + c.error, "error") + ",",
        _plural(c.warning, "warning") + ",",
        _plural(c.info, "info"),
    ]
    if m.suppressed:
        parts.append(f"({m.suppressed} suppressed)")
    tail = []
    if m.stages_run:
        tail.append("ran " + ", ".join(p.value for p in m.stages_run))
    if m.stages_skipped:
        tail.append("skipped " + ", ".join(p.value for p in m.stages_skipped))
    if m.cache_hit:
        tail.append("cached verdict")
    if m.haproxy_version:
        tail.append(f"haproxy {m.haproxy_version}")
    if m.checksum:
        tail.append(f"checksum {m.checksum[:12]}")
    total = report.timings.get("totalMs")
    if total is not None:
        tail.append(f"{total:.1f} ms")
    line = " ".join(parts)
    return line + (" — " + "; ".join(tail) if tail else "")


def format_text(report: ValidationReport, render: RenderResult | None = None) -> str:
    out: list[str] = []
    skipped = [d for d in report.diagnostics if d.rule_id == _SKIPPED]
    for d in report.diagnostics:
        if d.rule_id == _SKIPPED:
            continue
        out.extend(_diagnostic(d, render))
        out.append("")
    if skipped:
        out.append(printable(_skipped_line(skipped)))
    for b in report.metadata.budget_exhaustions:
        used = f", used {b.used:g}" if b.used is not None else ""
        out.append(f"budget exhausted: {b.phase.value} {b.budget} (limit {b.limit:g}{used})")
    out.append(printable(_summary(report)))
    return "\n".join(out) + "\n"
