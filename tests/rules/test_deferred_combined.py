"""Deferred collection rules judged together per object (``deferred._Quick``): every
diagnostic, counter, skip, suppression and remembered judgement is what judging rule by rule
gives."""

from __future__ import annotations

import random
from typing import Any

import pytest

from controller.render import Renderer
from controller.validation.rules import (
    Isolation,
    RuledRenderer,
    RuleSet,
    deferred_inputs,
    evaluate_deferred,
    plan,
)
from controller.validation.rules import deferred as deferred_module
from controller.validation.rules.deferred import DeferredResult
from tests.rules.rules_helpers import INGRESSES, filled_store, ingress, make_spec, rule

OURS = "self.metadata.?labels.?cls.orValue('') == extraContext.cls"
RULES = [
    rule("dns", "self.spec.rules.all(r, r.host.matches('^[a-z0-9.-]+$'))", when=OURS),
    rule("few", "self.spec.rules.size() < 4", severity="warning", when=OURS),
    rule("class-known", "resources.classes.exists(c, c.metadata.name == 'haproxy')"),
    rule("typed", "self.spec.?weight.orValue(true)"),  # a non-bool weight: "not a bool"
    rule(
        "msg",
        "!self.metadata.name.startsWith('x')",
        messageExpression="'named ' + self.metadata.name",
        when=OURS,
    ),
    rule("error", "self.spec.rules[0].host != 'boom' || self.spec.nothere == 1"),
    rule("deep", "extraContext.limit > self.spec.rules.size()"),
]
CLASSES = {"apiVersion": "networking.k8s.io/v1", "kind": "IngressClass"}


def _random_ingress(rng: random.Random, k: int) -> dict[str, Any]:
    hosts = [
        rng.choice(["a.local", "b.example", "Bad Host", "boom", "ok-1.test"])
        for _ in range(rng.randint(1, 5))
    ]
    obj = ingress(rng.choice([f"i{k}", f"x{k}"]), *hosts)
    if rng.random() < 0.7:
        obj["metadata"]["labels"] = {"cls": rng.choice(["ours", "theirs"])}
    if rng.random() < 0.2:
        obj["spec"]["weight"] = rng.choice([1, "yes", True, False])
    return obj


def _run(spec: Any, fixtures: dict[str, list[dict[str, Any]]]) -> DeferredResult:
    rs = RuleSet.from_spec(spec)
    assert not rs.diagnostics, rs.diagnostics
    render = RuledRenderer(Renderer(spec), rs, isolation=Isolation.NEVER).render(
        filled_store(spec, fixtures).snapshot()
    )
    return evaluate_deferred(rs, plan(rs), deferred_inputs(rs, render))


@pytest.mark.parametrize("seed", range(4))
def test_judged_together_finds_what_each_rule_finds(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = random.Random(seed)
    spec = make_spec(
        watched={
            "ingresses": {**INGRESSES, "validate": {"rules": RULES}},
            "classes": CLASSES,
        },
        extraContext={"cls": "ours", "limit": rng.choice([3, 6])},
    )
    fixtures = {
        "ingresses": [_random_ingress(rng, k) for k in range(60)],
        "classes": [{**CLASSES, "metadata": {"name": rng.choice(["haproxy", "nginx"])}}],
    }
    settled: list[int] = []
    real = deferred_module._Quick.outcome

    def counted(self: Any, r: Any, i: int) -> Any:
        found = real(self, r, i)
        settled.append(found is not None)
        return found

    monkeypatch.setattr(deferred_module._Quick, "outcome", counted)
    together = _run(spec, fixtures)
    monkeypatch.setattr(deferred_module._Quick, "outcome", lambda self, r, i: None)
    alone = _run(spec, fixtures)
    assert [d.model_dump_json() for d in together.diagnostics] == [
        d.model_dump_json() for d in alone.diagnostics
    ]
    assert together.counters == alone.counters
    assert together.fresh == alone.fresh
    assert together.exhausted == alone.exhausted
    assert any(settled) and not all(settled)  # both paths taken
    assert alone.diagnostics  # the seeds produce failures too
