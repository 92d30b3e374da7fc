"""JUnit XML: one test case per phase, failures carry the findings, parseable by xml.etree."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import xmlschema

from controller.diagnostics import Phase
from controller.validation import format_report
from controller.validation.report import BudgetExhaustion
from tests.validation.formats.formats_kit import Says, finding, report_with, typical

SCHEMA = xmlschema.XMLSchema(Path(__file__).resolve().parents[3] / "docs" / "report.junit.xsd")


def junit(report) -> str:  # type: ignore[no-untyped-def]
    """The JUnit text, checked against the documented schema on every use."""
    text = format_report(report, "junit")
    SCHEMA.validate(text)
    return text


def cases(report) -> dict[str, ET.Element]:  # type: ignore[no-untyped-def]
    root = ET.fromstring(junit(report))
    assert root.tag == "testsuites"
    suite = root.find("testsuite")
    assert suite is not None
    return {c.get("name", ""): c for c in suite.findall("testcase")}


def test_one_case_per_stage_with_failures_and_skips() -> None:
    report, _ = typical()
    root = ET.fromstring(junit(report))
    c = cases(report)
    assert list(c) == ["render", "syntax", "schema", "haproxy", "external"]
    failure = c["haproxy"].find("failure")
    assert failure is not None and failure.get("type") in {"E4001", "E4002"}
    assert "E4001" in (failure.text or "") and "E4002" in (failure.text or "")
    assert "template haproxy.cfg:24" in (failure.text or "")
    assert c["external"].find("skipped") is not None
    assert c["syntax"].find("failure") is None and c["syntax"].find("skipped") is None
    out = c["schema"].find("system-out")
    assert out is not None and "W3001" in (out.text or "")
    for el in (root, root[0]):
        assert (el.get("tests"), el.get("failures"), el.get("errors"), el.get("skipped")) == (
            "5",
            "1",
            "0",
            "1",
        )


def test_budget_and_crash_are_errors_not_failures() -> None:
    report = report_with(
        Says(Phase.SYNTAX),
        Says(
            Phase.HAPROXY, budget=BudgetExhaustion(phase=Phase.HAPROXY, budget="timeout", limit=2.0)
        ),
        Says(Phase.EXTERNAL),
    )
    c = cases(report)
    err = c["haproxy"].find("error")
    assert err is not None and err.get("type") == "analysis_incomplete"
    assert "E0002" in (err.text or "")


def test_all_green() -> None:
    c = cases(report_with(Says(Phase.SYNTAX), Says(Phase.SCHEMA)))
    assert list(c) == ["render", "syntax", "schema"]
    assert all(len(case) == 0 for case in c.values())


def test_markup_in_messages_is_escaped() -> None:
    hostile = finding("E3001", Phase.SCHEMA, msg='bad <value> & "quotes" ]]>')
    c = cases(report_with(Says(Phase.SCHEMA, [hostile])))
    failure = c["schema"].find("failure")
    assert failure is not None and 'bad <value> & "quotes" ]]>' in (failure.text or "")


def test_the_schema_can_fail() -> None:
    good = junit(report_with(Says(Phase.SYNTAX)))
    assert SCHEMA.is_valid(good)
    for broken in (
        good.replace('name="syntax"', 'name="nonsense"'),  # not a phase
        good.replace('tests="2"', 'tests="-1"'),
        good.replace("<testcase ", '<testcase unknown="x" ', 1),
    ):
        assert broken != good
        with pytest.raises(xmlschema.XMLSchemaValidationError):
            SCHEMA.validate(broken)
