"""Finalization: strict → filters → severity gate → sort → dedupe, and what `suppressed` counts."""

from __future__ import annotations

import random

import pytest

from controller.diagnostics import Phase, Severity
from controller.spec.models import ValidationSettings
from controller.validation import InvalidFilterError, InvalidOptionError, ValidationOptions
from controller.validation.finalize import blocking, finalize, is_protected
from controller.validation.options import parse_matcher
from tests.validation.pipeline.pipeline_kit import at


def ids(diags) -> list[str]:  # type: ignore[no-untyped-def]
    return [d.rule_id for d in diags]


def test_strict_runs_before_filters_and_gate() -> None:
    w = at("W3001", Phase.SCHEMA)
    # Gate "error" would drop the warning, but strict has already made it an error.
    done = finalize([w], ValidationOptions(strict=True, severity_level=Severity.ERROR))
    assert ids(done.diagnostics) == ["W3001"]
    assert done.diagnostics[0].severity is Severity.ERROR
    # A filter still finds the promoted warning by its id.
    done = finalize([w], ValidationOptions(strict=True, exclude=("W3001",)))
    assert done.diagnostics == [] and done.suppressed == 1


def test_filters_by_id_range_and_phase() -> None:
    diags = [
        at("E3001", Phase.SCHEMA),
        at("E3150", Phase.SCHEMA),
        at("W3002", Phase.SCHEMA),
        at("W6001", Phase.EXTERNAL),
        at("I0003", Phase.EXTERNAL),
    ]
    assert ids(finalize(diags, ValidationOptions(exclude=("E3000-E3099",))).diagnostics) == [
        "E3150",
        "W3002",
        "W6001",
        "I0003",
    ]
    assert ids(finalize(diags, ValidationOptions(exclude=("3000-3099",))).diagnostics) == [
        "E3150",
        "W6001",
        "I0003",
    ]
    kept = finalize(diags, ValidationOptions(include=("phase:external",)))
    assert ids(kept.diagnostics) == ["W6001", "I0003"] and kept.suppressed == 3
    both = finalize(diags, ValidationOptions(include=("phase:schema",), exclude=("W3002",)))
    assert ids(both.diagnostics) == ["E3001", "E3150"]


def test_disable_builtin_rules_leaves_haproxy_rules_validators_and_protection() -> None:
    diags = [
        at("W2003", Phase.SYNTAX),
        at("E2101", Phase.SYNTAX),  # the directive policy: protected
        at("E3001", Phase.SCHEMA),
        at("W3002", Phase.SCHEMA),
        at("F0001", Phase.SCHEMA),  # fatal: protected
        at("W4001", Phase.HAPROXY),
        at("E5003", Phase.RULES),
        at("E6001", Phase.EXTERNAL),
    ]
    off = ValidationOptions(disable_builtin_rules=True)
    done = finalize(diags, off)
    assert sorted(ids(done.diagnostics)) == ["E2101", "E5003", "E6001", "F0001", "W4001"]
    assert done.suppressed == 3
    # A schema error then blocks nothing: haproxy -c and the later stages still judge.
    assert blocking([at("E3001", Phase.SCHEMA)], ValidationOptions())
    assert not blocking([at("E3001", Phase.SCHEMA)], off)
    assert blocking([at("E2101", Phase.SYNTAX)], off)
    assert off.key() != ValidationOptions().key()
    settings = ValidationSettings.model_validate({"disableBuiltinRules": True})
    assert ValidationOptions.from_settings(settings).disable_builtin_rules


def test_severity_gate_and_suppressed_count() -> None:
    diags = [at("E3001", Phase.SCHEMA), at("W3002", Phase.SCHEMA), at("I0003", Phase.HAPROXY)]
    assert finalize(diags, ValidationOptions(severity_level=Severity.INFO)).suppressed == 0
    warn = finalize(diags, ValidationOptions(severity_level=Severity.WARNING))
    assert ids(warn.diagnostics) == ["E3001", "W3002"] and warn.suppressed == 1
    # A severity's name is accepted too (settings and the CLI pass names).
    err = finalize(diags, ValidationOptions(severity_level="error"))  # type: ignore[arg-type]
    assert ids(err.diagnostics) == ["E3001"] and err.suppressed == 2
    # The gate never hides errors, even when asked for "fatal" only.
    fatal = ValidationOptions(severity_level="fatal")  # type: ignore[arg-type]
    assert ids(finalize(diags, fatal).diagnostics) == ["E3001"]


