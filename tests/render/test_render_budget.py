"""Render budgets: a template that loops too long or produces too much text is stopped, reported
at its line as E1012, and recorded as a budget (analysis incomplete), without stalling."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from controller.diagnostics import Phase
from controller.render import Renderer
from controller.render.budget import BudgetExceeded, Meter, current, metered_loop
from controller.render.grown import GrownList
from controller.resources import FrozenDict, Store
from controller.spec.models import HAProxyTemplateConfigSpec, RenderSettings
from controller.validation import Pipeline, ReportStatus
from tests.render.render_kit import quickstart_spec, render, spec, text


def budgeted(s: HAProxyTemplateConfigSpec, **limits: Any) -> HAProxyTemplateConfigSpec:
    return s.model_copy(update={"render": RenderSettings.model_validate(limits)})


def test_nested_loops_stop_at_the_deadline_with_a_budget_record() -> None:
    s = budgeted(
        spec(
            "global\n{% for a in range(100000) %}{% for b in range(100000) %}"
            "{% endfor %}{% endfor %}\n",
            maps={"a.map": "x\n"},
        ),
        timeout="200ms",
    )
    started = time.perf_counter()
    r = render(s)
    elapsed = time.perf_counter() - started
    assert elapsed < 2.0  # 10**10 iterations otherwise
    assert [(b.phase, b.budget, b.limit) for b in r.budgets] == [("render", "renderTime", 0.2)]
    assert r.budgets[0].used is not None and r.budgets[0].used >= 0.2
    [diag] = [d for d in r.diagnostics if d.rule_id == "E1012"]
    assert diag.template_location is not None
    assert (diag.template_location.template, diag.template_location.line) == ("haproxy.cfg", 2)
    assert "spec.render.timeout" in diag.message
    assert r.outputs["haproxy.cfg"].state == "failed" and not r.ok


def test_a_loop_without_output_meets_the_clock_too() -> None:
    # No {{ }} and no literal text: only the per-item charge of a long loop sees it.
    s = budgeted(
        spec(
            "{% set ns = namespace(s='') %}"
            "{% for a in range(100000) %}{% set ns.s = ns.s ~ ('y' * 10000) %}{% endfor %}"
        ),
        timeout="200ms",
    )
    started = time.perf_counter()
    r = render(s)
    assert time.perf_counter() - started < 3.0
    assert [b.budget for b in r.budgets] == ["renderTime"]


def test_repeated_large_strings_stop_at_the_size_budget() -> None:
    s = budgeted(spec("global\n{% for a in range(5000) %}{{ 'x' * 1000000 }}{% endfor %}\n"))
    r = render(s)
    assert [(b.budget, b.limit) for b in r.budgets] == [("outputBytes", 64 * 1024 * 1024)]
    assert r.budgets[0].used is not None and r.budgets[0].used > 64 * 1024 * 1024
    [diag] = [d for d in r.diagnostics if d.rule_id == "E1012"]
    assert diag.template_location is not None and diag.template_location.line == 2
    assert "spec.render.maxOutputBytes" in diag.message
    assert "haproxy.cfg" not in r.files


@pytest.mark.parametrize(
    "template",
    [
        "{% for a in range(100000) %}literal text only {% endfor %}",  # charged per item
        "{% macro m() %}{{ 'z' * 1000 }}{% endmacro %}{% set x %}{{ m() }}{% endset %}",  # joins
        "{% for a in range(20) %}{% include 'big' %}{% endfor %}",  # only the final size sees it
    ],
    ids=["loop-literal", "macro-join", "include-in-loop"],
)
def test_every_way_of_producing_text_is_counted(template: str) -> None:
    s = budgeted(spec(template, snippets={"big": "b" * 5000}), max_output_bytes=2048)
    r = render(s)
    assert [b.budget for b in r.budgets] == ["outputBytes"], r.diagnostics


def test_the_rest_of_the_render_is_blocked_once_a_budget_ran_out() -> None:
    s = budgeted(
        spec(
            "global\n",
            maps={"a.map": "{% for a in range(100000) %}abcdefghij{% endfor %}", "z.map": "z\n"},
        ),
        max_output_bytes=4096,
    )
    r = render(s)
    # outputs render in graph order, ties by name: a.map runs out, the others are not tried
    states = {n: o.state for n, o in r.outputs.items()}
    assert states == {"a.map": "failed", "haproxy.cfg": "blocked", "z.map": "blocked"}
    blocked = [d for d in r.diagnostics if d.rule_id == "E1008"]
    assert len(blocked) == 2 and all("E1012" in d.message for d in blocked)
    assert len(r.budgets) == 1 and len(r.files) == 0


def test_the_budget_counts_template_time_only_and_resets_per_render() -> None:
    s = budgeted(spec("{% for a in range(3000) %}{{ a }}{% endfor %}\n"), max_output_bytes=20000)
    renderer = Renderer(s)
    store = Store.from_spec(s)
    for _ in range(3):  # each render has its own meter: three renders fit, as one does
        r = renderer.render(store.snapshot())
        assert r.ok and r.budgets == ()
    assert current().get() is None  # nothing leaks out of a render


def test_an_ordinary_render_fits_the_defaults_with_room() -> None:
    s = quickstart_spec()
    assert (s.render.timeout, s.render.max_output_bytes) == (30.0, 64 * 1024 * 1024)
    r = Renderer(s).render(Store.from_spec(s).snapshot())
    assert r.budgets == ()


def test_outside_a_render_loops_are_not_metered() -> None:
    assert list(metered_loop(range(3), 10)) == [0, 1, 2]
    meter = Meter(timeout=1.0, max_chars=25)
    token = current().set(meter)
    try:
        meter.start()
        assert list(metered_loop([1, 2], 10)) == [1, 2]  # short: charged up front
        with pytest.raises(BudgetExceeded):
            list(metered_loop(range(1000), 1))  # long: charged per item
    finally:
        current().reset(token)


async def test_the_pipeline_reports_a_render_budget_as_analysis_incomplete() -> None:
    s = budgeted(spec("global\n{% for a in range(100000) %}{{ 'x' * 100 }}{% endfor %}\n"))
    s = budgeted(s, max_output_bytes=4096)
    report = await Pipeline([], haproxy_version="2.8.25", cache=None).validate(render(s))
    assert report.status is ReportStatus.ANALYSIS_INCOMPLETE and not report.valid
    assert [(b.phase, b.budget) for b in report.metadata.budget_exhaustions] == [
        (Phase.RENDER, "outputBytes")
    ]
    assert "E1012" in report.rule_ids()


def test_a_short_loop_is_charged_as_meter_charge_charges(monkeypatch: pytest.MonkeyPatch) -> None:
    """A short loop's up-front charge is Meter.charge written out (some 30,000 loops per full
    render at 10,000 Ingresses): the same characters and ticks, the clock read on the same
    charge, the same refusals, without a call of charge."""
    calls: list[int] = []
    plain_charge = Meter.charge

    def loop_charges(meter: Meter, items: list[int], chars: int) -> None:
        token = current().set(meter)
        try:
            monkeypatch.setattr(Meter, "charge", lambda self, n: calls.append(n))
            assert metered_loop(items, chars) is items
        finally:
            monkeypatch.setattr(Meter, "charge", plain_charge)
            current().reset(token)

    ours, theirs = Meter(timeout=60.0, max_chars=10**6), Meter(timeout=60.0, max_chars=10**6)
    ours.start()
    theirs.start()
    for k in range(600):
        loop_charges(ours, [1, 2, 3][: k % 4], 7)
        theirs.charge((k % 4 if k % 4 < 3 else 3) * 7)
        assert (ours.used_chars, ours._ticks) == (theirs.used_chars, theirs._ticks)
    assert calls == []
    late = Meter(timeout=60.0, max_chars=10**6, _ticks=255)
    late.deadline = 0.0  # past: the 256th charge reads the clock
    with pytest.raises(BudgetExceeded) as caught:
        loop_charges(late, [1], 1)
    assert caught.value.budget == "renderTime"
    full = Meter(timeout=60.0, max_chars=20)
    full.start()
    with pytest.raises(BudgetExceeded) as caught:
        loop_charges(full, [1, 2, 3], 7)
    assert (caught.value.budget, caught.value.limit, caught.value.used) == ("outputBytes", 20, 21)


def _meter(**kw: Any) -> Meter:
    meter = Meter(timeout=60.0, max_chars=kw.pop("max_chars", 10**9), **kw)
    meter.start()
    return meter


@contextmanager
def _metering(meter: Meter) -> Iterator[None]:
    """``meter`` as the render's, as the renderer sets it."""
    token = current().set(meter)
    try:
        yield
    finally:
        current().reset(token)


