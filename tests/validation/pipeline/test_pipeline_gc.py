"""When the collector examines what a render left: once haproxy -c runs, not on the way there.

``evaluate`` holds one pause of the collector from the render to the verdict, and the
pipeline examines the young objects (:func:`gcpause.collect_young`) once ``haproxy -c`` has
been started, so the walk over the render's large lists overlaps the check instead of
delaying it. These tests watch the collector's own callbacks.
"""

from __future__ import annotations

import asyncio
import gc
import weakref
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from controller.diagnostics import Phase
from controller.render import RenderResult
from controller.validation import Pipeline, gcpause
from controller.validation.service import Engine, evaluate
from controller.validation.stage import StageContext, StageOutcome
from tests.validation.pipeline.pipeline_kit import ALL, CFG, FakeStage, render_of


@pytest.fixture
def collections() -> Iterator[list[tuple[int, str]]]:
    """(generation, what was running) of every collection while the test runs."""
    seen: list[tuple[int, str]] = []

    def watch(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            seen.append((info["generation"], "+".join(sorted(_RUNNING)) or _NOW[0]))

    gc.collect()
    gc.callbacks.append(watch)
    try:
        yield seen
    finally:
        gc.callbacks.remove(watch)


_NOW = ["idle"]
"""What the test's renderer did last (read by the collector's callback)."""
_RUNNING: set[str] = set()
"""The stages running now."""


@dataclass
class _Marking(FakeStage):
    """A stage that says when it runs, and allocates enough for the collector to be due."""

    def run(self, ctx: StageContext) -> Any:
        async def go() -> StageOutcome:
            _RUNNING.add(self.phase.value)
            await asyncio.sleep(0.02)
            _RUNNING.discard(self.phase.value)
            _NOW[0] = f"after {self.phase.value}"
            return StageOutcome()

        return go()


@dataclass
class _Renderer:
    """Leaves many young containers alive, as a render does (its lists and tables)."""

    kept: list[Any] = field(default_factory=list)

    def render(self, view: Any, **_: Any) -> RenderResult:
        _NOW[0] = "render"
        self.kept = [[k] for k in range(5_000)]  # far past the collector's threshold
        _NOW[0] = "after render"
        return render_of(CFG)


@dataclass
class _Engine:
    renderer: _Renderer
    pipeline: Pipeline


def _pipeline() -> Pipeline:
    return Pipeline([_Marking(p) for p in ALL], haproxy_version=None, cache=None, overlap=True)


async def test_what_the_render_left_is_examined_once_haproxy_runs(
    collections: list[tuple[int, str]],
) -> None:
    assert gc.isenabled()
    engine: Engine = _Engine(_Renderer(), _pipeline())  # type: ignore[assignment]
    _, verdict = await evaluate(engine, None)  # type: ignore[arg-type]
    assert verdict.report.valid
    assert gc.isenabled()
    young = [where for generation, where in collections if generation == 0]
    assert young, "the render's objects were never examined"
    assert "haproxy" in young[0].split("+"), young  # not after the render, nor before the check
    assert "after render" not in young


async def test_without_a_pause_the_render_leaves_its_objects_to_the_next_allocation(
    collections: list[tuple[int, str]],
) -> None:
    """What the pause changes: the same renderer, called alone, is walked at once."""
    _Renderer().render(None)
    assert [w for g, w in collections if g == 0][:1] == ["render"]


def test_collect_young_needs_a_pause_and_a_collector_that_was_on(
    collections: list[tuple[int, str]],
) -> None:
    gcpause.collect_young()
    assert collections == []  # no pause held: the collector runs on its own anyway
    with gcpause.paused_gc():
        gcpause.collect_young()
    assert [g for g, _ in collections] == [0]
    collections.clear()
    with gcpause.paused_gc():
        for _ in range(gc.get_threshold()[1]):  # young collections until the middle one is due
            gc.collect(0)
        collections.clear()
        gcpause.collect_young()
    assert [g for g, _ in collections] == [1]  # what the collector would do next, done now
    collections.clear()
    gc.disable()
    try:
        with gcpause.paused_gc():
            gcpause.collect_young()
    finally:
        gc.enable()
    assert collections == []  # off before the pause: it stays off


def test_collect_young_waits_while_another_validation_holds_a_pause(
    collections: list[tuple[int, str]],
) -> None:
    """One evaluation holds at most ``ONE_EVALUATION`` pauses; a further one is another
    validation in flight (a burst), and then the young objects are left to the catch-ups and
    to the end of the last pause instead of being walked once per proposal."""
    own = [gcpause.GcPause().begin() for _ in range(gcpause.ONE_EVALUATION)]
    try:
        gcpause.collect_young()
        assert [g for g, _ in collections] == [0]  # alone: examined now, beside haproxy -c
        collections.clear()
        other = gcpause.GcPause().begin()
        try:
            gcpause.collect_young()
            assert collections == []  # another validation in flight: not now
        finally:
            other.end()
        gcpause.collect_young()
        assert [g for g, _ in collections] == [0]
    finally:
        for pause in own:
            pause.end()
    assert gc.isenabled()


async def test_overlapping_evaluations_walk_the_young_objects_less_often(
    collections: list[tuple[int, str]],
) -> None:
    """Two evaluations at once (the same engine, as admission's burst has them): neither
    collects beside its check while the other holds its pauses."""
    engine: Engine = _Engine(_Renderer(), _pipeline())  # type: ignore[assignment]
    alone = await evaluate(engine, None)  # type: ignore[arg-type]
    assert alone[1].report.valid
    beside = [w for g, w in collections if g == 0 and "haproxy" in w.split("+")]
    assert beside, "alone, the render's objects are examined while haproxy -c runs"
    collections.clear()
    engine = _Engine(_Renderer(), _pipeline())  # type: ignore[assignment]
    both = await asyncio.gather(evaluate(engine, 1), evaluate(engine, 2))  # type: ignore[arg-type]
    assert all(v.report.valid for _, v in both)
    assert gc.isenabled()
    assert not [w for g, w in collections if g == 0 and "haproxy" in w.split("+")]


class _Node:
    """A container that can hold itself: a reference cycle only the collector frees."""

    me: Any = None


def test_overlapping_pauses_catch_up_as_the_collector_would(
    collections: list[tuple[int, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Pauses that overlap keep the collector off; once ``MAX_PAUSE_S`` has passed, the next
    pause to begin collects what the collector's own counts make due, not the whole heap
    each time (a burst of admission proposals keeps pauses overlapping for seconds: a
    whole-heap collection every 2 s was about 10 ms of CPU per proposal at 1,000 Ingresses)."""
    monkeypatch.setattr(gcpause, "MAX_PAUSE_S", -1.0)  # every later pause is past it
    held = gcpause.GcPause().begin()
    try:
        cycle = _Node()
        cycle.me = cycle
        gone = weakref.ref(cycle)
        del cycle
        gcpause.GcPause().begin().end()
        assert [g for g, _ in collections] == [0]  # the young generation, where the cycle is
        assert gone() is None
        for _ in range(gc.get_threshold()[2]):  # middle collections until the oldest's is due
            gc.collect(1)
        collections.clear()
        gcpause.GcPause().begin().end()
        assert [g for g, _ in collections] == [2]
        collections.clear()
        gcpause.GcPause().begin().end()
        assert [g for g, _ in collections] == [0]  # and young again after it
        assert not gc.isenabled()  # still paused: the first pause is held
    finally:
        held.end()
    assert gc.isenabled()


async def test_no_check_no_early_collection(collections: list[tuple[int, str]]) -> None:
    """A pipeline without haproxy -c leaves the walk until after the verdict."""
    p = Pipeline(
        [_Marking(Phase.SYNTAX), _Marking(Phase.SCHEMA)],
        haproxy_version=None,
        cache=None,
        overlap=True,
    )
    engine: Engine = _Engine(_Renderer(), p)  # type: ignore[assignment]
    await evaluate(engine, None)  # type: ignore[arg-type]
    assert [w for g, w in collections if g == 0][:1] == ["after schema"]
