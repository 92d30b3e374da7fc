"""The data shape of one finding.

A diagnostic is data, not an exception: the renderer, every pipeline stage and every adapter
return these so that a caller can filter, sort, cache and format them without parsing text.
The wire form is camelCase so that JSON, SARIF and Kubernetes status share field names.
"""

from __future__ import annotations

import re
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, field_validator
from pydantic.alias_generators import to_camel

from controller.observability import escape_char


class Severity(StrEnum):
    """Ordered from most to least severe; the order drives the severity gate."""

    FATAL = "fatal"
    ERROR = "error"
    WARNING = "warning"
    INFO = "info"

    @property
    def rank(self) -> int:
        """Lower is more severe."""
        return _RANK[self]

    @classmethod
    def from_prefix(cls, rule_id: str) -> Severity:
        """A rule id's first letter is its severity: F, E, W or I."""
        try:
            return _PREFIX[rule_id[:1]]
        except KeyError:
            raise ValueError(f"rule id {rule_id!r} must start with F, E, W or I") from None


_RANK = {Severity.FATAL: 0, Severity.ERROR: 1, Severity.WARNING: 2, Severity.INFO: 3}
_PREFIX = {"F": Severity.FATAL, "E": Severity.ERROR, "W": Severity.WARNING, "I": Severity.INFO}


class Phase(StrEnum):
    """Where a finding was made; pipeline stages plus the places around them."""

    SPEC = "spec"
    LINT = "lint"
    RENDER = "render"
    SYNTAX = "syntax"
    SCHEMA = "schema"
    HAPROXY = "haproxy"
    RULES = "rules"
    EXTERNAL = "external"
    DEPLOY = "deploy"
    PIPELINE = "pipeline"
    """The pipeline's own bookkeeping (missing main config, internal errors outside a stage)."""


_SURROGATE = re.compile("[\ud800-\udfff]")


def encodable(text: str) -> str:
    """``text`` with lone surrogates written as ``\\xNN`` (or ``\\uNNNN``).

    Configurations are decoded with ``surrogateescape`` so that no byte is lost, and their
    words end up in messages and locations. A lone surrogate cannot be encoded as UTF-8, so
    one stray Latin-1 byte would make the whole report unserializable; escaping it keeps the
    report valid and still shows which byte it was.
    """
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATE.sub(lambda m: escape_char(m.group()), text)
    return text


class _Wire(BaseModel):
    model_config = ConfigDict(
        frozen=True, extra="forbid", alias_generator=to_camel, populate_by_name=True
    )

    @field_validator("*", mode="after")
    @classmethod
    def _encodable(cls, value: object) -> object:
        # Every text field, so that no producer (message, file name, template name) can make a
        # finding that fails to serialize.
        return encodable(value) if isinstance(value, str) else value


class Location(_Wire):
    """A span in a rendered file (1-based lines and columns; end is inclusive)."""

    file: str
    line: int | None = None
    column: int | None = None
    end_line: int | None = None
    end_column: int | None = None


class TemplateLocation(_Wire):
    """Where in the template sources a rendered line came from."""

    template: str
    line: int | None = None
    file: str | None = None
    """The file the template is written in (``config.yaml``), when the command read one."""
    file_line: int | None = None
    """The line of ``file`` that holds template line ``line`` (exact for a literal block
    scalar, ``template: |``; the key's line for any other YAML style)."""


class ObjectRef(_Wire):
    """The Kubernetes object a finding is about, when one is known."""

    api_version: str | None = None
    kind: str | None = None
    namespace: str | None = None
    name: str | None = None


class Occurrences(_Wire):
    """The rendered lines one finding stands for: a template line inside a loop renders many
    lines, and the same mistake on each of them is one cause, reported once."""

    count: int
    """How many rendered lines carry the finding (the diagnostic's own location included)."""
    locations: list[Location]
    """The first few of them, in file order; the first is the diagnostic's ``location``."""


class Diagnostic(_Wire):
    """One finding. Build it with :func:`controller.diagnostics.make` so the id is checked."""

    rule_id: str
    severity: Severity
    phase: Phase
    message: str
    location: Location | None = None
    template_location: TemplateLocation | None = None
    object: ObjectRef | None = None
    suggested_fix: str | None = None
    documentation_url: str | None = None
    occurrences: Occurrences | None = None
    """Set when this finding stands for several rendered lines (see :class:`Occurrences`)."""

    def sort_key(self) -> tuple[int, str, int, int, str, str]:
        """Deterministic order: severity, file, line, column, rule, message."""
        loc = self.location
        return (
            self.severity.rank,
            loc.file if loc else "",
            (loc.line or 0) if loc else 0,
            (loc.column or 0) if loc else 0,
            self.rule_id,
            self.message,
        )
