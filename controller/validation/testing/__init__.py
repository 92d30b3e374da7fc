"""Embedded template tests (``spec.tests``), run by ``htc test``; see docs/testing.md."""

from controller.validation.testing.assertions import Produced, judge_assertion
from controller.validation.testing.formats import TEST_FORMATS, format_suite
from controller.validation.testing.model import (
    AssertionResult,
    SuiteReport,
    TestResult,
    TestStatus,
)
from controller.validation.testing.runner import NoTestsSelected, TestRunner, select_tests

__all__ = [
    "TEST_FORMATS",
    "AssertionResult",
    "NoTestsSelected",
    "Produced",
    "SuiteReport",
    "TestResult",
    "TestRunner",
    "TestStatus",
    "format_suite",
    "judge_assertion",
    "select_tests",
]
