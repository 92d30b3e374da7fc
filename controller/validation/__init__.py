"""The validation layer: one pipeline every trigger path calls.

The public surface is small on purpose: build a :class:`Pipeline` (usually
:meth:`Pipeline.from_spec`), call :meth:`Pipeline.validate` or :meth:`Pipeline.check`, and
format the :class:`ValidationReport` with :func:`format_report`. Stages live in sub-packages
(``syntax``, ``schema``, ``haproxy``, ``rules``, ``external``) and are reached through the
pipeline; what other layers need of ``rules``, ``lint`` and ``testing`` is exported here too.

Those three load lazily, on first access of one of their names: the rules engine (CEL) takes
about a second to import, and ``htc validate`` on a config without rules, like every command
that only formats a report, should not pay for it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from controller.validation.cache import VerdictCache
from controller.validation.formats import FORMATS, format_report, sarif_log
from controller.validation.gcpause import paused_gc
from controller.validation.haproxy import HaproxyBinary, HaproxyBinaryError
from controller.validation.heap import fix_mmap_threshold, limit_arenas, trim_heap
from controller.validation.options import InvalidFilterError, InvalidOptionError, ValidationOptions
from controller.validation.pipeline import Pipeline, PipelineSetupError, Verdict
from controller.validation.report import (
    BudgetExhaustion,
    Counts,
    ReportMetadata,
    ReportStatus,
    ValidationReport,
)
from controller.validation.service import (
    CheckerLike,
    Engine,
    EngineFactory,
    RendererLike,
    VerdictLike,
    checking_pipeline,
    cpu_slots,
    default_engine,
    evaluate,
    failure_report,
    ruled_renderer,
    spec_lint,
    verdict,
)
from controller.validation.stage import Stage, StageContext, StageOutcome
from controller.validation.validated import ValidatedFileSet

if TYPE_CHECKING:
    from controller.validation.lint import lint_report, lint_spec, spec_failure_report, spec_locator
    from controller.validation.lint.locations import Origin, config_origin, with_origins
    from controller.validation.rules import Locator, RuledRenderer, RuleSet
    from controller.validation.testing import (
        TEST_FORMATS,
        SuiteReport,
        TestRunner,
        format_suite,
        select_tests,
    )

_LAZY = {
    **dict.fromkeys(
        ("lint_report", "lint_spec", "spec_failure_report", "spec_locator"),
        "controller.validation.lint",
    ),
    **dict.fromkeys(
        ("Origin", "config_origin", "with_origins"), "controller.validation.lint.locations"
    ),
    **dict.fromkeys(("Locator", "RuleSet", "RuledRenderer"), "controller.validation.rules"),
    **dict.fromkeys(
        ("TEST_FORMATS", "SuiteReport", "TestRunner", "format_suite", "select_tests"),
        "controller.validation.testing",
    ),
}

__all__ = [
    "FORMATS",
    "TEST_FORMATS",
    "BudgetExhaustion",
    "CheckerLike",
    "Counts",
    "Engine",
    "EngineFactory",
    "HaproxyBinary",
    "HaproxyBinaryError",
    "InvalidFilterError",
    "InvalidOptionError",
    "Locator",
    "Origin",
    "Pipeline",
    "PipelineSetupError",
    "RendererLike",
    "ReportMetadata",
    "ReportStatus",
    "RuleSet",
    "RuledRenderer",
    "Stage",
    "StageContext",
    "StageOutcome",
    "SuiteReport",
    "TestRunner",
    "ValidatedFileSet",
    "ValidationOptions",
    "ValidationReport",
    "Verdict",
    "VerdictCache",
    "VerdictLike",
    "checking_pipeline",
    "config_origin",
    "cpu_slots",
    "default_engine",
    "evaluate",
    "failure_report",
    "fix_mmap_threshold",
    "format_report",
    "format_suite",
    "limit_arenas",
    "lint_report",
    "lint_spec",
    "paused_gc",
    "ruled_renderer",
    "sarif_log",
    "select_tests",
    "spec_failure_report",
    "spec_lint",
    "spec_locator",
    "trim_heap",
    "verdict",
    "with_origins",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
