"""Text format: rendered line, caret under the span, template location, fix hint, summary."""

from __future__ import annotations

import asyncio

from controller.diagnostics import Phase
from controller.validation import Pipeline, ValidationOptions, format_report
from tests.validation.formats.formats_kit import (
    CFG,
    Says,
    finding,
    report_with,
    sample_render,
    typical,
)


def block_of(text: str, rule: str) -> list[str]:
    lines = text.splitlines()
    start = next(i for i, ln in enumerate(lines) if f" {rule} " in ln)
    end = next((i for i in range(start + 1, len(lines)) if not lines[i].strip()), len(lines))
    return lines[start:end]


def test_caret_sits_under_the_span() -> None:
    report, render = typical()
    block = block_of(format_report(report, "text", render=render), "E4001")
    assert block[0] == "haproxy.cfg:5:29: error E4001 [haproxy] unable to load certs/site.pem"
    src, caret = block[1], block[2]
    assert src.endswith(CFG.splitlines()[4])
    text_start = src.index("| ") + 2
    marks = [i - text_start + 1 for i, c in enumerate(caret) if c == "^"]
    assert marks == [29, 30, 31]  # columns 29..31 inclusive
    assert src[text_start + 28 : text_start + 31] == "crt"
    assert "      template: haproxy.cfg:24" in block


def test_tabs_keep_the_caret_aligned() -> None:
    report, render = typical()
    block = block_of(format_report(report, "text", render=render), "W3001")
    src, caret = block[1], block[2]
    assert "\tmaxconn 100" in src
    # The caret line copies the tab, so it lines up however wide the terminal draws tabs.
    assert caret.split("| ", 1)[1] == "\t^^^^^^^"
    assert "      fix: move it" in block
    assert "      object: Ingress default/echo" in block


def test_certificate_lines_are_never_quoted() -> None:
    report, render = typical()
    text = format_report(report, "text", render=render)
    assert "SECRET" not in text
    assert "certs/site.pem:2:1: error E4002 [haproxy] bad key" in text


def test_without_render_there_is_no_context_line() -> None:
    report, _ = typical()
    block = block_of(format_report(report, "text"), "E4001")
    assert not any("|" in ln for ln in block)
    assert "      template: haproxy.cfg:24" in block


def test_summary_line() -> None:
    report, render = typical()
    last = format_report(report, "text", render=render).rstrip("\n").splitlines()[-1]
    assert last.startswith("INVALID: 2 errors, 1 warning, 1 info")
    assert "ran syntax, schema, haproxy" in last and "skipped external" in last
    assert report.metadata.checksum is not None
    assert "haproxy 2.8.25" in last and report.metadata.checksum[:12] in last
    ok = report_with(Says(Phase.SYNTAX))
    assert format_report(ok, "text").startswith("valid: 0 errors, 0 warnings, 0 infos")


def test_strict_promotion_is_visible() -> None:
    render = sample_render()
    p = Pipeline(
        [Says(Phase.SCHEMA, [finding("W3001", Phase.SCHEMA, line=2)])],
        haproxy_version=None,
        cache=None,
    )
    report = asyncio.run(p.validate(render, options=ValidationOptions(strict=True)))
    assert "error (strict, was warning) W3001" in format_report(report, "text", render=render)


def test_out_of_range_line_and_missing_column_do_not_crash() -> None:
    report = report_with(
        Says(
            Phase.SCHEMA,
            [finding("W3001", Phase.SCHEMA, line=999), finding("W3002", Phase.SCHEMA, line=2)],
        )
    )
    text = format_report(report, "text", render=sample_render())
    assert "haproxy.cfg:999: warning W3001" in text
    w2 = block_of(text, "W3002")
    assert len([ln for ln in w2 if "|" in ln]) == 1  # the line, but no caret without a column
