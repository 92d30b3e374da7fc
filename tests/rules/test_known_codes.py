"""Known judgements as codes, and admission-style proposals in the rules stage (issue 14).

A proposal is the live snapshot with one object created, replaced or deleted. The stage must
then cost what changed, not what is listed: its known judgements are kept as one byte per
object (``Known.row``, carried from one ``Known`` to the next by ``Known.changed``), and its
content keys are spliced from the snapshot's (``_content_keys``). Whatever the order of
proposals, it must find exactly what a fresh stage finds.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from controller.diagnostics import Phase, make
from controller.render import Renderer, RenderResult
from controller.resources import Overlay, OverlayOp
from controller.validation import StageContext
from controller.validation.rules import RuleSet, RulesStage
from controller.validation.rules import stage as stage_module
from controller.validation.rules.deferred import Known, code_of, zeros
from controller.validation.rules.inline import content_key
from controller.validation.rules.judge import Judgement, State
from tests.rules.rules_helpers import filled_store, ingress, make_spec
from tests.rules.test_deferred_memo import WATCHED

_FAILED = Judgement(State.FAILED, make("E5001", Phase.RULES, "no"))
_JUDGEMENTS = [Judgement(State.PASSED), Judgement(State.SKIPPED), _FAILED]

edits = st.lists(
    st.tuples(
        st.sampled_from(["m1", "m2"]),
        st.sets(st.integers(0, 12), max_size=4),  # removed
        st.dictionaries(st.integers(0, 12), st.integers(0, 2), max_size=4),  # added
    ),
    min_size=1,
    max_size=10,
)


@settings(max_examples=80, deadline=None)
@given(edits)
def test_codes_carried_over_are_the_codes_made_afresh(
    steps: list[tuple[str, set[int], dict[int, int]]],
) -> None:
    known = Known({"m1": {}, "m2": {}})
    keys = [bytes([k]) * 20 for k in range(13)] + [None]
    for memo in ("m1", "m2"):
        known.coded(memo)
    for memo, removed, added in steps:
        by_memo = dict(known.by_memo)
        judged = dict(by_memo[memo])
        gone = [bytes([k]) * 20 for k in removed]
        for k in gone:
            judged.pop(k, None)
        new = {bytes([k]) * 20: _JUDGEMENTS[j] for k, j in added.items()}
        judged.update(new)
        by_memo[memo] = judged
        known = known.changed(by_memo, {memo: (gone, new)})
        for m in ("m1", "m2"):
            fresh = Known(dict(known.by_memo))
            assert known.coded(m) == fresh.coded(m)
            row, rest = known.row(m, keys)
            assert list(row) == [
                code_of(j) if (j := known.of(m).get(k)) is not None else 0 for k in keys
            ]
            assert all(rest(keys[i]) is known.of(m).get(keys[i]) for i in zeros(row))


def _run(stage: RulesStage, render: RenderResult) -> Any:
    outcome = asyncio.run(stage.run(StageContext(render=render)))
    return sorted(d.model_dump_json() for d in outcome.diagnostics), outcome.rules


N = 24
_OPS: list[OverlayOp] = ["create", "update", "delete"]
proposals = st.lists(
    st.tuples(st.sampled_from(_OPS), st.integers(0, 2 * N)),
    min_size=1,
    max_size=10,
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(proposals)
def test_proposals_over_one_snapshot_find_what_a_fresh_stage_finds(
    steps: list[tuple[OverlayOp, int]],
) -> None:
    spec = make_spec(watched=WATCHED)
    rs = RuleSet.from_spec(spec)
    stage = RulesStage(rs)
    # every third name shares a host: unique-first-host fails on some, known failures too
    store = filled_store(
        spec,
        {
            "ingresses": [
                ingress(f"i{k:02}", f"h{k % 3 if k % 3 == 0 else k}") for k in range(0, N, 2)
            ]
        },
    )
    renderer = Renderer(spec)
    live = store.snapshot()
    _run(stage, renderer.render(live))
    for op, k in steps:
        obj = ingress(f"i{k:02}", f"h{k}", "other")
        proposal = Overlay(
            live, "ingresses", op, obj if op != "delete" else ("default", f"i{k:02}")
        )
        render = renderer.render(proposal)
        assert _run(stage, render) == _run(RulesStage(rs), render), (op, k)


def test_a_proposal_costs_one_content_key_wherever_the_last_one_was(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Creates placed far apart: the last proposal's list differs from this one in every
    place between the two new objects, the snapshot's in one."""
    spec = make_spec(watched=WATCHED)
    stage = RulesStage(RuleSet.from_spec(spec))
    store = filled_store(
        spec, {"ingresses": [ingress(f"i{k:03}", f"h{k}") for k in range(0, 200, 2)]}
    )
    renderer = Renderer(spec)
    live = store.snapshot()
    _run(stage, renderer.render(live))
    computed: list[Any] = []

    def counting(o: Any) -> bytes | None:
        computed.append(o)
        return content_key(o)

    monkeypatch.setattr(stage_module, "content_key", counting)
    for k in (1, 197, 3, 101, 199):
        computed.clear()
        new = ingress(f"i{k:03}", f"h{k}")
        render = renderer.render(Overlay(live, "ingresses", "create", new))
        keys = stage._keyed_objects(render)["ingresses"][1]
        objs = stage._keyed_objects(render)["ingresses"][0]
        assert keys == [content_key(o) for o in objs]
        assert [o["metadata"]["name"] for o in computed] == [new["metadata"]["name"]], k
        _run(stage, render)
        # known-class and warn-many: the new object; unique-first-host reads its collection
        assert stage.evaluations_pending == 2 + len(objs)
    computed.clear()
    render = renderer.render(Overlay(live, "ingresses", "delete", ("default", "i100")))
    assert stage._keyed_objects(render)["ingresses"][1] == [
        content_key(o) for o in stage._keyed_objects(render)["ingresses"][0]
    ]
    assert computed == []


def test_a_known_failure_is_reported_again_without_judging_it() -> None:
    """A judgement with a diagnostic has no code: it is looked up by itself, in the stage
    and in what a worker is sent."""
    spec = make_spec(watched=WATCHED)
    rs = RuleSet.from_spec(spec)
    stage = RulesStage(rs)
    objs = [ingress(f"i{k}", "same" if k < 2 else f"h{k}") for k in range(6)]
    store = filled_store(spec, {"ingresses": objs})
    renderer = Renderer(spec)
    first = _run(stage, renderer.render(store.snapshot()))
    assert first[0], "two Ingresses share a first host: unique-first-host fails on both"
    render = renderer.render(store.snapshot())
    again = _run(stage, render)
    assert stage.evaluations_pending == 0
    assert again == first == _run(RulesStage(rs), render)


def test_judgements_of_objects_gone_are_dropped_once_they_are_many() -> None:
    spec = make_spec(watched=WATCHED)
    stage = RulesStage(RuleSet.from_spec(spec))
    store = filled_store(spec, {"ingresses": [ingress(f"i{k}", f"h{k}") for k in range(4)]})
    renderer = Renderer(spec)
    live = store.snapshot()
    sizes = []
    for k in range(stage_module._STALE + 40):
        new = ingress(f"n{k}", f"x{k}")
        _run(stage, renderer.render(Overlay(live, "ingresses", "create", new)))
        sizes.append(max(len(j) for j in stage._known.by_memo.values()))
    # what a run lists (4, the new one, an output's self), the stale ones, the run's new one
    assert max(sizes) <= 4 + 1 + 1 + stage_module._STALE + 1
    assert sizes[-1] < max(sizes)  # dropped at least once
