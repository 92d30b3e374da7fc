"""Pipeline semantics with small protocol-honest stages: order, stop-on-failure, render errors,
crashes, budgets, warnings, template locations and the ValidatedFileSet gate."""

from __future__ import annotations

import asyncio
import gc

import pytest

from controller.diagnostics import Phase, Severity, TemplateLocation
from controller.render import FileEntry, FileKind, FileSet, RenderResult
from controller.validation import (
    Pipeline,
    ReportStatus,
    ValidatedFileSet,
    ValidationOptions,
    gcpause,
)
from controller.validation.report import BudgetExhaustion
from controller.validation.stage import StageContext, StageOutcome
from tests.validation.pipeline.pipeline_kit import (
    ALL,
    CFG,
    FakeStage,
    at,
    registered,
    render_of,
    stages,
)


def pipeline(st: list[FakeStage], **kw: object) -> Pipeline:
    # Sequential, so the stages' call log shows the order of the contract itself;
    # test_pipeline_overlap proves overlapped runs report exactly the same.
    kw.setdefault("overlap", False)
    return Pipeline(st, haproxy_version="2.8.25", cache=None, **kw)  # type: ignore[arg-type]


async def test_stages_run_in_order_and_report_timings() -> None:
    log: list[str] = []
    st = stages(*ALL, log=log)
    report = await pipeline(st).validate(render_of(render_ms=7.0))
    assert log == ["syntax", "schema", "haproxy", "external"]
    assert report.valid and report.status is ReportStatus.OK
    assert report.metadata.stages_run == list(ALL)
    assert report.metadata.stages_skipped == []
    assert report.metadata.haproxy_version == "2.8.25"
    assert report.metadata.checksum == render_of().files.checksum
    assert report.timings["renderMs"] == 7.0
    for name in ("syntaxMs", "schemaMs", "haproxyMs", "externalMs"):
        assert name in report.timings
    assert report.timings["totalMs"] >= 7.0


async def test_failing_stage_stops_later_ones() -> None:
    log: list[str] = []
    st = stages(*ALL, log=log)
    st[1].diagnostics = [at("E3001", Phase.SCHEMA)]
    report = await pipeline(st).validate(render_of())
    assert log == ["syntax", "schema"]
    assert not report.valid and report.status is ReportStatus.ERROR
    assert report.metadata.stages_run == [Phase.SYNTAX, Phase.SCHEMA]
    assert report.metadata.stages_skipped == [Phase.HAPROXY, Phase.EXTERNAL]
    skipped = [d for d in report.diagnostics if d.rule_id == "I0003"]
    assert {d.phase for d in skipped} == {Phase.HAPROXY, Phase.EXTERNAL}
    assert all("schema failed" in d.message for d in skipped)


async def test_render_error_runs_no_stage() -> None:
    st = stages(*ALL)
    bad = render_of(diagnostics=[registered("E1002", Phase.RENDER, "x is undefined")])
    report = await pipeline(st).validate(bad)
    assert all(s.calls == 0 for s in st)
    assert report.status is ReportStatus.ERROR and not report.valid
    assert report.metadata.stages_run == []
    assert report.metadata.stages_skipped == list(ALL)
    assert "E1002" in report.rule_ids()
    # The files a failed render did make are not the candidate: no checksum names them.
    assert report.metadata.checksum is None and report.metadata.fingerprint is not None


async def test_render_warning_alone_does_not_block() -> None:
    st = stages(*ALL)
    warned = render_of(diagnostics=[at("W1100", Phase.RENDER)])
    report = await pipeline(st).validate(warned)
    assert report.valid and all(s.calls == 1 for s in st)
    assert [d.rule_id for d in report.warnings] == ["W1100"]


async def test_missing_main_config_is_an_error_report() -> None:
    files = FileSet.of([FileEntry("maps/hosts.map", FileKind.MAP, b"a b\n")])
    st = stages(*ALL)
    report = await pipeline(st).validate(RenderResult(files=files))
    assert report.status is ReportStatus.ERROR
    assert "E0004" in report.rule_ids()
    assert all(s.calls == 0 for s in st)
    assert report.metadata.checksum is None


