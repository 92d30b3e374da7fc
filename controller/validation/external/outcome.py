"""What one validator run came to, before it is turned into diagnostics."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from controller.validation.external.contract import Finding

__all__ = ["RunOutcome", "Verdict"]


class Verdict(StrEnum):
    PASS = "pass"
    REJECT = "reject"
    """The validator judged the candidate invalid: always an error, whatever the policy."""
    FAILURE = "failure"
    """The validator could not judge (crash, unreachable, server error)."""
    TIMEOUT = "timeout"


@dataclass
class RunOutcome:
    verdict: Verdict
    detail: str = ""
    """Exit status, HTTP status, error text — already redacted."""
    findings: list[Finding] = field(default_factory=list)
    dropped: int = 0
    """Findings over the contract's cap that were not read."""
    garbage: str | None = None
    """Why the answer broke the contract, when it did."""
    workdir: str | None = None
    """Sandbox directory of a command run, for redacting the findings."""
