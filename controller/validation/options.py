"""Per-call knobs of the pipeline: strictness, rule filters and the severity gate.

The defaults come from ``spec.validation`` (:meth:`ValidationOptions.from_settings`); a caller
such as ``htc validate --strict`` overrides them for one call. Options are part of the verdict
cache key, because strictness and filters decide validity: the same bytes can be valid under
one set of options and invalid under another.

Filters are parsed when the options are built, so a typo in a filter fails loudly at
construction instead of silently matching nothing.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field

from controller.diagnostics import Diagnostic, Phase, Severity
from controller.spec import ValidationSettings

__all__ = [
    "InvalidFilterError",
    "InvalidOptionError",
    "RuleMatcher",
    "ValidationOptions",
    "parse_matcher",
]

_ID = re.compile(r"^([FEWI])(\d{4})$")
_RANGE = re.compile(r"^([FEWI]?)(\d{4})-([FEWI]?)(\d{4})$")


class InvalidOptionError(ValueError):
    """An option value the pipeline cannot honour (bad severity level, bad filter)."""


class InvalidFilterError(InvalidOptionError):
    """A rule filter that is neither an id, an id range nor ``phase:<name>``."""


@dataclass(frozen=True, slots=True)
class RuleMatcher:
    """One parsed filter term.

    ``E3001`` matches that id; ``E3000-E3099`` matches E-ids in the numeric range (a range
    written without letters, ``3000-3099``, matches every severity); ``phase:schema`` matches
    every diagnostic of that phase.
    """

    text: str
    letter: str | None = None
    low: int = 0
    high: int = 0
    phase: Phase | None = None

    def matches(self, d: Diagnostic) -> bool:
        if self.phase is not None:
            return d.phase is self.phase
        if self.letter and d.rule_id[:1] != self.letter:
            return False
        try:
            number = int(d.rule_id[1:])
        except ValueError:
            return False
        return self.low <= number <= self.high


def parse_matcher(text: str) -> RuleMatcher:
    term = text.strip()
    if term.lower().startswith("phase:"):
        name = term.split(":", 1)[1].strip().lower()
        try:
            return RuleMatcher(term, phase=Phase(name))
        except ValueError:
            known = ", ".join(p.value for p in Phase)
            raise InvalidFilterError(
                f"unknown phase {name!r} in filter {text!r}; known phases: {known}"
            ) from None
    m = _ID.match(term)
    if m:
        n = int(m.group(2))
        return RuleMatcher(term, letter=m.group(1), low=n, high=n)
    m = _RANGE.match(term)
    if m:
        first, low, second, high = m.group(1), int(m.group(2)), m.group(3), int(m.group(4))
        if first != second:
            raise InvalidFilterError(
                f"range {text!r} mixes severities; write both ends with the same letter"
            )
        if low > high:
            raise InvalidFilterError(f"range {text!r} is empty (start above end)")
        return RuleMatcher(term, letter=first or None, low=low, high=high)
    raise InvalidFilterError(
        f"invalid rule filter {text!r}: use an id (E3001), a range (E3000-E3099) "
        "or a phase (phase:schema)"
    )


def _severity(value: Severity | str) -> Severity:
    try:
        return Severity(str(value).lower())
    except ValueError:
        known = ", ".join(s.value for s in Severity)
        raise InvalidOptionError(f"unknown severity level {value!r}; use one of {known}") from None


@dataclass(frozen=True)
class ValidationOptions:
    severity_level: Severity = Severity.INFO
    """Lowest severity kept in the report; anything below is suppressed."""
    strict: bool = False
    """Promote warnings to errors (they keep their W-id; see docs/report.md)."""
    include: tuple[str, ...] = ()
    """When non-empty, only diagnostics matching one of these terms are kept."""
    exclude: tuple[str, ...] = ()
    """Diagnostics matching one of these terms are removed."""
    disable_builtin_rules: bool = False
    """Remove the findings of our own reading of HAProxy's rules (phases ``syntax`` and
    ``schema``) that a filter may remove, leaving HAProxy's own verdict, the spec's CEL rules
    and the external validators to judge (see docs/report.md)."""
    _include: tuple[RuleMatcher, ...] = field(init=False, repr=False, compare=False)
    _exclude: tuple[RuleMatcher, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "severity_level", _severity(self.severity_level))
        object.__setattr__(self, "include", tuple(self.include))
        object.__setattr__(self, "exclude", tuple(self.exclude))
        object.__setattr__(self, "_include", tuple(parse_matcher(t) for t in self.include))
        object.__setattr__(self, "_exclude", tuple(parse_matcher(t) for t in self.exclude))

    @classmethod
    def from_settings(cls, settings: ValidationSettings) -> ValidationOptions:
        return cls(
            severity_level=Severity(settings.severity_level.value),
            strict=settings.strict,
            include=tuple(settings.filters.include),
            exclude=tuple(settings.filters.exclude),
            disable_builtin_rules=settings.disable_builtin_rules,
        )

    def replace(self, **changes: object) -> ValidationOptions:
        """A copy with some fields changed (``None`` values leave a field as it is)."""
        kept = {k: v for k, v in changes.items() if v is not None}
        return dataclasses.replace(self, **kept)  # type: ignore[arg-type]

    def included(self, d: Diagnostic) -> bool:
        return not self._include or any(m.matches(d) for m in self._include)

    def excluded(self, d: Diagnostic) -> bool:
        return any(m.matches(d) for m in self._exclude)

    def key(self) -> str:
        """Stable text of every field; part of the verdict cache key."""
        return "|".join(
            (
                self.severity_level.value,
                "strict" if self.strict else "lenient",
                ",".join(sorted(self.include)),
                ",".join(sorted(self.exclude)),
                "no-builtin" if self.disable_builtin_rules else "builtin",
            )
        )
