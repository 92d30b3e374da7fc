"""A file set that passed the pipeline. Only ``Pipeline`` can make one.

Deploy targets accept nothing else, so "only validated bytes deploy" is enforced by the type
checker and, at run time, by a construction token private to the pipeline.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from controller.render import FileSet

if TYPE_CHECKING:
    from controller.validation.report import ValidationReport

_TOKEN = object()


class ValidatedFileSet:
    __slots__ = ("files", "fingerprint", "report")

    files: FileSet
    report: ValidationReport
    fingerprint: str

    def __init__(
        self, files: FileSet, report: ValidationReport, fingerprint: str, *, _token: object
    ) -> None:
        if _token is not _TOKEN:
            raise TypeError("ValidatedFileSet is created only by Pipeline.validate")
        if not report.valid:
            raise ValueError("an invalid report cannot vouch for a file set")
        self.files = files
        self.report = report
        self.fingerprint = fingerprint

    @property
    def checksum(self) -> str:
        return self.files.checksum


def _issue(files: FileSet, report: ValidationReport, fingerprint: str) -> ValidatedFileSet:
    """The pipeline's private constructor."""
    return ValidatedFileSet(files, report, fingerprint, _token=_TOKEN)
