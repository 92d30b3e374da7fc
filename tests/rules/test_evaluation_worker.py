"""The long-lived evaluation worker (``pool.py``) judges as a fork does and keeps its limits.

A batch sent to the worker runs the same functions on the same values as a forked child, so
its findings are compared with an in-process evaluation on the same inputs. Its limits are
those of a fork, checked with real hostile work: an expression that copies its accumulator
for seconds, an allocation past the headroom, a cancelled wait. Every such batch ends as an
out-of-budget record (never a verdict), and the worker that ran it is replaced.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from controller.render import Renderer, RenderResult
from controller.validation import StageContext
from controller.validation.rules import Isolation, RuleSet, RulesStage, check_objects, pool, wire
from controller.validation.rules import budget as budget_module
from controller.validation.rules import sent as sent_module
from controller.validation.rules.budget import CancelSignal, RunBudget, execute
from controller.validation.rules.isolate import (
    Usage,
    WorkerCancelled,
    WorkerDeadline,
    WorkerFailed,
)
from controller.validation.rules.judge import output_value
from controller.validation.rules.pool import Job, Unavailable, Unshipped, run_in_worker
from tests.rules.rules_helpers import filled_store, ingress, ingress_rules, make_spec, rule
from tests.rules.test_deferred_memo import WATCHED, apply_step, ops

SLOW = "self.spec.rules.map(r, r.host + '!').size() > 0"
"""Seconds of work on 9,000 rules: ``map`` copies its accumulator at every step."""


@pytest.fixture
def worker() -> Iterator[None]:
    assert pool.warm(wait=30), "the evaluation worker did not start"
    yield


def _no_worker(*args: Any, **kwargs: Any) -> Any:
    raise Unavailable("this test forks")


def _slow_spec() -> Any:
    return make_spec(watched=ingress_rules(rule("slow", SLOW)))


def _many_rules() -> dict[str, Any]:
    return ingress("hostile", *(f"h{i}.local" for i in range(9000)))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0] != "Z"  # a zombie was not reaped


def _worker_pids() -> set[int]:
    return {w.proc.pid for w in pool._POOL._idle}


def test_object_rules_in_the_worker_find_what_a_fork_finds(
    worker: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = make_spec(
        watched=ingress_rules(
            rule("local", "self.spec.rules.map(r, r.host).all(h, h.endsWith('.local'))"),
            rule(
                "few",
                "size(self.spec.rules) < 3",
                severity="warning",
                messageExpression="'too many: ' + self.metadata.name",
            ),
        )
    )
    rs = RuleSet.from_spec(spec)
    objs = [ingress("a", "a.local"), ingress("b", "b.example"), ingress("c", "1", "2", "3")]
    before = pool.stats()
    sent = check_objects(rs, {"ingresses": objs}, budget=RunBudget(5.0))
    assert pool.stats()["jobs"] == before["jobs"] + 1  # judged by the worker, not a fork
    monkeypatch.setattr(budget_module, "run_in_worker", _no_worker)
    forked = check_objects(rs, {"ingresses": objs}, budget=RunBudget(5.0))
    alone = check_objects(rs, {"ingresses": objs}, budget=RunBudget(5.0), isolation=Isolation.NEVER)
    assert sent.diagnostics == forked.diagnostics == alone.diagnostics
    assert sent.counters == forked.counters == alone.counters
    assert [d.rule_id for d in sent.diagnostics] == ["E5003", "E5003", "W5004"]


def test_a_slow_rule_in_the_worker_is_stopped_at_its_cpu_budget(worker: None) -> None:
    rs = RuleSet.from_spec(_slow_spec())
    before = pool.stats()
    pids = _worker_pids()
    for _ in range(2):  # out of budget is never remembered: judged, and stopped, again
        budget = RunBudget(0.3)
        started = time.monotonic()
        batch = check_objects(rs, {"ingresses": [_many_rules()]}, budget=budget)
        assert time.monotonic() - started < 2.5  # the evaluation alone takes seconds
        assert batch.exhausted is not None and batch.exhausted.budget == "ruleTime"
        # stopped by its CPU timer, not by the wall-time backstop (0.3 * 4 + 1 s). The CPU the
        # kernel reports for the killed worker lags the timer by up to a few scheduler ticks
        # on a loaded machine (0.27 s seen), hence the lower bound's slack.
        assert 0.2 <= budget.used < 0.6
        assert [d.rule_id for d in batch.diagnostics] == ["E0002"]
        assert pool.warm(wait=30)
    after = pool.stats()
    assert after["retired"] >= before["retired"] + 1  # the worker that was stopped is gone
    assert not any(_alive(pid) for pid in pids)


def test_a_killed_worker_is_replaced_and_the_next_batch_passes(worker: None) -> None:
    rs = RuleSet.from_spec(_slow_spec())
    check_objects(rs, {"ingresses": [_many_rules()]}, budget=RunBudget(0.2))
    assert pool.warm(wait=30)
    before = pool.stats()["jobs"]
    batch = check_objects(rs, {"ingresses": [ingress("ok", "a.local")]}, budget=RunBudget(5.0))
    assert batch.exhausted is None and batch.diagnostics == []
    assert pool.stats()["jobs"] == before + 1


def test_memory_past_the_headroom_is_a_memory_failure(worker: None) -> None:
    with pytest.raises(WorkerFailed) as info:
        run_in_worker(Job(bytearray, (512 << 20,)), 10.0, memory_headroom=64 << 20)
    assert info.value.memory
    assert pool.warm(wait=30)
    # through the budget: a ruleMemory record, not a verdict and not an internal error
    budget = RunBudget(5.0)
    job = Job(bytearray, (4 << 30,))
    assert execute(job, cheap=False, budget=budget, isolation=Isolation.AUTO, job=job) is None
    assert budget.exhausted is not None and budget.exhausted.budget == "ruleMemory"


def test_the_budget_is_cpu_time_not_wall_time(worker: None) -> None:
    """A batch that waits (as one starved by a loaded machine does) uses no CPU time: it is
    neither stopped nor charged for the wait, up to the wall-time backstop."""
    usage = Usage()
    started = time.monotonic()
    assert run_in_worker(Job(time.sleep, (0.4,)), 0.2, usage=usage) is None
    assert time.monotonic() - started >= 0.4
    assert usage.cpu < 0.1
    with pytest.raises(WorkerDeadline):
        run_in_worker(Job(time.sleep, (30,)), 0.1)  # backstop: 0.1 * 4 + 1 s of wall time


def test_a_cancelled_wait_kills_the_worker_at_once(worker: None) -> None:
    rs = RuleSet.from_spec(_slow_spec())
    pids = _worker_pids()
    cancel = CancelSignal()
    threading.Timer(0.3, cancel.set).start()
    job = Job(check_objects, (rs, {"ingresses": [_many_rules()]}), rs)
    started = time.monotonic()
    with cancel, pytest.raises(WorkerCancelled):
        run_in_worker(job, 20.0, cancel=cancel)
    assert time.monotonic() - started < 2.0
    assert not any(_alive(pid) for pid in pids)


def test_a_batch_that_reads_what_was_not_sent_runs_in_a_fork(worker: None) -> None:
    before = pool.stats()
    job = Job(_unsent, ())
    budget = RunBudget(5.0)
    assert execute(
        lambda: "forked", cheap=False, budget=budget, isolation=Isolation.AUTO, job=job
    ) == ("forked")
    assert pool.stats()["fallbacks"] == before["fallbacks"] + 1
    assert budget.exhausted is None


def _unsent() -> str:
    raise Unshipped("object 3 of a collection was not sent")


def test_inputs_too_large_to_send_run_in_a_fork(worker: None) -> None:
    """Many objects past ``MAX_SHIPPED``, or texts past ``MAX_SHIPPED_TEXT``; bytes that
    look like a frame of the pickle count as objects."""
    before = pool.stats()
    for inputs in (
        [f"{i}" for i in range(pool.MAX_SHIPPED // 4)],
        "x" * (wire.MAX_SHIPPED_TEXT + 1),
        b"\x95" * (pool.MAX_SHIPPED + 1),
    ):
        with pytest.raises(Unavailable):
            run_in_worker(Job(len, (inputs,)), 5.0)
    assert pool.stats()["fallbacks"] == before["fallbacks"] + 3


def test_a_long_text_is_sent_to_the_worker(worker: None) -> None:
    """An output's content is copied, not traversed: past ``MAX_SHIPPED`` it still goes."""
    before = pool.stats()
    text = "line\n" * (pool.MAX_SHIPPED // 2)
    assert len(text) > pool.MAX_SHIPPED
    assert run_in_worker(Job(len, (text,)), 5.0) == len(text)
    after = pool.stats()
    assert (after["jobs"], after["fallbacks"]) == (before["jobs"] + 1, before["fallbacks"])


def test_outputs_are_received_as_converted() -> None:
    """An output travels as its path and content; the worker rebuilds the very value the
    stage converted (lines split as HAProxy splits them), and which outputs have one."""
    content = "global\r\n  maxconn 1\u2028x\n\nbackend b\n"
    value = output_value("haproxy.cfg", "/etc/haproxy/haproxy.cfg", content)
    sent = sent_module._Outputs({"haproxy.cfg": True, "gone.map": False}, {"haproxy.cfg": value})
    received = wire.receive(wire.dump(Job(list, ([sent],))), None)()[0]
    assert isinstance(received, sent_module._Outputs)
    assert received["haproxy.cfg"] == value
    assert received["gone.map"] is None
    assert received.has_value("haproxy.cfg") and not received.has_value("gone.map")


def _deferred(stage: RulesStage, render: RenderResult) -> Any:
    outcome = asyncio.run(stage.run(StageContext(render=render)))
    return sorted(d.model_dump_json() for d in outcome.diagnostics), outcome.rules, outcome.budget


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops)
def test_deferred_rules_in_the_worker_find_what_in_process_evaluation_finds(
    steps: list[tuple[str, int, int]],
) -> None:
    """A long-lived stage whose batches go to the worker (only what they read is sent, the
    known judgements packed) against a fresh in-process stage, after every change; no batch
    reads anything that was not sent (a gap would show as a fallback to a fork)."""
    assert pool.warm(wait=30)
    spec = make_spec(watched=WATCHED)
    rs = RuleSet.from_spec(spec)
    stage = RulesStage(rs)
    store = filled_store(spec, {"ingresses": [ingress("i0", "h0"), ingress("i1", "h1", "h0")]})
    renderer = Renderer(spec)
    extra: dict[str, Any] = {}
    before = pool.stats()
    # the first judgement of every object is a batch of its own
    render = renderer.render(store.snapshot())
    assert _deferred(stage, render) == _deferred(RulesStage(rs, isolation=Isolation.NEVER), render)
    for op, i, v in steps:
        extra = apply_step(store, op, i, v, extra)
        render = renderer.render(store.snapshot(), extra_context=extra)
        fresh = RulesStage(rs, isolation=Isolation.NEVER)
        assert _deferred(stage, render) == _deferred(fresh, render), (op, i, v)
    after = pool.stats()
    assert after["fallbacks"] == before["fallbacks"]
    assert after["jobs"] > before["jobs"]


def test_a_renderer_that_renders_again_starts_the_worker() -> None:
    """A one-shot command renders once and never starts a worker; the second render of a
    renderer (a long-running process) starts one, before any batch has to wait for it. In a
    process of its own, whose pool nothing else has touched."""
    script = (
        "from controller.validation.rules import RuledRenderer, pool\n"
        "from tests.rules.rules_helpers import filled_store, make_spec, rule\n"
        "spec = make_spec(cfg_rules=[rule('r', \"self.lines.map(l, l).size() > 0\")])\n"
        "renderer, store = RuledRenderer.from_spec(spec), filled_store(spec)\n"
        "renderer.render(store.snapshot())\n"
        "print(pool.stats()['started'])\n"
        "renderer.render(store.snapshot())\n"
        "print(pool.stats()['started'], pool.warm(wait=30))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert out.stdout.split() == ["0", "1", "True"]
