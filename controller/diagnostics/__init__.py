"""Diagnostics and the rule registry.

They sit below every other layer because every layer reports problems: the renderer, the
pipeline stages, the deploy targets and the adapters all speak this one vocabulary, and the
pipeline's report (``controller.validation.report``) is built from it.
"""

from controller.diagnostics.ids import RuleId
from controller.diagnostics.model import (
    Diagnostic,
    Location,
    ObjectRef,
    Occurrences,
    Phase,
    Severity,
    TemplateLocation,
)
from controller.diagnostics.rules import (
    RULES,
    Rule,
    UnknownRuleError,
    configure_docs_url,
    documentation_url,
    make,
    rule,
)

__all__ = [
    "RULES",
    "Diagnostic",
    "Location",
    "ObjectRef",
    "Occurrences",
    "Phase",
    "Rule",
    "RuleId",
    "Severity",
    "TemplateLocation",
    "UnknownRuleError",
    "configure_docs_url",
    "documentation_url",
    "make",
    "rule",
]
