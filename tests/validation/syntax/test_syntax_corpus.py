"""Differential test: our syntax stage against the real binaries, over tests/corpus.

Zero false positives is the promise: every configuration a binary accepts must pass our
stage (parsing and file references; the policy is switched off with a full allow-list, and
checked separately). The handful of accepted configurations we refuse on purpose are marked
``# ours: reject`` and say why (an absolute path, a ``..``). Every configuration marked
``# ours: reject`` must be refused by us, so the syntax errors we claim to catch are caught.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.validation.syntax.syntax_kit import (
    Case,
    Matrix,
    binary_version,
    errors,
    load_cases,
    run_haproxy,
    run_stage,
)

CASES = load_cases()


def test_corpus_shape() -> None:
    valid = [c for c in CASES if c.path.parent.name == "valid"]
    invalid = [c for c in CASES if c.path.parent.name == "invalid"]
    assert len(CASES) >= 40 and len(valid) >= 20 and len(invalid) >= 20
    assert all(any(c.expect.values()) for c in valid)
    assert all(not all(c.expect.values()) for c in invalid)
    assert sum(c.ours_reject for c in invalid) >= 20


def test_differential(haproxy_bin: str) -> None:
    version = binary_version(haproxy_bin)
    family = ".".join(version.split(".")[:2])
    with ThreadPoolExecutor(max_workers=2) as pool:  # the binaries run while we parse
        verdicts = pool.map(lambda c: run_haproxy(haproxy_bin, c.content), CASES)
        ours_all = [errors(run_stage(c.content, version=version)[0]) for c in CASES]
        results = list(zip(CASES, verdicts, ours_all, strict=True))
    matrix = Matrix()
    problems: list[str] = []
    for case, verdict, ours in results:
        matrix.add(case.name, verdict.accepted, not ours)
        if verdict.accepted != case.accepted_by(family):
            alerts = [line for line in verdict.output.splitlines() if "ALERT" in line][:2]
            problems.append(f"{case.name}: haproxy {family} accepted={verdict.accepted} {alerts}")
        if verdict.accepted and ours and not case.ours_reject:
            problems.append(f"{case.name}: FALSE POSITIVE {[(d.rule_id, d.message) for d in ours]}")
        if case.ours_reject and not ours:
            problems.append(f"{case.name}: we missed an error we claim to catch")
    print(f"\nhaproxy {version}: {matrix.summary()}")
    assert not problems, "\n".join(problems)
    assert matrix.only_we_reject == sorted(
        c.name for c in CASES if c.ours_reject and c.accepted_by(family)
    )


@pytest.mark.parametrize("case", [c for c in CASES if c.policy], ids=lambda c: c.name)
def test_policy_expectations(case: Case) -> None:
    denied = {d.rule_id for d in run_stage(case.content, allow=())[0]}
    assert case.policy <= denied, denied
    allowed = {d.rule_id for d in run_stage(case.content)[0]}
    assert not {r for r in allowed if r.startswith("E21")}
