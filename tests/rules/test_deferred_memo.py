"""Deferred collection rules remember their judgement per object content and per digest of
everything else the rule reads (issue 20): a long-lived stage finds exactly what a fresh one
finds, after any sequence of changes to objects, to the collections the rules read, and to
extraContext."""

from __future__ import annotations

import asyncio
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from controller.render import Renderer, RenderResult
from controller.resources import Store
from controller.validation import StageContext
from controller.validation.rules import RuleSet, RulesStage
from tests.rules.rules_helpers import INGRESSES, filled_store, ingress, make_spec, rule

CLASSES = {"apiVersion": "networking.k8s.io/v1", "kind": "IngressClass"}
WATCHED: dict[str, dict[str, Any]] = {
    "ingresses": {
        **INGRESSES,
        "validate": {
            "rules": [
                # reads extraContext and another collection: deferred, per object
                rule(
                    "known-class",
                    "self.metadata.name.startsWith(extraContext.?prefix.orValue('')) || "
                    "resources.ingressclasses.exists(c, c.metadata.name == self.metadata.name)",
                    messageExpression="'no class for ' + self.metadata.name",
                ),
                rule(
                    "warn-many",
                    "size(self.spec.rules) < 3",
                    severity="warning",
                    when="extraContext.?strict.orValue(false)",
                ),
                # reads its own collection: a change anywhere changes its key
                rule(
                    "unique-first-host",
                    "resources.ingresses.filter(i, i.spec.rules[0].host == "
                    "self.spec.rules[0].host).size() == 1",
                ),
            ]
        },
    },
    "ingressclasses": CLASSES,
}


def _check(stage: RulesStage, render: RenderResult) -> Any:
    outcome = asyncio.run(stage.run(StageContext(render=render)))
    return sorted(d.model_dump_json() for d in outcome.diagnostics), outcome.rules


ops = st.lists(
    st.tuples(
        st.sampled_from(["ingress", "ingress", "delete", "class", "extra"]),
        st.integers(0, 5),
        st.integers(0, 6),
    ),
    min_size=1,
    max_size=12,
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops)
def test_a_long_lived_stage_finds_what_a_fresh_one_finds(
    steps: list[tuple[str, int, int]],
) -> None:
    spec = make_spec(watched=WATCHED)
    rs = RuleSet.from_spec(spec)
    stage = RulesStage(rs)
    store = filled_store(spec)
    renderer = Renderer(spec)
    extra: dict[str, Any] = {}
    for op, i, v in steps:
        extra = apply_step(store, op, i, v, extra)
        render = renderer.render(store.snapshot(), extra_context=extra)
        assert _check(stage, render) == _check(RulesStage(rs), render), (op, i, v)


def apply_step(store: Store, op: str, i: int, v: int, extra: dict[str, Any]) -> dict[str, Any]:
    """One step of :data:`ops` on ``store``; the extraContext after it."""
    if op == "ingress":
        hosts = (f"h{(i + v + k) % 4}" for k in range(v % 4 + 1))
        store.apply("ingresses", ingress(f"i{i}", *hosts))
    elif op == "delete":
        store.delete("ingresses", ("default", f"i{i}"))
    elif op == "class":
        store.apply("ingressclasses", {**CLASSES, "metadata": {"name": f"i{v}"}})
    else:
        extra = {"prefix": "i" if v % 2 else "x", "strict": v % 3 == 0}
    return extra


def test_unchanged_objects_are_not_judged_again() -> None:
    spec = make_spec(watched=WATCHED)
    rs = RuleSet.from_spec(spec)
    stage = RulesStage(rs)
    store = filled_store(spec, {"ingresses": [ingress(f"i{k}", f"h{k}") for k in range(5)]})
    renderer = Renderer(spec)
    first = renderer.render(store.snapshot())
    _check(stage, first)
    assert len(stage._known) == 5 * 3  # every rule, every object
    store.apply("ingresses", ingress("i2", "h2", "other"))
    second = renderer.render(store.snapshot())
    inputs = stage._inputs(second)
    missing = [
        k
        for name, key in inputs.memo_keys.items()
        if "ingresses" in name
        for k in inputs.object_keys["ingresses"]
        if (key, k) not in inputs.known
    ]
    # known-class and warn-many: only the changed object; unique-first-host: every object
    assert len(missing) == 2 + 5
    assert _check(stage, second) == _check(RulesStage(rs), second)


def test_judgements_a_run_was_given_do_not_change_under_it() -> None:
    """Runs of one stage overlap (admission judges two proposals at once): what a run's
    inputs hold as known stays as it was while later runs remember theirs, and each memo
    key's judgements are looked up in a mapping of their own."""
    spec = make_spec(watched=WATCHED)
    rs = RuleSet.from_spec(spec)
    stage = RulesStage(rs)
    store = filled_store(spec, {"ingresses": [ingress(f"i{k}", f"h{k}") for k in range(4)]})
    renderer = Renderer(spec)
    _check(stage, renderer.render(store.snapshot()))
    render = renderer.render(store.snapshot())
    given = stage._inputs(render).known
    before = dict(given.items())
    for k in range(4, 7):  # objects added and removed meanwhile: judged, remembered, dropped
        store.apply("ingresses", ingress(f"i{k}", f"h{k}"))
        _check(stage, renderer.render(store.snapshot()))
        store.delete("ingresses", ("default", f"i{k - 4}"))
    assert dict(given.items()) == before
    assert len(before) == 4 * 3
    now = stage._known
    assert {memo for memo, _ in now} == set(now.by_memo)
    assert all(now.of(memo)[k] is now[(memo, k)] for memo, k in now)


def test_an_output_judged_a_few_candidates_ago_is_not_judged_again() -> None:
    """Admission alternates candidates (a proposal, then the live configuration again): the
    output rule's judgement of the earlier output is still known."""
    spec = make_spec(
        cfg="{{ extraContext.text }}\n",
        cfg_rules=[rule("no-tabs", "!outputs['haproxy.cfg'].content.contains('\\t')")],
    )
    rs = RuleSet.from_spec(spec)
    stage = RulesStage(rs)
    renderer = Renderer(spec)
    store = filled_store(spec)
    live, proposal = ({"text": "a"}, {"text": "b\t"})
    runs = []
    for extra in (live, proposal, live, proposal):
        render = renderer.render(store.snapshot(), extra_context=extra)
        runs.append(_check(stage, render))
        assert _check(RulesStage(rs), render) == runs[-1]
        runs[-1] = (runs[-1], stage.evaluations_pending)
    assert [pending for _, pending in runs] == [1, 1, 0, 0]
    assert runs[1][0][0] and not runs[0][0][0]  # the proposal fails, the live one passes