def test_sort_is_deterministic_and_severity_first() -> None:
    diags = [
        at("W3002", Phase.SCHEMA, line=1),
        at("E3001", Phase.SCHEMA, line=9),
        at("E3001", Phase.SCHEMA, line=3, msg="b"),
        at("E3001", Phase.SCHEMA, line=3, msg="a"),
        at("I0003", Phase.HAPROXY, line=None),
        at("F0001", Phase.HAPROXY, line=None),
    ]
    expected = finalize(diags, ValidationOptions()).diagnostics
    assert [(d.rule_id, d.location.line if d.location else None) for d in expected][:4] == [
        ("F0001", None),
        ("E3001", 3),
        ("E3001", 3),
        ("E3001", 9),
    ]
    assert [d.message for d in expected[1:3]] == ["a", "b"]
    rng = random.Random(7)
    for _ in range(20):
        shuffled = diags[:]
        rng.shuffle(shuffled)
        assert finalize(shuffled, ValidationOptions()).diagnostics == expected


def test_dedupe_counts_as_suppressed() -> None:
    d = at("W3002", Phase.SCHEMA)
    done = finalize([d, d, d, at("W3002", Phase.SCHEMA, line=3)], ValidationOptions())
    assert len(done.diagnostics) == 2 and done.suppressed == 2


def test_protected_findings() -> None:
    assert is_protected(at("F0001", Phase.SCHEMA))
    assert is_protected(at("E0002", Phase.HAPROXY))
    assert is_protected(at("E2001", Phase.SYNTAX))
    assert is_protected(at("E4001", Phase.HAPROXY))
    assert not is_protected(at("W4001", Phase.HAPROXY))
    assert not is_protected(at("E3001", Phase.SCHEMA))
    assert not is_protected(at("E6001", Phase.EXTERNAL))


@pytest.mark.parametrize("bad", ["E30", "X3001", "E3100-E3000", "E3000-W3099", "phase:nope", ""])
def test_bad_filters_fail_at_construction(bad: str) -> None:
    with pytest.raises(InvalidFilterError):
        ValidationOptions(exclude=(bad,))


def test_bad_severity_level_fails() -> None:
    with pytest.raises(InvalidOptionError):
        ValidationOptions(severity_level="loud")  # type: ignore[arg-type]


def test_matcher_parsing() -> None:
    assert parse_matcher("phase:Schema").phase is Phase.SCHEMA
    m = parse_matcher(" E3000-E3099 ")
    assert (m.letter, m.low, m.high) == ("E", 3000, 3099)


def test_defaults_come_from_spec_validation() -> None:
    settings = ValidationSettings.model_validate(
        {"strict": True, "severityLevel": "warning", "filters": {"exclude": ["W3001"]}}
    )
    opts = ValidationOptions.from_settings(settings)
    assert opts.strict and opts.severity_level is Severity.WARNING and opts.exclude == ("W3001",)
    assert opts.replace(strict=False, severity_level=None).severity_level is Severity.WARNING
    assert opts.key() != ValidationOptions().key()
    assert opts.key() == ValidationOptions.from_settings(settings).key()


def test_ties_follow_pipeline_order_of_phases() -> None:
    skipped = [
        at("I0003", p, line=None, msg=f"stage {p.value} did not run")
        for p in (Phase.EXTERNAL, Phase.HAPROXY, Phase.SCHEMA)
    ]
    done = finalize(skipped, ValidationOptions())
    assert [d.phase for d in done.diagnostics] == [Phase.SCHEMA, Phase.HAPROXY, Phase.EXTERNAL]
