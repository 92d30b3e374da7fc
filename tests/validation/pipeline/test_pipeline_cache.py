"""Verdict cache and single-flight: success reused, failure never, identical concurrent
candidates share one run."""

from __future__ import annotations

import asyncio

import pytest

from controller.diagnostics import Phase, TemplateLocation
from controller.render import RenderResult
from controller.validation import Pipeline, StageOutcome, ValidationOptions, VerdictCache
from controller.validation.cache import SingleFlight, StageRun
from controller.validation.report import BudgetExhaustion
from tests.validation.pipeline.pipeline_kit import ALL, CFG, FakeStage, at, render_of, stages


def cached_pipeline(st, cache: VerdictCache | None = None) -> Pipeline:  # type: ignore[no-untyped-def]
    return Pipeline(
        st, haproxy_version="2.8.25", cache=cache if cache is not None else VerdictCache()
    )


async def test_hit_skips_the_stages_and_keeps_warnings() -> None:
    st = stages(*ALL)
    st[1].diagnostics = [at("W3001", Phase.SCHEMA, msg="deprecated")]
    p = cached_pipeline(st)
    first = await p.validate(render_of())
    second = await p.validate(render_of())  # a new RenderResult with identical bytes
    assert first.valid and second.valid
    assert not first.metadata.cache_hit and second.metadata.cache_hit
    assert [s.calls for s in st] == [1, 1, 1, 1]
    assert p.stage_runs == 1
    assert [d.rule_id for d in second.warnings] == ["W3001"]
    assert second.metadata.stages_run == first.metadata.stages_run
    assert second.metadata.fingerprint == first.metadata.fingerprint
    assert set(second.timings) == {"renderMs", "totalMs"}  # stage phases did not run now


async def test_hit_takes_template_locations_from_the_callers_render() -> None:
    st = stages(Phase.SYNTAX)
    st[0].diagnostics = [at("W2001", Phase.SYNTAX, line=2)]
    p = cached_pipeline(st)
    await p.validate(render_of(offset=0))
    moved = await p.validate(render_of(offset=5))  # same bytes, templates moved down 5 lines
    assert moved.metadata.cache_hit
    assert moved.diagnostics[0].template_location == TemplateLocation(
        template="haproxy.cfg", line=7
    )


async def test_failure_is_never_cached() -> None:
    st = stages(*ALL)
    st[2].diagnostics = [at("E4001", Phase.HAPROXY)]
    cache = VerdictCache()
    p = cached_pipeline(st, cache)
    for _ in range(3):
        report = await p.validate(render_of())
        assert not report.valid and not report.metadata.cache_hit
    assert st[2].calls == 3 and len(cache) == 0


async def test_budget_exhaustion_is_never_cached() -> None:
    st = stages(Phase.HAPROXY)
    st[0].budget = BudgetExhaustion(phase=Phase.HAPROXY, budget="timeout", limit=1.0)
    cache = VerdictCache()
    p = cached_pipeline(st, cache)
    await p.validate(render_of())
    await p.validate(render_of())
    assert st[0].calls == 2 and len(cache) == 0


async def test_render_failure_is_not_cached_and_runs_nothing() -> None:
    from tests.validation.pipeline.pipeline_kit import registered

    cache = VerdictCache()
    p = cached_pipeline(stages(*ALL), cache)
    bad = render_of(diagnostics=[registered("E1001", Phase.RENDER)])
    await p.validate(bad)
    assert len(cache) == 0


async def test_fingerprint_change_misses() -> None:
    cache = VerdictCache()
    a = stages(*ALL)
    await cached_pipeline(a, cache).validate(render_of())
    b = stages(*ALL)
    b[1].fp = "schema-with-overlay"
    report = await cached_pipeline(b, cache).validate(render_of())
    assert not report.metadata.cache_hit and b[1].calls == 1
    c = stages(*ALL)  # same configuration as `a`: its verdict is reused
    again = await cached_pipeline(c, cache).validate(render_of())
    assert again.metadata.cache_hit and c[0].calls == 0


async def test_other_bytes_or_options_miss() -> None:
    st = stages(*ALL)
    p = cached_pipeline(st)
    await p.validate(render_of())
    assert not (await p.validate(render_of(CFG + "# changed\n"))).metadata.cache_hit
    assert not (
        await p.validate(render_of(), options=ValidationOptions(strict=True))
    ).metadata.cache_hit
    assert st[0].calls == 3


