"""Inline verdicts of watched objects: judged once per content, in one evaluation when they
pass, charged in CPU time (issue 20, item 1)."""

from __future__ import annotations

import os
import random
import time
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.validation.rules import Isolation, RuleSet, RunBudget, check_objects
from controller.validation.rules.cel import to_cel
from controller.validation.rules.inline import (
    ObjectMemo,
    all_pass_program,
    content_key,
    judge_many,
)
from controller.validation.rules.isolate import Usage, WorkerDeadline, run_isolated
from tests.rules.rules_helpers import INGRESSES, filled_store, ingress, make_spec, rule

RULES = [
    rule("dns", "self.spec.rules.all(r, r.host.matches('^[a-z0-9.-]+$'))", message="bad host"),
    rule("few", "self.spec.rules.size() < 4", severity="warning"),
    rule("when", "self.metadata.name != 'forbidden'", when="has(self.metadata.labels)"),
    rule("typed", "self.spec.?weight.orValue(true)"),  # a non-bool weight: "not a bool"
    rule(
        "msg",
        "!self.metadata.name.startsWith('x')",
        messageExpression="'named ' + self.metadata.name",
    ),
    rule("error", "self.spec.rules[0].host != 'boom' || self.spec.nothere == 1"),
]
WATCHED = {"ingresses": {**INGRESSES, "validate": {"rules": RULES}}}


def _random_ingress(rng: random.Random, k: int) -> dict[str, Any]:
    hosts = [
        rng.choice(["a.local", "b.example", "Bad Host", "boom", "ok-1.test"])
        for _ in range(rng.randint(1, 5))
    ]
    obj = ingress(rng.choice([f"i{k}", f"x{k}", "forbidden"]), *hosts)
    if rng.random() < 0.5:
        obj["metadata"]["labels"] = {"a": "b"}
    if rng.random() < 0.2:
        obj["spec"]["weight"] = rng.choice([1, "yes", True, False])
    return obj


@pytest.mark.parametrize("seed", range(5))
def test_one_evaluation_per_object_finds_what_each_rule_finds(seed: int) -> None:
    """The combined "all pass" program only confirms passes: every diagnostic, message,
    counter and skip is what judging rule by rule gives."""
    rng = random.Random(seed)
    spec = make_spec(watched=WATCHED)
    rs = RuleSet.from_spec(spec)
    rules = rs.inline_for(rs.collections["ingresses"])
    assert len(rules) == len(RULES)
    combined = all_pass_program(rules)
    assert combined is not None
    store = filled_store(spec, {"ingresses": [_random_ingress(rng, k) for k in range(60)]})
    objs = store.snapshot().collection("ingresses").list()
    from controller.validation.rules.inline import _describe

    selves = [(to_cel(o), *_describe(o)) for o in objs]
    plain = judge_many(rules, selves, {}, None)
    quick = judge_many(
        rules,
        [(v, "", None) for v, _, _ in selves],
        {},
        None,
        combined=combined,
        describe=lambda k: _describe(objs[k]),
    )
    assert quick.by_self == plain.by_self
    assert quick.counters == plain.counters
    assert sorted(d.model_dump_json() for d in quick.diagnostics) == sorted(
        d.model_dump_json() for d in plain.diagnostics
    )
    assert any(plain.by_self) and not all(plain.by_self)  # the seeds exercise both


def test_rules_that_do_not_combine_are_judged_one_by_one() -> None:
    deep = "(" * 30 + "self.metadata.name != ''" + ")" * 30
    spec = make_spec(watched={"ingresses": {**INGRESSES, "validate": {"rules": [rule("d", deep)]}}})
    rs = RuleSet.from_spec(spec)
    rules = rs.inline_for(rs.collections["ingresses"])
    assert rules and all_pass_program(rules) is None  # past the parser's nesting limit
    found = check_objects(rs, {"ingresses": [ingress("a", "a.local")]})
    assert found.counters.evaluated == 1 and not found.diagnostics


