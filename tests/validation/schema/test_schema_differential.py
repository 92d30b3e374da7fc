"""Differential test: the schema stage against the real binaries — zero false positives.

Whatever a real binary loads must not get a schema *error* for that binary's family (warnings
are allowed: they do not block a deploy). Three sources of configurations:

* the shared corpus (``tests/corpus``): every configuration whose header says this family
  accepts it — the syntax corpus test holds those headers to the real binaries;
* one generated configuration per section kind (``schema_kitchen``), written from the
  manual's keyword lists rather than from the schema's own examples; each binary must load it;
* edge-value variants of every catalog example (``schema_mutations``), judged line by line by
  the binary (``schema_oracle``): where the binary still loads a variant, the schema must not
  call it an error.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path

import pytest

from controller.diagnostics import Diagnostic
from controller.validation.schema import SchemaEngine, SchemaStage
from tests.validation.schema.schema_helpers import (
    Case,
    family_of,
    features_of,
    parse_cfg,
    render_cases,
)
from tests.validation.schema.schema_kitchen import KINDS, kitchens
from tests.validation.schema.schema_mutations import mutations
from tests.validation.schema.schema_oracle import accepted
from tests.validation.syntax.syntax_kit import load_cases, run_stage
from tests.validation.syntax.syntax_kit import run_haproxy as run_in_deploy_dir

pytestmark = pytest.mark.haproxy

CASES = load_cases()


def _blocking(diagnostics: list[Diagnostic]) -> list[str]:
    return [
        f"{d.rule_id} line {d.location.line if d.location else '?'}: {d.message}"
        for d in diagnostics
        if d.severity.value in ("error", "fatal")
    ]


def _schema_of(config: bytes, family: str) -> list[Diagnostic]:
    """The schema stage exactly as the pipeline runs it: after the real syntax stage."""
    _, ctx = run_stage(config)
    return asyncio.run(SchemaStage(family).run(ctx)).diagnostics


def test_corpus_configs_a_binary_accepts_get_no_schema_error(haproxy_bin: str) -> None:
    family = family_of(haproxy_bin).name
    accepted_cases = [c for c in CASES if c.accepted_by(family)]
    assert len(accepted_cases) >= 30
    problems = {c.name: _blocking(_schema_of(c.content, family)) for c in accepted_cases}
    assert not {k: v for k, v in problems.items() if v}


def test_generated_configs_load_and_get_no_schema_error(haproxy_bin: str) -> None:
    family = family_of(haproxy_bin).name
    covered: set[tuple[str, str]] = set()
    problems: list[str] = []
    for kitchen in kitchens(family):
        verdict = run_in_deploy_dir(haproxy_bin, kitchen.text.encode())
        if not verdict.accepted:
            alerts = [ln for ln in verdict.output.splitlines() if "ALERT" in ln][:3]
            problems.append(f"{kitchen.kind}: haproxy {family} refuses it: {alerts}")
            continue
        problems += [
            f"{kitchen.kind}: {p}" for p in _blocking(_schema_of(kitchen.text.encode(), family))
        ]
        covered.update((kitchen.kind, line) for line in kitchen.lines.values())
    assert not problems, "\n".join(problems)
    keywords = {(kind, line.split(" ")[0]) for kind, line in covered}
    assert len(covered) >= 250 and len(keywords) >= 150
    assert {kind for kind, _ in covered} == set(KINDS)


def _rounds(cases: list[Case]) -> list[list[Case]]:
    """Cases split so that no run holds two variants of one keyword: HAProxy judges some
    lines differently when the keyword was already set (a second ``anonkey`` is not checked),
    and the verdict must be the one the line gets on its own."""
    rounds: list[list[Case]] = []
    seen: Counter[str] = Counter()
    for case in cases:
        keyword = case.what.split(" ", 1)[1]
        if seen[keyword] == len(rounds):
            rounds.append([])
        rounds[seen[keyword]].append(case)
        seen[keyword] += 1
    return rounds


@pytest.mark.slow  # about 2,400 variants: 7 s on 2.8, 15 s on 2.6 on the shared machine
def test_edge_values_haproxy_loads_get_no_schema_error(haproxy_bin: str, tmp_path: Path) -> None:
    fam = family_of(haproxy_bin)
    cases = mutations(fam, features_of(haproxy_bin))
    engine = SchemaEngine(fam.name)
    false_positives: list[str] = []
    refused: Counter[str] = Counter()
    for part in _rounds(cases):
        verdicts = accepted(haproxy_bin, part, tmp_path)
        text = render_cases(part)
        by_line: dict[int, list[str]] = {}
        for d in engine.diagnostics(parse_cfg(text, "t.cfg"), "t.cfg"):
            if d.location and d.location.line and d.severity.value in ("error", "fatal"):
                by_line.setdefault(d.location.line, []).append(f"{d.rule_id} {d.message}")
        for case, ok in zip(part, verdicts, strict=True):
            if ok and case.lineno in by_line:
                false_positives.append(f"{case.line!r} ({case.what}): {by_line[case.lineno]}")
            if not ok:
                refused[case.what.split(" ")[0]] += 1
    print(f"\nhaproxy {fam.name}: {len(cases)} variants, refused per kind {dict(refused)}")
    assert len(cases) > 1500
    assert not false_positives, "\n".join(false_positives)
