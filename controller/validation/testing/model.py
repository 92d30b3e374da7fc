"""The result of ``htc test``: per test, per assertion, with the pipeline's own report.

A test's findings are ordinary :class:`Diagnostic` objects (``E8060`` for a failed
assertion, ``E8061`` for a test that could not run), and a test that validated carries the
full :class:`ValidationReport`, so tooling reading ``htc validate`` output reads this too.
A config that fails lint carries the lint report instead of test results: a suite must not
pass for a config the controller would refuse.
"""

from __future__ import annotations

from enum import StrEnum
from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from controller.diagnostics import Diagnostic
from controller.spec import AssertionType
from controller.validation.report import ValidationReport

__all__ = ["AssertionResult", "SuiteReport", "TestResult", "TestStatus"]


class _Wire(BaseModel):
    model_config = ConfigDict(
        frozen=True, extra="forbid", alias_generator=to_camel, populate_by_name=True
    )


class TestStatus(StrEnum):
    __test__ = False  # not a pytest test class
    PASSED = "passed"
    FAILED = "failed"
    ERROR = "error"
    """The test could not run (bad fixture, no pipeline)."""


class AssertionResult(_Wire):
    index: int
    """1-based position in the test's assertions."""
    type: AssertionType
    target: str
    passed: bool
    message: str | None = None
    """Why it failed."""
    diff: str | None = None
    """Unified diff for a failed equals or deterministic assertion."""
    description: str | None = None


class TestResult(_Wire):
    __test__: ClassVar[bool] = False

    name: str
    description: str | None = None
    status: TestStatus
    assertions: list[AssertionResult] = Field(default_factory=list)
    diagnostics: list[Diagnostic] = Field(default_factory=list)
    """E8060 per failed assertion, E8061 when the test could not run."""
    render_diagnostics: list[Diagnostic] = Field(default_factory=list)
    """What rendering reported (errors and warnings), for context."""
    report: ValidationReport | None = None
    """The pipeline's report, when an assertion needed it (valid, invalid)."""
    duration_ms: float = 0.0

    @property
    def passed(self) -> bool:
        return self.status is TestStatus.PASSED


class SuiteReport(_Wire):
    config: str
    """Name of the HAProxyTemplateConfig (its file when it did not load)."""
    passed: bool
    lint: ValidationReport | None = None
    """The lint report, present when the config did not load or lint found errors. The
    controller would refuse such a config, so its tests did not run and the suite fails."""
    tests: list[TestResult] = Field(default_factory=list)
    counts: dict[str, int] = Field(default_factory=dict)
    """total, passed, failed, error."""
    duration_ms: float = 0.0

    def to_json_dict(self) -> dict[str, object]:
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)