def test_equal_content_is_not_judged_again_even_in_a_new_store() -> None:
    spec = make_spec(watched=WATCHED)
    rs = RuleSet.from_spec(spec)
    fixtures = {"ingresses": [ingress("bad", "Bad Host"), ingress("ok", "a.local")]}
    memo = ObjectMemo()
    first = check_objects(
        rs,
        {"ingresses": filled_store(spec, fixtures).snapshot().collection("ingresses").list()},
        memo=memo,
    )
    assert first.counters.evaluated > 0
    # A rebuilt store (a resync, a restarted watch): new objects, the same content.
    again = check_objects(
        rs,
        {"ingresses": filled_store(spec, fixtures).snapshot().collection("ingresses").list()},
        memo=memo,
    )
    assert again.counters.evaluated == 0
    assert [d.message for d in again.diagnostics] == [d.message for d in first.diagnostics]
    changed = {"ingresses": [ingress("bad", "Bad Host"), ingress("ok", "b.local")]}
    third = check_objects(
        rs,
        {"ingresses": filled_store(spec, changed).snapshot().collection("ingresses").list()},
        memo=memo,
    )
    assert third.counters.evaluated > 0  # the changed one only (the budget counts it alone)
    assert [d.message for d in third.diagnostics] == [d.message for d in first.diagnostics]


def test_content_key() -> None:
    a = {"metadata": {"name": "a"}, "spec": {"x": [1, 2]}}
    assert content_key(a) == content_key({"metadata": {"name": "a"}, "spec": {"x": (1, 2)}})
    assert content_key(a) != content_key({"metadata": {"name": "a"}, "spec": {"x": [1, 2.0]}})
    assert content_key(a) != content_key({"metadata": {"name": "b"}, "spec": {"x": [1, 2]}})
    assert content_key({"v": b"bytes"}) is None  # identity only


def test_only_new_objects_are_charged() -> None:
    spec = make_spec(watched=WATCHED)
    rs = RuleSet.from_spec(spec)
    store = filled_store(spec, {"ingresses": [ingress(f"i{k}", "a.local") for k in range(300)]})
    memo = ObjectMemo()
    check_objects(rs, {"ingresses": store.snapshot().collection("ingresses").list()}, memo=memo)
    store.apply("ingresses", ingress("i7", "b.local"))
    budget = RunBudget(2.0)
    objs = store.snapshot().collection("ingresses").list()
    found = check_objects(rs, {"ingresses": objs}, memo=memo, budget=budget)
    assert found.counters.evaluated > 0 and budget.exhausted is None
    assert budget.used < 0.05  # one object judged, in-process


def test_the_worker_budget_is_cpu_time() -> None:
    """Waiting (a loaded machine, a scheduler that runs others) is not charged; spinning is,
    and the kernel stops the worker right at its budget."""
    usage = Usage()

    def wait() -> int:
        time.sleep(0.3)
        return os.getpid()

    assert run_isolated(wait, 0.2, usage=usage) != os.getpid()
    assert usage.cpu < 0.2

    def spin() -> None:
        while True:
            pass

    started = time.monotonic()
    with pytest.raises(WorkerDeadline) as info:
        run_isolated(spin, 0.2, usage=usage)
    assert 0.15 <= usage.cpu <= 0.5 and info.value.used == usage.cpu
    assert time.monotonic() - started < 2.0


def test_in_process_batches_are_charged_their_thread_cpu() -> None:
    spec = make_spec(watched=WATCHED)
    rs = RuleSet.from_spec(spec)
    budget = RunBudget(2.0)
    check_objects(
        rs, {"ingresses": [ingress("a", "a.local")]}, budget=budget, isolation=Isolation.NEVER
    )
    assert 0 < budget.used < 0.05


