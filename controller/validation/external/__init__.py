"""Stage ``external``: operator-supplied validators (commands and HTTP endpoints)."""

from controller.validation.external.contract import Finding, manifest, parse_findings, payload
from controller.validation.external.stage import ExternalStage

__all__ = ["ExternalStage", "Finding", "manifest", "parse_findings", "payload"]
