"""The parsed form of a HAProxy configuration, with exact spans.

Produced by the syntax stage, consumed by the policy check, the file-reference check and the
schema stage. Columns are 1-based; ``end_column`` is inclusive.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Token:
    """One word after HAProxy's quoting and escaping rules were applied."""

    value: str
    """The word as HAProxy sees it (quotes removed, escapes resolved)."""
    raw: str
    """The word as written."""
    column: int
    end_column: int
    has_env: bool = False
    """True when the word contains a ``${VAR}`` (or ``$VAR``) expansion HAProxy would perform."""


@dataclass(frozen=True, slots=True)
class Directive:
    """One configuration line: a keyword and its arguments."""

    file: str
    line: int
    tokens: tuple[Token, ...]
    conditional: bool = False
    """True inside a ``.if`` branch whose condition could not be decided without running
    HAProxy (``defined()``, ``feature()``, an unknown version, ...). HAProxy may skip such a
    line, so a later stage must not fail the configuration on something that is wrong only if
    the line is active; security checks (policy, file references) still apply to it."""

    @property
    def keyword(self) -> str:
        return self.tokens[0].value

    @property
    def args(self) -> tuple[str, ...]:
        return tuple(t.value for t in self.tokens[1:])

    @property
    def column(self) -> int:
        return self.tokens[0].column

    @property
    def end_column(self) -> int:
        return self.tokens[-1].end_column


@dataclass(frozen=True, slots=True)
class Section:
    """A section header (``global``, ``defaults [name]``, ``frontend fe``, ...) and its body."""

    header: Directive
    directives: tuple[Directive, ...]
    end_line: int
    text_hash: str = ""
    """sha256 of the section's source text; keys per-section caches of later stages."""

    @property
    def keyword(self) -> str:
        return self.header.keyword

    @property
    def name(self) -> str | None:
        args = self.header.args
        return args[0] if args else None

    @property
    def line(self) -> int:
        return self.header.line


@dataclass(frozen=True, slots=True)
class ParsedConfig:
    file: str
    sections: tuple[Section, ...]
    macros: tuple[Directive, ...] = ()
    """The ``.if``/``.elif``/``.else``/``.endif`` and ``.diag``/``.notice``/``.warning``/
    ``.alert`` lines, in file order. They belong to no section but HAProxy still expands
    ``"${VAR}"`` in them, so the directive policy reads them too."""

    def directives(self) -> Iterator[tuple[Section, Directive]]:
        """Every section header and body directive, in file order."""
        for section in self.sections:
            yield section, section.header
            for directive in section.directives:
                yield section, directive
