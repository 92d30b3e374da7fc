"""Report formats: text for people, JSON for programs, SARIF for code scanning, JUnit for CI.

All four are views of the same :class:`ValidationReport`; none adds or drops findings.
"""

from __future__ import annotations

from typing import Literal, get_args

from controller.render import RenderResult
from controller.validation.formats.json_report import format_json, report_json_schema
from controller.validation.formats.junit import format_junit
from controller.validation.formats.sarif import format_sarif, sarif_log
from controller.validation.formats.text import format_text
from controller.validation.report import ValidationReport

__all__ = [
    "FORMATS",
    "Format",
    "format_report",
    "report_json_schema",
    "sarif_log",
]

Format = Literal["text", "json", "sarif", "junit"]
FORMATS: tuple[str, ...] = get_args(Format)


def format_report(
    report: ValidationReport, fmt: Format | str = "text", *, render: RenderResult | None = None
) -> str:
    """Render ``report`` in ``fmt``. ``render`` lets the text format quote rendered lines."""
    if fmt == "text":
        return format_text(report, render)
    if fmt == "json":
        return format_json(report)
    if fmt == "sarif":
        return format_sarif(report)
    if fmt == "junit":
        return format_junit(report)
    raise ValueError(f"unknown report format {fmt!r}; use one of {', '.join(FORMATS)}")