@pytest.mark.parametrize(
    "exc",
    [RuntimeError("boom"), KeyError("haproxy.cfg"), ZeroDivisionError(), ValueError("x" * 999)],
)
async def test_exception_in_stage_becomes_F0001(exc: Exception) -> None:
    log: list[str] = []
    st = stages(*ALL, log=log)
    st[2].raises = exc
    report = await pipeline(st).validate(render_of())
    assert log == ["syntax", "schema", "haproxy"]
    assert report.status is ReportStatus.ERROR
    fatal = [d for d in report.diagnostics if d.rule_id == "F0001"]
    assert len(fatal) == 1 and fatal[0].phase is Phase.HAPROXY
    assert type(exc).__name__ in fatal[0].message
    assert len(fatal[0].message) < 400  # long exception text is cut
    assert report.metadata.stages_skipped == [Phase.EXTERNAL]


async def test_stage_returning_garbage_is_F0001() -> None:
    st = stages(Phase.SYNTAX)
    st[0].returns = {"ok": True}
    report = await pipeline(st).validate(render_of())
    assert report.rule_ids() == ["F0001"]


async def test_fatal_survives_any_filter() -> None:
    st = stages(Phase.SYNTAX)
    st[0].raises = RuntimeError("boom")
    opts = ValidationOptions(exclude=("F0001", "phase:syntax"), severity_level=Severity.ERROR)
    report = await pipeline(st).validate(render_of(), options=opts)
    assert not report.valid and "F0001" in report.rule_ids()


async def test_budget_exhaustion_is_analysis_incomplete() -> None:
    st = stages(*ALL)
    st[2].budget = BudgetExhaustion(phase=Phase.HAPROXY, budget="timeout", limit=2.0, used=2.0)
    report = await pipeline(st).validate(render_of())
    assert report.status is ReportStatus.ANALYSIS_INCOMPLETE
    assert not report.valid
    assert report.metadata.budget_exhaustions[0].budget == "timeout"
    assert "E0002" in report.rule_ids()  # added by the pipeline when the stage did not
    assert report.metadata.stages_skipped == [Phase.EXTERNAL]
    # Excluding the record changes nothing: an incomplete analysis is never a pass.
    again = await pipeline(stages(*ALL)).validate(render_of())
    assert again.valid
    excluded = await pipeline(st).validate(
        render_of(), options=ValidationOptions(exclude=("E0002",))
    )
    assert excluded.status is ReportStatus.ANALYSIS_INCOMPLETE and not excluded.valid


async def test_warnings_stay_on_a_successful_report() -> None:
    st = stages(*ALL)
    st[1].diagnostics = [at("W3001", Phase.SCHEMA, msg="deprecated")]
    st[2].diagnostics = [at("W4001", Phase.HAPROXY, line=4, msg="haproxy warns")]
    report = await pipeline(st).validate(render_of())
    assert report.valid and report.status is ReportStatus.OK
    assert [d.rule_id for d in report.warnings] == ["W3001", "W4001"]
    assert report.metadata.counts.warning == 2


async def test_strict_turns_a_warning_into_a_stop() -> None:
    log: list[str] = []
    st = stages(*ALL, log=log)
    st[1].diagnostics = [at("W3001", Phase.SCHEMA)]
    report = await pipeline(st).validate(render_of(), options=ValidationOptions(strict=True))
    assert log == ["syntax", "schema"]
    assert not report.valid
    promoted = next(d for d in report.diagnostics if d.rule_id == "W3001")
    assert promoted.severity is Severity.ERROR  # keeps its id, carries the promoted severity


async def test_spec_defaults_apply_when_no_options_given() -> None:
    st = stages(*ALL)
    st[1].diagnostics = [at("W3001", Phase.SCHEMA)]
    strict_pipeline = pipeline(st, options=ValidationOptions(strict=True))
    assert not (await strict_pipeline.validate(render_of())).valid
    assert (await strict_pipeline.validate(render_of(), options=ValidationOptions())).valid


async def test_excluded_error_does_not_stop_later_stages() -> None:
    """Otherwise an excluded schema finding would make a report valid that haproxy never saw."""
    log: list[str] = []
    st = stages(*ALL, log=log)
    st[1].diagnostics = [at("E3001", Phase.SCHEMA)]
    report = await pipeline(st).validate(
        render_of(), options=ValidationOptions(exclude=("E3000-E3099",))
    )
    assert log == ["syntax", "schema", "haproxy", "external"]
    assert report.valid and report.metadata.suppressed == 1


async def test_haproxy_and_syntax_errors_cannot_be_filtered_away() -> None:
    for idx, phase, rid in ((0, Phase.SYNTAX, "E2001"), (2, Phase.HAPROXY, "E4001")):
        st = stages(*ALL)
        st[idx].diagnostics = [at(rid, phase)]
        opts = ValidationOptions(exclude=(rid, f"phase:{phase.value}"), include=("I0003",))
        report = await pipeline(st).validate(render_of(), options=opts)
        assert not report.valid, rid
        assert rid in report.rule_ids()