async def test_strict_hit_is_judged_like_a_fresh_run() -> None:
    """A success cached without strict must not vouch for the same bytes under strict."""
    st = stages(*ALL)
    st[1].diagnostics = [at("W3001", Phase.SCHEMA)]
    p = cached_pipeline(st)
    assert (await p.validate(render_of())).valid
    assert not (await p.validate(render_of(), options=ValidationOptions(strict=True))).valid


async def test_lru_bound_evicts_least_recently_used() -> None:
    cache = VerdictCache(max_entries=2)
    st = stages(Phase.SYNTAX)
    p = cached_pipeline(st, cache)
    a, b, c = (render_of(CFG + f"# {n}\n") for n in "abc")
    await p.validate(a)
    await p.validate(b)
    assert (await p.validate(a)).metadata.cache_hit  # a is now the most recent
    await p.validate(c)  # evicts b
    assert len(cache) == 2
    assert (await p.validate(a)).metadata.cache_hit
    assert not (await p.validate(b)).metadata.cache_hit
    assert cache.hits == 2


def test_cache_refuses_failed_runs_and_empty_bounds() -> None:
    with pytest.raises(ValueError):
        VerdictCache(max_entries=0)
    with pytest.raises(ValueError):
        VerdictCache().put(("a", "b", "c"), StageRun(failed=True))


async def test_concurrent_identical_candidates_share_one_run() -> None:
    st = stages(*ALL)
    st[2].delay = 0.05
    p = Pipeline(st, haproxy_version="2.8.25", cache=None)  # single-flight works without cache
    reports = await asyncio.gather(*(p.validate(render_of()) for _ in range(10)))
    assert [s.calls for s in st] == [1, 1, 1, 1]
    assert p.stage_runs == 1
    assert all(r.valid for r in reports)
    assert len({r.metadata.checksum for r in reports}) == 1


async def test_concurrent_different_candidates_run_separately() -> None:
    st = stages(Phase.SYNTAX)
    st[0].delay = 0.02
    p = Pipeline(st, haproxy_version=None, cache=None)
    await asyncio.gather(*(p.validate(render_of(CFG + f"# {i}\n")) for i in range(4)))
    assert st[0].calls == 4


async def test_a_cancelled_waiter_does_not_cancel_the_shared_run() -> None:
    st = stages(Phase.HAPROXY)
    st[0].delay = 0.05
    p = Pipeline(st, haproxy_version=None, cache=VerdictCache())
    first = asyncio.ensure_future(p.validate(render_of()))
    second = asyncio.ensure_future(p.validate(render_of()))
    await asyncio.sleep(0.01)
    first.cancel()
    report = await second
    assert report.valid and st[0].calls == 1
    with pytest.raises(asyncio.CancelledError):
        await first


async def test_single_flight_forgets_finished_work() -> None:
    flight: SingleFlight[int] = SingleFlight()
    runs = 0

    async def work() -> int:
        nonlocal runs
        runs += 1
        await asyncio.sleep(0)
        return runs

    assert await flight.run("k", work) == 1
    assert len(flight) == 0
    assert await flight.run("k", work) == 2  # not a cache: a later call runs again


async def test_joined_callers_get_their_own_template_locations() -> None:
    st = stages(Phase.SYNTAX)
    st[0].diagnostics = [at("W2001", Phase.SYNTAX, line=2)]
    st[0].delay = 0.02
    p = Pipeline(st, haproxy_version=None, cache=None)
    a, b = await asyncio.gather(p.validate(render_of(offset=0)), p.validate(render_of(offset=30)))
    assert st[0].calls == 1
    assert a.diagnostics[0].template_location == TemplateLocation(template="haproxy.cfg", line=2)
    assert b.diagnostics[0].template_location == TemplateLocation(template="haproxy.cfg", line=32)


class _InputStage(FakeStage):
    """A fake stage that judges more than the bytes (as the rules stage reads objects):
    ``inputs`` is its digest of those other inputs."""

    inputs: str = "objects-1"

    def input_key(self, render: RenderResult) -> str | None:
        return self.inputs


def _with_inputs(*phases: Phase) -> list[FakeStage]:
    return [_InputStage(p) if p is Phase.RULES else FakeStage(p) for p in phases]