def _loop(meter: Meter, iterable: Any, chars: int) -> list[Any]:
    with _metering(meter):
        return list(metered_loop(iterable, chars))


@pytest.mark.parametrize("n", [65, 128, 129, 1000, 5000])
@pytest.mark.parametrize("kind", [list, tuple, range, dict, FrozenDict, GrownList])
def test_a_long_loop_over_a_container_is_charged_in_chunks(
    kind: Any, n: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A long loop over a container gives its items in order and charges the same characters
    as one charge per item would, a chunk of 64 items per charge, without a call of
    Meter.charge per item (the 10,000 backends of haproxy.cfg at 10,000 Ingresses)."""
    items = range(n) if kind is range else kind({k: k for k in range(n)})
    calls: list[int] = []
    monkeypatch.setattr(Meter, "charge", lambda self, c: calls.append(c))
    meter = _meter()
    assert _loop(meter, items, 7) == list(items)
    assert (meter.used_chars, meter._ticks, calls) == (7 * n, -(-n // 64), [])


def test_a_long_loop_is_refused_before_the_chunk_that_overdraws() -> None:
    meter = _meter(max_chars=100)
    seen: list[object] = []
    with _metering(meter), pytest.raises(BudgetExceeded) as caught:
        for item in metered_loop(list(range(1000)), 1):
            seen.append(item)
    # the first chunk (64 characters) fits; the second (128 in all) does not
    assert seen == list(range(64))
    assert (caught.value.budget, caught.value.used) == ("outputBytes", 128)


def test_a_long_loop_reads_the_clock_at_every_chunk() -> None:
    """Not on every 256th charge only: a body that charges nothing meets the deadline
    within one chunk of 64 items."""
    meter = _meter()
    seen: list[object] = []
    with _metering(meter), pytest.raises(BudgetExceeded) as caught:
        for item in metered_loop(list(range(1000)), 0):
            seen.append(item)
            if item == 70:
                meter.deadline = 0.0  # past
    assert caught.value.budget == "renderTime" and seen == list(range(128))


def test_a_long_loop_over_fragments_runs_out_of_the_size_budget() -> None:
    """The backends loop of the quickstart's shape: fragments() output one by one."""
    s = budgeted(
        spec(
            "{% for f in fragments('line', range(3000), 'i') %}{{ f }}{% endfor %}\n",
            snippets={"line": "item {{ i }} of a long loop over fragments\n"},
        ),
        max_output_bytes=50_000,
    )
    r = render(s)
    assert [(b.budget, b.limit) for b in r.budgets] == [("outputBytes", 50_000)]
    fits = budgeted(s, max_output_bytes=10**6)
    out = text(render(fits))
    assert out.count("\n") == 3000 and out.startswith("item 0 of") and "item 2999 of" in out
