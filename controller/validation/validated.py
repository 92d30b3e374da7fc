"""A file set that passed the pipeline. Only ``Pipeline`` can make one.

Deploy targets accept nothing else, so "only validated bytes deploy" is enforced by the type
checker and, at run time, by a construction token private to the pipeline. The object is
frozen and holds its own copy of the file set, so nothing done to the render's file set (or
to this object) after the verdict can make it vouch for other bytes; a target re-hashes it
with :meth:`ValidatedFileSet.verify` right before writing.

A verdict only vouches for a deploy when the stages that make a candidate safe and real ran:
the syntax stage (directive policy, file references) and ``haproxy -c``. A pipeline built
without them — tests do that to exercise the runtime without HAProxy — must say so with
``allow_partial=True``; otherwise it hands out no ValidatedFileSet at all.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NoReturn

from controller.diagnostics import Phase, make
from controller.render import FileSet

if TYPE_CHECKING:
    from controller.validation.report import ValidationReport

__all__ = ["REQUIRED_PHASES", "ValidatedFileSet", "missing_phases", "undeployable"]

_TOKEN = object()

REQUIRED_PHASES: tuple[Phase, ...] = (Phase.SYNTAX, Phase.HAPROXY)
"""Stages a verdict must include before its file set may be deployed."""


def missing_phases(report: ValidationReport) -> list[Phase]:
    """The required stages that did not produce ``report``."""
    ran = set(report.metadata.stages_run)
    return [p for p in REQUIRED_PHASES if p not in ran]


def undeployable(report: ValidationReport, missing: list[Phase]) -> ValidationReport:
    """``report`` turned into a refusal: its pipeline lacks stages a deploy depends on."""
    from controller.validation.report import Counts, ReportStatus

    diag = make(
        "E7011",
        Phase.PIPELINE,
        "this pipeline did not run the "
        + " and ".join(p.value for p in missing)
        + " stage(s), so its verdict cannot vouch for a deployable file set",
    )
    diagnostics = [*report.diagnostics, diag]
    metadata = report.metadata.model_copy(update={"counts": Counts.of(diagnostics)})
    return report.model_copy(
        update={
            "valid": False,
            "status": ReportStatus.ERROR,
            "diagnostics": diagnostics,
            "metadata": metadata,
        }
    )


def _digest(files: FileSet) -> str:
    """The checksum of ``files`` computed afresh, ignoring any cached value."""
    return FileSet({e.path: e for e in files}).checksum


class ValidatedFileSet:
    __slots__ = ("files", "fingerprint", "partial", "report")

    files: FileSet
    report: ValidationReport
    fingerprint: str
    partial: bool
    """Issued by a pipeline built with ``allow_partial=True`` (tests only)."""

    def __init__(
        self,
        files: FileSet,
        report: ValidationReport,
        fingerprint: str,
        *,
        _token: object,
        partial: bool = False,
    ) -> None:
        if _token is not _TOKEN:
            raise TypeError("ValidatedFileSet is created only by Pipeline.validate")
        if not report.valid:
            raise ValueError("an invalid report cannot vouch for a file set")
        missing = missing_phases(report)
        if missing and not partial:
            raise ValueError(
                "a report without the " + ", ".join(p.value for p in missing) + " stage(s) "
                "cannot vouch for a deployable file set"
            )
        own = FileSet({e.path: e for e in files})  # a private copy nobody else can reach
        if own.checksum != report.metadata.checksum:
            raise ValueError("the report was made for other bytes than this file set")
        set_ = object.__setattr__
        set_(self, "files", own)
        set_(self, "report", report)
        set_(self, "fingerprint", fingerprint)
        set_(self, "partial", partial)

    def __setattr__(self, name: str, value: Any) -> NoReturn:
        raise AttributeError(f"ValidatedFileSet is immutable; cannot set {name!r}")

    def __delattr__(self, name: str) -> NoReturn:
        raise AttributeError(f"ValidatedFileSet is immutable; cannot delete {name!r}")

    def __reduce__(self) -> NoReturn:
        # A copy would be a ValidatedFileSet made without the pipeline.
        raise TypeError("a ValidatedFileSet cannot be copied or pickled")

    @property
    def checksum(self) -> str:
        return self.files.checksum

    def verify(self) -> bool:
        """Whether the bytes held now still hash to the checksum the verdict was given for.

        The constructor already made sure they did; deploy targets ask again right before
        writing, so even a file set altered behind the type system's back never deploys.
        """
        checksum = self.report.metadata.checksum
        return checksum is not None and self.checksum == checksum == _digest(self.files)


def _issue(
    files: FileSet, report: ValidationReport, fingerprint: str, *, partial: bool = False
) -> ValidatedFileSet:
    """The pipeline's private constructor."""
    return ValidatedFileSet(files, report, fingerprint, _token=_TOKEN, partial=partial)