async def test_template_location_is_filled_from_the_source_map() -> None:
    st = stages(Phase.SYNTAX)
    st[0].diagnostics = [at("W2001", Phase.SYNTAX, line=2)]
    report = await pipeline(st).validate(render_of(offset=10, template="snippet:globals"))
    d = report.diagnostics[0]
    assert d.template_location == TemplateLocation(template="snippet:globals", line=12)


async def test_stage_given_template_location_is_kept() -> None:
    st = stages(Phase.SYNTAX)
    own = at("W2001", Phase.SYNTAX, line=2).model_copy(
        update={"template_location": TemplateLocation(template="own", line=99)}
    )
    st[0].diagnostics = [own]
    report = await pipeline(st).validate(render_of(offset=10))
    assert report.diagnostics[0].template_location == TemplateLocation(template="own", line=99)


async def test_check_hands_out_validated_file_set_only_when_valid() -> None:
    good = await pipeline(stages(*ALL)).check(render_of())
    assert isinstance(good.validated, ValidatedFileSet)
    assert good.validated.checksum == render_of().files.checksum
    assert good.validated.fingerprint == good.report.metadata.fingerprint
    st = stages(*ALL)
    st[0].diagnostics = [at("E2001", Phase.SYNTAX)]
    bad = await pipeline(st).check(render_of())
    assert bad.validated is None and not bad.valid
    with pytest.raises(TypeError):
        ValidatedFileSet(render_of().files, good.report, "x", _token=object())


async def test_the_validated_file_set_is_issued_when_first_asked_for(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issuing copies and hashes the file set again: a caller that only asks whether the
    verdict is valid (admission) pays nothing for it; one that asks for the set gets one,
    the same one every time."""
    from controller.validation import pipeline as pipeline_module

    issued: list[object] = []
    real = vars(pipeline_module)["_issue"]

    def counting(*args: object, **kw: object) -> ValidatedFileSet:
        issued.append(args[0])
        return real(*args, **kw)  # type: ignore[no-any-return]

    monkeypatch.setattr(pipeline_module, "_issue", counting)
    verdict = await pipeline(stages(*ALL)).check(render_of())
    assert verdict.valid and issued == []
    first = verdict.validated
    assert isinstance(first, ValidatedFileSet) and verdict.validated is first
    assert len(issued) == 1 and verdict.valid


async def test_stage_context_carries_version_and_files() -> None:
    seen: dict[str, object] = {}

    class Probe(FakeStage):
        async def run(self, ctx):  # type: ignore[no-untyped-def]
            seen["version"] = ctx.haproxy_version
            seen["cfg"] = ctx.files.main.content.decode()
            return await super().run(ctx)

    p = pipeline([Probe(Phase.RULES)])
    await p.validate(render_of())
    assert seen == {"version": "2.8.25", "cfg": CFG}


def test_duplicate_phase_is_refused() -> None:
    with pytest.raises(ValueError):
        pipeline(stages(Phase.SYNTAX, Phase.SYNTAX))


def test_fingerprint_covers_every_stage_and_the_version() -> None:
    base = pipeline(stages(*ALL)).fingerprint
    assert base == pipeline(stages(*ALL)).fingerprint
    changed = stages(*ALL)
    changed[3].fp = "v2"
    assert pipeline(changed).fingerprint != base
    other_version = Pipeline(stages(*ALL), haproxy_version="2.6.12", cache=None)
    assert other_version.fingerprint != base
    assert pipeline(stages(*ALL[:3])).fingerprint != base


async def test_the_collector_waits_for_the_report_but_not_for_a_slow_stage(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[bool] = []

    class Watching(FakeStage):
        async def run(self, ctx: StageContext) -> StageOutcome:
            seen.append(gc.isenabled())
            await asyncio.sleep(self.delay)
            seen.append(gc.isenabled())
            return StageOutcome()

    assert gc.isenabled()
    await pipeline([Watching(Phase.SYNTAX, delay=0.01)]).validate(render_of(CFG))
    assert seen == [False, False] and gc.isenabled()  # paused for the whole (short) run
    seen.clear()
    monkeypatch.setattr(gcpause, "MAX_PAUSE_S", 0.05)
    await pipeline([Watching(Phase.SYNTAX, delay=0.3)]).validate(render_of(CFG))
    assert seen == [False, True] and gc.isenabled()  # a slow stage gets it back
