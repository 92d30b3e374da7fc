"""How the admission judge schedules its work: shared runs, a bounded number of runs, one render
at a time, earliest deadline first, runs nobody waits for dropped, and the recovery exception's
live side judged once per store version.

The engine is the quickstart's, with real haproxy, over the quickstart's resources. Its renderer
is wrapped by :class:`Watched`, which renders with the real one and only counts: how many renders,
how many at once, in which order. A render is ~10 ms at this size; to make queues form, the wrapper
holds each render a little longer (``hold``) — time spent waiting, not a different result."""

from __future__ import annotations

import asyncio
import copy
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from controller.cli.inputs import load_inputs
from controller.render import RenderResult
from controller.resources import Store, StoreView
from controller.spec import parse_config
from controller.triggers import AdmissionJudge, default_engine
from controller.triggers.admission import Slots

pytestmark = pytest.mark.haproxy

REPO = Path(__file__).resolve().parents[2]
QUICKSTART = REPO / "examples" / "quickstart"
HAPROXY = "/usr/sbin/haproxy"


@dataclass
class Watched:
    """The real renderer, counted: renders, the most at once, and each render's view."""

    real: Any
    hold: float = 0.0
    renders: int = 0
    running: int = 0
    most: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def render(self, view: StoreView, **kwargs: Any) -> RenderResult:
        with self.lock:
            self.renders += 1
            self.running += 1
            self.most = max(self.most, self.running)
        try:
            time.sleep(self.hold)
            return self.real.render(view, **kwargs)  # type: ignore[no-any-return]
        finally:
            with self.lock:
                self.running -= 1


def ingress(name: str, host: str, klass: str = "haproxy") -> dict[str, Any]:
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "ingressClassName": klass,
            "rules": [
                {
                    "host": host,
                    "http": {
                        "paths": [
                            {
                                "path": "/",
                                "pathType": "Prefix",
                                "backend": {"service": {"name": "echo", "port": {"number": 80}}},
                            }
                        ]
                    },
                }
            ],
        },
    }


@dataclass
class Setup:
    judge: AdmissionJudge
    watched: Watched
    store: Store


def setup(
    *,
    hold: float = 0.0,
    baseline_valid: bool = True,
    rules: list[dict[str, Any]] | None = None,
    concurrency: int | None = None,
) -> Setup:
    inputs = load_inputs(QUICKSTART / "config.yaml", [QUICKSTART / "resources"])
    doc = yaml.safe_load((QUICKSTART / "config.yaml").read_text())
    if rules:
        validate = doc["spec"]["haproxyConfig"].setdefault("validate", {})
        validate.setdefault("rules", []).extend(rules)
    config, problems = parse_config(doc)
    assert config is not None, problems
    factory = default_engine(HAPROXY)
    real = factory(config.spec)
    watched = Watched(real.renderer, hold=hold)
    engine = replace(real, renderer=watched)
    judge = AdmissionJudge(
        engine=lambda: engine,
        view=inputs.store.snapshot,
        baseline_valid=lambda: baseline_valid,
        engine_factory=factory,
        concurrency=concurrency,
    )
    return Setup(judge, watched, inputs.store)


async def judge(s: Setup, obj: Mapping[str, Any], timeout: float = 60.0) -> Any:
    deadline = asyncio.get_running_loop().time() + timeout
    return await s.judge.judge_object("ingresses", "CREATE", obj, None, deadline=deadline)


async def drained(s: Setup, limit: float = 60.0) -> None:
    """Until no judgement is queued or running (bounded)."""
    end = time.monotonic() + limit
    while s.judge._inflight or s.judge._tasks:
        assert time.monotonic() < end, "judgements still running"
        await asyncio.sleep(0.02)


# --- Slots ---------------------------------------------------------------------------------


async def test_slots_serve_the_earliest_deadline_first_and_arrivals_in_order() -> None:
    slots = Slots(1)
    served: list[str] = []
    release = asyncio.Event()

    async def holder() -> None:
        async with slots.hold(0.0):
            await release.wait()

    async def waiter(name: str, deadline: float) -> None:
        async with slots.hold(deadline):
            served.append(name)

    first = asyncio.create_task(holder())
    await asyncio.sleep(0)
    tasks = [
        asyncio.create_task(waiter(n, d))
        for n, d in [("late", 9.0), ("a", 5.0), ("b", 5.0), ("early", 1.0), ("c", 5.0)]
    ]
    await asyncio.sleep(0)
    assert slots.busy == 1 and slots.waiting == 5
    release.set()
    await asyncio.gather(first, *tasks)
    assert served == ["early", "a", "b", "c", "late"]
    assert slots.busy == 0 and slots.waiting == 0


