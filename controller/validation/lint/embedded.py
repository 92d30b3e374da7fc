"""Static checks of ``spec.tests``: what would make a test meaningless before it runs.

These are warnings, not errors: a broken test must not stop a working configuration from
deploying when lint runs in reconcile (and, later, in admission). ``htc test`` fails such a
test anyway.
"""

from __future__ import annotations

import re
from collections.abc import Collection

from controller.diagnostics import RULES, Diagnostic, Phase, RuleId, make
from controller.spec import AssertionType, EmbeddedTest, TestAssertion
from controller.validation.rules.compiled import Locator, PathKey

__all__ = ["assertion_problems", "lint_tests"]

_NEEDS_VALUE = frozenset(
    {
        AssertionType.CONTAINS,
        AssertionType.NOT_CONTAINS,
        AssertionType.EQUALS,
        AssertionType.MATCHES,
        AssertionType.MATCH_COUNT,
    }
)
_REGEX = frozenset({AssertionType.MATCHES, AssertionType.MATCH_COUNT})
_TARGETED = frozenset(
    {
        AssertionType.CONTAINS,
        AssertionType.NOT_CONTAINS,
        AssertionType.EQUALS,
        AssertionType.MATCHES,
        AssertionType.MATCH_COUNT,
        AssertionType.MATCH_ORDER,
        AssertionType.DETERMINISTIC,
    }
)


def assertion_problems(a: TestAssertion, outputs: Collection[str]) -> list[tuple[RuleId, str]]:
    """(rule id, message) for every reason ``a`` cannot be judged as written."""
    out: list[tuple[RuleId, str]] = []
    kind = a.type
    if kind in _TARGETED and a.target not in outputs:
        out.append(
            (
                "W8056",
                f"target {a.target!r} is not an output (defined: {', '.join(sorted(outputs))})",
            )
        )
    if kind in _NEEDS_VALUE and a.value is None:
        out.append(("W8057", f"{kind.value} needs a value"))
    if kind is AssertionType.MATCH_COUNT and a.count is None:
        out.append(("W8057", "matchCount needs a count"))
    if kind is AssertionType.MATCH_ORDER and len(a.patterns) < 2:
        out.append(("W8057", "matchOrder needs at least two patterns"))
    regexes = [a.value] if kind in _REGEX and a.value is not None else []
    if kind is AssertionType.MATCH_ORDER:
        regexes = list(a.patterns)
    for pattern in regexes:
        try:
            re.compile(pattern, re.MULTILINE)
        except re.error as exc:
            out.append(("W8057", f"invalid regular expression {pattern!r}: {exc}"))
    for rid in a.rule_ids:
        if rid not in RULES:
            out.append(("W8057", f"rule id {rid!r} is not registered"))
    return out


def lint_tests(
    tests: dict[str, EmbeddedTest],
    collections: Collection[str],
    outputs: Collection[str],
    locate: Locator | None,
) -> list[Diagnostic]:
    out: list[Diagnostic] = []

    def report(rule_id: RuleId, path: PathKey, message: str) -> None:
        where = locate(path) if locate is not None else None
        out.append(make(rule_id, Phase.LINT, f"test {path[2]}: {message}", location=where))

    for name, test in sorted(tests.items()):
        base: PathKey = ("spec", "tests", name)
        for coll in sorted(set(test.fixtures) - set(collections)):
            report(
                "W8055",
                (*base, "fixtures", coll),
                f"fixtures name {coll!r}, which is not a watched collection "
                f"(defined: {', '.join(sorted(collections)) or 'none'})",
            )
        for i, a in enumerate(test.assertions):
            for rule_id, message in assertion_problems(a, outputs):
                report(rule_id, (*base, "assertions", i), f"assertion {i + 1}: {message}")
    return out