def test_objects_out_of_budget_beside_the_render_are_judged_again_first(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Judging beside the render is an optimisation of judging first: when the worker runs
    out of budget there (it shares the cores with the render), the objects are judged again,
    alone, and the verdict is what judging first gives."""
    import controller.validation.rules.render as ruled
    from controller.render import Renderer
    from controller.validation.report import BudgetExhaustion
    from controller.validation.rules.inline import Batch

    def starved(*args: Any) -> Any:
        out = Batch(exhausted=BudgetExhaustion(phase="rules", budget="ruleTime", limit=2.0))
        return out, 0.5

    monkeypatch.setattr(ruled, "_timed_check", starved)
    spec = make_spec(watched=WATCHED)
    objs = [ingress(f"i{k:03}", f"h{k}.local") for k in range(250)]
    objs[3] = ingress("i003", "Bad Host")
    rr = ruled.RuledRenderer(Renderer(spec), RuleSet.from_spec(spec))
    result = rr.render(filled_store(spec, {"ingresses": objs}).snapshot())
    assert not result.budgets
    assert [d.message for d in result.diagnostics if d.rule_id == "E5003"] == [
        "ingresses rule dns on default/i003: bad host"
    ]


def test_the_collector_is_off_for_the_whole_ruled_render(monkeypatch: pytest.MonkeyPatch) -> None:
    """Judging the objects is part of the render's pause of the cyclic collector, so the
    collection an earlier render deferred does not fall on it (timed in bench/pipeline)."""
    import gc

    import controller.validation.rules.render as ruled
    from controller.render import Renderer
    from controller.validation.rules.inline import check_objects as real

    seen: list[bool] = []

    def watched(*args: Any, **kwargs: Any) -> Any:
        seen.append(gc.isenabled())
        return real(*args, **kwargs)

    monkeypatch.setattr(ruled, "check_objects", watched)
    spec = make_spec(watched=WATCHED)
    rr = ruled.RuledRenderer(Renderer(spec), RuleSet.from_spec(spec))
    assert gc.isenabled()
    result = rr.render(filled_store(spec, {"ingresses": [ingress("a", "a.local")]}).snapshot())
    assert result.ok
    assert seen and not any(seen)
    assert gc.isenabled()


def _edits() -> Any:
    """Edits of a list of objects between two calls: insert, delete, replace by an object of
    equal content or of new content, move, a whole new list of equal objects, unkeyable."""
    op = st.sampled_from(["insert", "delete", "same", "new", "move", "rebuild", "bytes"])
    return st.lists(st.tuples(op, st.integers(0, 40), st.integers(0, 40)), max_size=8)


def _edited(
    objs: list[dict[str, Any]], edits: list[Any], fresh: int, raw: bool = True
) -> tuple[list[dict[str, Any]], int]:
    """A new list: ``objs`` after ``edits`` (see :func:`_edits`), new contents numbered from
    ``fresh`` on; with ``raw``, "bytes" inserts an object without a digest (keyed by its
    identity), else one of new content. Also the next number."""
    objs = list(objs)
    for kind, at, to in edits:
        fresh += 1
        i = at % (len(objs) + 1)
        if kind == "insert" or (kind == "bytes" and not raw):
            objs.insert(i, {"n": fresh})
        elif objs and kind == "delete":
            del objs[i % len(objs)]
        elif objs and kind == "same":
            objs[i % len(objs)] = dict(objs[i % len(objs)])
        elif objs and kind == "new":
            objs[i % len(objs)] = {"n": fresh}
        elif objs and kind == "move":
            objs.insert(to % len(objs), objs.pop(i % len(objs)))
        elif kind == "rebuild":
            objs = [dict(o) for o in objs]
        elif kind == "bytes":
            objs.insert(i, {"n": b"raw"})  # no digest: keyed by identity
    return objs, fresh


@settings(max_examples=150, deadline=None)
@given(st.lists(_edits(), min_size=1, max_size=6), st.integers(0, 12))
def test_keys_asked_again_are_the_keys_asked_afresh(rounds: list[Any], size: int) -> None:
    """The memo takes the keys of the common head and tail from its last answer: after any
    edits, its keys are those a fresh memo gives, and the last answer is never changed. (It
    keeps the list it is given, as a snapshot's list is never changed: edits make a new
    one; the very same list asked again gets the very same answer.)"""
    memo = ObjectMemo()
    objs: list[dict[str, Any]] = [{"n": k} for k in range(size)]
    fresh = 1000
    for edits in rounds:
        before = memo.keys("c", objs)
        assert memo.keys("c", objs) is before
        kept = list(before)
        objs, fresh = _edited(objs, edits, fresh)
        got = memo.keys("c", objs)
        assert got == [content_key(o) or id(o) for o in objs]
        assert before == kept


@settings(max_examples=150, deadline=None)
@given(st.lists(_edits(), min_size=1, max_size=6), st.integers(0, 12))
def test_verdicts_after_edits_are_those_replaced_for_the_same_content(
    rounds: list[Any], size: int
) -> None:
    """lookup takes the verdicts of the common head and tail from the latest replace and
    replace writes only the run between: what each object gets is still the verdict last
    written for its content (or None), whatever the edits."""
    memo = ObjectMemo()
    truth: dict[Any, Any] = {}
    objs: list[dict[str, Any]] = [{"n": k} for k in range(size)]
    fresh = 1000
    for edits in rounds:
        objs, fresh = _edited(objs, edits, fresh, raw=False)
        keys = memo.keys("c", objs)
        assert memo.lookup("c", objs, keys) == [truth.get(k) for k in keys]
        assert memo.lookup("c", objs) == [truth.get(k) for k in keys]
        verdicts: list[Any] = [("judged", fresh, k) for k in keys]
        memo.replace("c", objs, verdicts, keys)
        truth.update(zip(keys, verdicts, strict=True))
        assert memo.lookup("c", objs, keys) == verdicts