async def test_a_cancelled_waiter_takes_no_turn_and_never_leaks_a_slot() -> None:
    slots = Slots(2)
    release = asyncio.Event()
    served: list[str] = []

    async def hold(name: str, deadline: float) -> None:
        async with slots.hold(deadline):
            served.append(name)
            await release.wait()

    holders = [asyncio.create_task(hold(f"h{k}", 0.0)) for k in range(2)]
    await asyncio.sleep(0)
    gone = asyncio.create_task(hold("gone", 1.0))
    kept = asyncio.create_task(hold("kept", 2.0))
    await asyncio.sleep(0)
    gone.cancel()
    release.set()
    await asyncio.gather(*holders, kept)
    with pytest.raises(asyncio.CancelledError):
        await gone
    assert served == ["h0", "h1", "kept"]
    assert slots.busy == 0

    # Handed a slot at the moment it is cancelled: the slot goes on to the next waiter.
    release.clear()
    a = asyncio.create_task(hold("a", 0.0))
    b = asyncio.create_task(hold("b", 0.0))
    await asyncio.sleep(0)
    c = asyncio.create_task(hold("c", 1.0))
    d = asyncio.create_task(hold("d", 2.0))
    await asyncio.sleep(0)
    release.set()
    await asyncio.sleep(0)  # a and b leave; c and d are handed the slots
    c.cancel()
    await asyncio.gather(a, b, d)
    with pytest.raises(asyncio.CancelledError):
        await c
    assert slots.busy == 0


# --- the judge -----------------------------------------------------------------------------


async def test_identical_concurrent_candidates_share_one_run() -> None:
    s = setup(hold=0.2)
    obj = ingress("shared", "shared.local")
    decisions = await asyncio.gather(*(judge(s, copy.deepcopy(obj)) for _ in range(6)))
    assert all(d.allowed for d in decisions), decisions[0].message
    assert len({d.checksum for d in decisions}) == 1
    assert s.judge.runs == 1 and s.watched.renders == 1


async def test_distinct_candidates_run_in_parallel_up_to_the_slots_rendering_one_at_a_time() -> (
    None
):
    s = setup(hold=0.05, concurrency=3)
    objs = [ingress(f"p{k}", f"p{k}.local") for k in range(8)]
    decisions = await asyncio.gather(*(judge(s, o) for o in objs))
    assert all(d.allowed for d in decisions), [d.message for d in decisions if not d.allowed]
    assert len({d.checksum for d in decisions}) == 8  # each judged on its own output
    assert s.judge.runs == 8 and s.watched.renders == 8
    assert s.watched.most == 1  # renders never overlapped
    assert s.judge.slots.size == 3 and s.judge.slots.busy == 0


async def test_the_default_slots_are_one_more_than_the_cpus_this_process_may_use() -> None:
    from controller.validation.sandbox import max_concurrency

    s = setup()
    assert s.judge.slots.size == max_concurrency() + 1 >= 2
    assert s.judge.renders.size == 1


async def test_runs_whose_requesters_were_all_answered_are_dropped_before_they_start() -> None:
    s = setup(hold=0.3, concurrency=1)
    objs = [ingress(f"d{k}", f"d{k}.local") for k in range(8)]
    # Each render is held 0.3 s and one run goes at a time: within 0.5 s only the first one
    # or two can finish; the others are answered by the deadline while queued.
    decisions = await asyncio.gather(*(judge(s, o, timeout=0.5) for o in objs))
    late = [d for d in decisions if "did not finish within the webhook's deadline" in d.message]
    assert late and all(not d.allowed for d in late)
    # flagged, so the webhook counts them apart (htc_admission_reviews_total{result="timeout"})
    assert [d for d in decisions if d.timed_out] == late
    await drained(s)
    assert s.judge.dropped >= 5
    assert s.judge.runs + s.judge.dropped == 8
    assert s.watched.renders == s.judge.runs  # a dropped run rendered nothing
    assert s.judge.slots.busy == 0 and s.judge.renders.busy == 0
    # The slots are free again: a new proposal is judged as usual.
    again = await judge(s, ingress("after", "after.local"))
    assert again.allowed, again.message


async def test_a_requester_still_waiting_keeps_the_shared_run() -> None:
    s = setup(hold=0.3, concurrency=1)
    blocker = asyncio.create_task(judge(s, ingress("first", "first.local")))
    await asyncio.sleep(0.05)
    obj = ingress("kept", "kept.local")
    short = asyncio.create_task(judge(s, obj, timeout=0.1))  # gives up while queued
    long = asyncio.create_task(judge(s, copy.deepcopy(obj), timeout=60))  # keeps waiting
    assert not (await short).allowed
    decision = await long
    assert decision.allowed, decision.message
    assert (await blocker).allowed
    assert s.judge.dropped == 0 and s.judge.runs == 2


