"""The validation layer: one pipeline every trigger path calls.

The public surface is small on purpose: build a :class:`Pipeline` (usually
:meth:`Pipeline.from_spec`), call :meth:`Pipeline.validate` or :meth:`Pipeline.check`, and
format the :class:`ValidationReport` with :func:`format_report`. Stages live in sub-packages
(``syntax``, ``schema``, ``haproxy``, ``external``) and are reached through the pipeline.
"""

from controller.validation.cache import VerdictCache
from controller.validation.formats import FORMATS, format_report
from controller.validation.options import InvalidFilterError, InvalidOptionError, ValidationOptions
from controller.validation.pipeline import Pipeline, PipelineSetupError, Verdict
from controller.validation.report import (
    BudgetExhaustion,
    ReportMetadata,
    ReportStatus,
    ValidationReport,
)
from controller.validation.stage import Stage, StageContext, StageOutcome
from controller.validation.validated import ValidatedFileSet

__all__ = [
    "FORMATS",
    "BudgetExhaustion",
    "InvalidFilterError",
    "InvalidOptionError",
    "Pipeline",
    "PipelineSetupError",
    "ReportMetadata",
    "ReportStatus",
    "Stage",
    "StageContext",
    "StageOutcome",
    "ValidatedFileSet",
    "ValidationOptions",
    "ValidationReport",
    "Verdict",
    "VerdictCache",
    "format_report",
]