def _rules_of(st: list[FakeStage]) -> _InputStage:
    found = st[3]
    assert isinstance(found, _InputStage)
    return found


FIVE = (Phase.SYNTAX, Phase.SCHEMA, Phase.HAPROXY, Phase.RULES, Phase.EXTERNAL)


async def test_same_bytes_with_new_inputs_rerun_only_the_stage_that_reads_them() -> None:
    st = _with_inputs(*FIVE)
    st[2].diagnostics = [at("W4001", Phase.HAPROXY)]
    p = cached_pipeline(st)
    first = await p.validate(render_of())
    assert first.valid and [s.calls for s in st] == [1, 1, 1, 1, 1]
    _rules_of(st).inputs = "objects-2"  # an object the templates ignore: identical bytes
    second = await p.validate(render_of())
    assert second.valid and not second.metadata.cache_hit
    assert [s.calls for s in st] == [1, 1, 1, 2, 1]
    assert p.phase_runs == {Phase.SYNTAX: 1, Phase.SCHEMA: 1, Phase.HAPROXY: 1, Phase.RULES: 2,
                            Phase.EXTERNAL: 1}  # fmt: skip
    assert second.metadata.stages_run == list(FIVE)
    assert [d.rule_id for d in second.warnings] == ["W4001"]  # travels with the reused pass
    assert "rulesMs" in second.timings and "haproxyMs" not in second.timings
    third = await p.validate(render_of())  # the same bytes and inputs: the whole run is cached
    assert third.metadata.cache_hit and st[3].calls == 2


async def test_a_failing_input_stage_still_stops_the_run_after_reused_stages() -> None:
    st = _with_inputs(*FIVE)
    p = cached_pipeline(st)
    await p.validate(render_of())
    _rules_of(st).inputs = "objects-2"
    st[3].diagnostics = [at("E5001", Phase.RULES)]
    report = await p.validate(render_of())
    assert not report.valid
    assert report.metadata.stages_run == [Phase.SYNTAX, Phase.SCHEMA, Phase.HAPROXY, Phase.RULES]
    assert report.metadata.stages_skipped == [Phase.EXTERNAL]
    again = await p.validate(render_of())  # a failure is never cached: judged again
    assert not again.valid and not again.metadata.cache_hit
    assert [s.calls for s in st] == [1, 1, 1, 3, 1]


async def test_a_failing_bytes_stage_is_never_reused() -> None:
    st = _with_inputs(*FIVE)
    st[2].diagnostics = [at("E4001", Phase.HAPROXY)]
    p = cached_pipeline(st)
    for k in range(3):
        _rules_of(st).inputs = f"objects-{k}"
        report = await p.validate(render_of())
        assert not report.valid and report.metadata.stages_skipped == [Phase.RULES, Phase.EXTERNAL]
    # syntax and schema passed these bytes and are reused; haproxy failed, so it runs again
    assert [s.calls for s in st[:3]] == [1, 1, 3] and st[4].calls == 0


async def test_a_validator_failure_let_pass_is_not_reused() -> None:
    st = _with_inputs(*FIVE)
    st[4].diagnostics = [at("W6008", Phase.EXTERNAL)]  # what failurePolicy ignore reports
    st[4].returns = StageOutcome([at("W6008", Phase.EXTERNAL)], cacheable=False)
    p = cached_pipeline(st)
    await p.validate(render_of())
    _rules_of(st).inputs = "objects-2"
    report = await p.validate(render_of())
    assert report.valid and [s.calls for s in st] == [1, 1, 1, 2, 2]


async def test_bytes_stages_run_again_when_only_part_of_them_is_known() -> None:
    """Reuse goes in stage order: the run before stopped at a failing rules stage, so the
    external stage had not judged these bytes and runs; the stages before it are reused."""
    st = _with_inputs(*FIVE)
    st[3].diagnostics = [at("E5001", Phase.RULES)]
    p = cached_pipeline(st)
    await p.validate(render_of())
    st[3].diagnostics = []
    _rules_of(st).inputs = "objects-2"
    report = await p.validate(render_of())
    assert report.valid and [s.calls for s in st] == [1, 1, 1, 2, 1]


async def test_without_input_stages_nothing_is_kept_per_stage() -> None:
    cache = VerdictCache()
    p = cached_pipeline(stages(*ALL), cache)
    await p.validate(render_of())
    assert len(cache) == 1 and not cache._stages