# --- the recovery exception --------------------------------------------------------------------

BROKEN = [
    {
        "name": "no-echo-backend",
        # Reads outputs, so it is deferred: the render completes and the rules stage refuses.
        "expression": "!outputs['haproxy.cfg'].content.contains("
        "'\\nbackend be_default_echo_80\\n')",
        "message": "this test refuses a backend for the Service echo",
    }
]


async def test_recovery_allows_an_unchanged_output_and_denies_a_changed_one() -> None:
    """The quickstart's resources route to the Service echo, whose backend the test's output
    rule refuses: the live configuration is invalid. A proposal the templates ignore (another class) leaves the checksum unchanged
    and is allowed with the reason; one that changes the output is denied, naming the rule."""
    s = setup(baseline_valid=False, rules=BROKEN)
    ignored = await judge(s, ingress("elsewhere", "elsewhere.local", klass="someone-else"))
    assert ignored.allowed, ignored.message
    assert "invalid already" in ignored.warnings[0]
    changed = await judge(s, ingress("new", "new.local"))
    assert not changed.allowed
    assert changed.message.startswith("the running configuration is invalid already")
    assert "no-echo-backend" in changed.message
    # Two proposals, one render of the live side: it is judged once per store version.
    assert s.watched.renders == 3


async def test_recovery_denies_a_render_error() -> None:
    s = setup(baseline_valid=False, rules=BROKEN)
    hostile = ingress("evil", "evil.local\n    lua-load /tmp/evil.lua")
    decision = await judge(s, hostile)
    assert not decision.allowed
    assert "invalid already" in decision.message


async def test_recovery_judges_the_live_side_again_for_a_new_store_version() -> None:
    s = setup(baseline_valid=False, rules=BROKEN)
    other = ingress("elsewhere", "elsewhere.local", klass="someone-else")
    assert (await judge(s, other)).allowed
    assert s.watched.renders == 2
    s.store.apply("ingresses", ingress("more", "more.local"))
    assert (await judge(s, copy.deepcopy(other))).allowed
    assert s.watched.renders == 4  # the new version's live side, and the proposal


async def test_recovery_is_not_entered_when_the_live_configuration_is_valid() -> None:
    """(The rule fails here too; the judge is told the live configuration passed.)"""
    s = setup(baseline_valid=True, rules=BROKEN)
    decision = await judge(s, ingress("bad", "bad.local"))
    assert not decision.allowed
    assert "invalid already" not in decision.message
    assert s.watched.renders == 1  # no second render for the live side


async def test_an_unchanged_output_runs_only_the_render_and_the_rules_on_the_new_object() -> None:
    """An Ingress of another class: the output checksum is the live one, so the stages that
    judge the bytes (syntax, schema, haproxy -c) answer from the verdict cache, and only the
    rules stage (it reads the objects) may judge again."""
    from controller.diagnostics import Phase
    from controller.validation import Pipeline

    s = setup()
    live = await judge(s, ingress("warm", "warm.local"))  # judged in full: now cached
    assert live.allowed, live.message
    s.store.apply("ingresses", ingress("warm", "warm.local"))
    warm = await judge(s, ingress("warm", "warm.local"))  # the live output, as reconcile has it
    pipeline = s.judge._engine().pipeline  # type: ignore[union-attr]
    assert isinstance(pipeline, Pipeline)
    before = dict(pipeline.phase_runs)
    renders = s.watched.renders
    decision = await judge(s, ingress("other", "other.local", klass="someone-else"))
    assert decision.allowed, decision.message
    assert decision.checksum == warm.checksum
    ran = {p for p, n in pipeline.phase_runs.items() if n != before.get(p, 0)}
    assert ran <= {Phase.RULES}, ran
    assert s.watched.renders == renders + 1


async def test_a_new_engine_judges_the_live_side_again_and_the_old_one_is_not_kept() -> None:
    import gc

    s = setup(baseline_valid=False, rules=BROKEN)
    other = ingress("elsewhere", "elsewhere.local", klass="someone-else")
    assert (await judge(s, other)).allowed
    assert s.watched.renders == 2
    old = s.judge._engine()
    assert old is not None
    swapped = replace(old)  # a spec swap: another engine (here with the same parts)
    s.judge._engine = lambda: swapped
    memo = s.judge._live
    assert memo is not None
    del old
    gc.collect()
    assert memo[0]() is None  # the memo did not keep the replaced engine alive
    assert (await judge(s, copy.deepcopy(other))).allowed
    assert s.watched.renders == 4  # the live side again, for the new engine, and the proposal
