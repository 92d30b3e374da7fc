"""Overlapped execution reports exactly what sequential execution reports.

After the syntax stage passed, the pipeline runs schema, ``haproxy -c`` and the deferred
rules at the same time and reads their outcomes in stage order. These tests hold it to three
promises: the report (verdict, diagnostics and their order, stagesRun, stagesSkipped, budgets)
is the sequential one; ``haproxy -c`` never starts before the syntax stage passed; and work
that a failure made pointless is cancelled — with real haproxy, the process is gone when the
report comes back.
"""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import itertools
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from structlog.processors import format_exc_info
from structlog.testing import capture_logs

from controller.diagnostics import Phase
from controller.render import FileEntry, FileKind
from controller.spec.loader import load_config
from controller.spec.models import ValidationSettings
from controller.validation import (
    Pipeline,
    Stage,
    StageContext,
    StageOutcome,
    ValidationOptions,
    ValidationReport,
)
from controller.validation.report import BudgetExhaustion
from controller.validation.sandbox import max_concurrency
from tests.validation.pipeline.pipeline_kit import FakeStage, at, render_of
from tests.validation.pipeline.test_pipeline_real import GOOD, HOSTS, quickstart_render, real

PHASES = (Phase.SYNTAX, Phase.SCHEMA, Phase.HAPROXY, Phase.RULES, Phase.EXTERNAL)


def comparable(report: ValidationReport) -> dict[str, Any]:
    """Everything but the timings, which differ by nature."""
    return report.model_dump(mode="json", exclude={"timings"})


def behave(stage: FakeStage, how: str) -> FakeStage:
    phase = stage.phase
    code = {Phase.SCHEMA: "3", Phase.HAPROXY: "4", Phase.RULES: "5"}.get(phase, "0")
    if how == "error":
        stage.diagnostics = [at(f"E{code}901", phase, msg=f"{phase.value} refuses")]
    elif how == "warning":
        stage.diagnostics = [at(f"W{code}902", phase, msg=f"{phase.value} warns")]
    elif how == "crash":
        stage.raises = RuntimeError(f"{phase.value} broke")
    elif how == "budget":
        stage.budget = BudgetExhaustion(phase=phase, budget="timeout", limit=1.0, used=1.0)
    return stage


def fakes(schema: str, haproxy: str, rules: str) -> list[FakeStage]:
    st = [FakeStage(p) for p in PHASES]
    behave(st[1], schema)
    behave(st[2], haproxy).delay = 0.003  # a subprocess takes a while: real interleaving
    behave(st[3], rules).delay = 0.001
    return st


OPTIONS = {
    "default": ValidationOptions(),
    "strict": ValidationOptions(strict=True),
    "exclude-schema": ValidationOptions(exclude=("E3000-E3999",)),
}
KINDS = ("pass", "error", "warning", "crash", "budget")


@pytest.mark.parametrize(("schema", "haproxy"), list(itertools.product(KINDS, (*KINDS, "slow"))))
async def test_fake_stages_report_the_same_either_way(schema: str, haproxy: str) -> None:
    for rules, (opt_name, opts) in itertools.product(("pass", "error"), OPTIONS.items()):
        reports = []
        for overlap in (False, True):
            st = fakes(schema, "pass" if haproxy == "slow" else haproxy, rules)
            if haproxy == "slow":
                st[2].delay = 0.03  # still running when schema is judged
            p = Pipeline(st, haproxy_version="2.8.25", cache=None, overlap=overlap)
            reports.append(await p.validate(render_of(), options=opts))
        sequential, overlapped = reports
        assert comparable(overlapped) == comparable(sequential), (rules, opt_name)
        assert ("overlapMs" in overlapped.timings) == (overlapped.metadata.stages_run[1:2] != [])
        for phase in overlapped.metadata.stages_run:
            assert f"{phase.value}Ms" in overlapped.timings


@dataclass
class Probe(Stage):
    """A protocol-honest stage that records when it started and ended, and whether it was
    cancelled, on a clock shared by every probe of one run."""

    phase: Phase
    events: list[str]
    delay: float = 0.0
    diagnostics: list[Any] = field(default_factory=list)

    def fingerprint(self) -> str:
        return self.phase.value

    async def run(self, ctx: StageContext) -> StageOutcome:
        self.events.append(f"{self.phase.value}:start")
        try:
            await asyncio.sleep(self.delay)
        except asyncio.CancelledError:
            self.events.append(f"{self.phase.value}:cancelled")
            raise
        self.events.append(f"{self.phase.value}:end")
        return StageOutcome(list(self.diagnostics))


def probes(events: list[str], **delays: float) -> list[Probe]:
    return [Probe(p, events, delays.get(p.value, 0.0)) for p in PHASES[:4]]


async def test_haproxy_starts_only_after_syntax_passed() -> None:
    events: list[str] = []
    st = probes(events, syntax=0.02, haproxy=0.01)
    assert (
        await Pipeline(st, haproxy_version=None, cache=None, overlap=True).validate(render_of())
    ).valid
    assert events.index("syntax:end") < events.index("haproxy:start")
    # and haproxy was indeed started before schema was judged: they overlapped
    assert events.index("haproxy:start") < events.index("schema:start")

    events.clear()
    st = probes(events, haproxy=0.01)
    st[0].diagnostics = [at("E2001", Phase.SYNTAX)]
    report = await Pipeline(st, haproxy_version=None, cache=None, overlap=True).validate(
        render_of()
    )
    assert not report.valid and events == ["syntax:start", "syntax:end"]
    assert report.metadata.stages_skipped == [Phase.SCHEMA, Phase.HAPROXY, Phase.RULES]


async def test_a_schema_failure_cancels_the_running_check() -> None:
    events: list[str] = []
    st = probes(events, haproxy=5.0, rules=5.0)
    st[1].diagnostics = [at("E3001", Phase.SCHEMA)]
    started = time.perf_counter()
    report = await Pipeline(st, haproxy_version=None, cache=None, overlap=True).validate(
        render_of()
    )
    assert time.perf_counter() - started < 2.0
    assert {"haproxy:cancelled", "rules:cancelled"} <= set(events)
    assert "haproxy:end" not in events
    assert report.metadata.stages_run == [Phase.SYNTAX, Phase.SCHEMA]
    assert report.metadata.stages_skipped == [Phase.HAPROXY, Phase.RULES]
    assert not any(d.phase is Phase.HAPROXY and d.rule_id != "I0003" for d in report.diagnostics)


async def test_cancelling_the_caller_cancels_the_speculative_stages() -> None:
    events: list[str] = []
    st = probes(events, haproxy=5.0, schema=5.0)
    p = Pipeline(st, haproxy_version=None, cache=None, overlap=True)
    task = asyncio.create_task(p._run_stages(render_of(), p.options, ("k", "f", "o")))
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert {"haproxy:cancelled", "schema:cancelled"} <= set(events)
    assert gc.isenabled()


async def test_collection_is_enabled_again_whatever_happens() -> None:
    assert gc.isenabled()
    for how in ("pass", "error", "crash", "budget"):
        for overlap in (True, False):
            st = fakes("pass", how, "pass")
            behave(st[0], how)
            await Pipeline(st, haproxy_version=None, cache=None, overlap=overlap).validate(
                render_of()
            )
            assert gc.isenabled(), (how, overlap)
    gc.disable()  # a caller that turned collection off keeps it off
    try:
        await Pipeline(
            fakes("pass", "pass", "pass"), haproxy_version=None, cache=None, overlap=True
        ).validate(render_of())
        assert not gc.isenabled()
    finally:
        gc.enable()


# --- with the real stages and both real binaries -------------------------------------------

BAD_SCHEMA = GOOD.replace(
    "    server s1 127.0.0.1:18081\n", "    balance roundrobbin\n    server s1 127.0.0.1:18081\n"
)
BAD_HAPROXY = GOOD.replace("default_backend be_default", "default_backend be_missing")
CANDIDATES = {
    "good": GOOD,
    "schema-invalid": BAD_SCHEMA,
    "haproxy-invalid": BAD_HAPROXY,
    "both": BAD_SCHEMA.replace("default_backend be_default", "default_backend be_missing"),
    "policy-denied": GOOD.replace("    maxconn 100\n", "    maxconn 100\n    lua-load x.lua\n"),
}


async def test_real_stages_report_the_same_either_way(haproxy_bin: str) -> None:
    for name, cfg in CANDIDATES.items():
        for opts in (ValidationOptions(), ValidationOptions(exclude=("E3004",))):
            reports = []
            for overlap in (False, True):
                p = real(haproxy_bin)
                p.overlap = overlap
                reports.append(await p.validate(render_of(cfg, extra=[HOSTS]), options=opts))
            sequential, overlapped = reports
            assert comparable(overlapped) == comparable(sequential), name
    # the candidates cover what they claim
    p = real(haproxy_bin)
    got = {n: await p.validate(render_of(c, extra=[HOSTS])) for n, c in CANDIDATES.items()}
    assert got["good"].valid
    assert got["schema-invalid"].metadata.stages_skipped == [Phase.HAPROXY]
    assert got["both"].metadata.stages_skipped == [Phase.HAPROXY]
    assert got["haproxy-invalid"].metadata.stages_run[-1] is Phase.HAPROXY
    assert not got["haproxy-invalid"].valid
    assert got["policy-denied"].metadata.stages_run == [Phase.SYNTAX]


def _haproxy_children(binary: str) -> dict[int, str]:
    """Live children of this process running ``binary`` → their working directory. Inside
    the sandbox's private root the executable's path differs; its name does not."""
    found = {}
    me = str(os.getpid())
    name = f"({os.path.basename(binary)[:15]})"
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
            fields = stat[stat.rindex(")") + 2 :].split()
            if fields[1] != me or fields[0] == "Z" or name not in stat:
                continue
            found[int(pid)] = os.readlink(f"/proc/{pid}/cwd")
        except OSError:
            continue
    return found


@dataclass
class Watching(Stage):
    """The real schema stage, plus a look at which haproxy processes are alive when it is
    done (an observation only: the stage's outcome is passed on unchanged)."""

    inner: Any
    binary: str
    seen: dict[int, str] = field(default_factory=dict)

    @property
    def phase(self) -> Phase:  # type: ignore[override]
        return Phase(self.inner.phase)

    def fingerprint(self) -> str:
        return str(self.inner.fingerprint())

    async def run(self, ctx: StageContext) -> StageOutcome:
        outcome: StageOutcome = await self.inner.run(ctx)
        await asyncio.sleep(0.01)
        self.seen = _haproxy_children(self.binary)
        return outcome


async def test_schema_failure_leaves_no_haproxy_process_behind(haproxy_bin: str) -> None:
    # haproxy -c loads an ACL's pattern file while it parses (300,000 patterns: about 0.1 s)
    # and only then reaches the schema error, so it is caught running when schema is done.
    patterns = "".join(f"host{i}.example.test\n" for i in range(300_000)).encode()
    cfg = BAD_SCHEMA.replace(
        "    bind 127.0.0.1:18080\n",
        "    bind 127.0.0.1:18080\n    acl big hdr(host) -f maps/big.lst\n",
    )
    render = render_of(cfg, extra=[HOSTS, FileEntry("maps/big.lst", FileKind.MAP, patterns)])
    base = real(haproxy_bin, timeout="20s")
    base.warm_up()
    watching = Watching(base.stages[1], haproxy_bin)
    p = Pipeline(
        [base.stages[0], watching, *base.stages[2:]],
        haproxy_version=base.haproxy_version,
        cache=None,
        overlap=True,
    )
    report = await p.validate(render)
    assert report.metadata.stages_skipped == [Phase.HAPROXY]
    assert [d.rule_id for d in report.errors] == ["E3004"]
    assert watching.seen, "haproxy -c was not running when schema had been judged"
    assert not _haproxy_children(haproxy_bin)
    for pid, workdir in watching.seen.items():
        assert _is_zombie_free(pid)
        assert not Path(workdir).exists()  # the sandbox directory is gone too


def _is_zombie_free(pid: int) -> bool:
    """The process is gone, or at least no longer this process's (unreaped) child."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat[stat.rindex(")") + 2 :].split()[1] != str(os.getpid())


async def test_warm_up_prepares_everything_the_first_candidate_needs(haproxy_bin: str) -> None:
    p = real(haproxy_bin)
    spent = p.warm_up()
    assert set(spent) == {"schemaMs", "haproxyMs"} and p.warmed_up
    schema = p.stages[1].engine  # type: ignore[attr-defined]
    compiled = len(schema._validators)
    report = await p.validate(render_of(GOOD, extra=[HOSTS]))
    assert report.valid
    assert len(schema._validators) == compiled  # nothing was left to compile
    assert p.warm_up().keys() == spent.keys()  # idempotent


async def test_a_failing_warm_up_is_logged_not_raised() -> None:
    @dataclass
    class Broken(FakeStage):
        def warm_up(self) -> None:
            raise OSError("no /proc here")

    p = Pipeline([Broken(Phase.SYNTAX)], haproxy_version=None, cache=None)
    with capture_logs(processors=[format_exc_info]) as logs:
        assert p.warm_up() == {"syntaxMs": pytest.approx(0.0, abs=50.0)}
    [entry] = logs
    assert (entry["event"], entry["stage"], entry["log_level"]) == (
        "stage warm-up failed",
        "syntax",
        "error",
    )
    assert "OSError: no /proc here" in entry["exception"]
    assert (await p.validate(render_of())).valid


def test_overlap_is_on_where_there_is_a_second_cpu(haproxy_bin: str) -> None:
    p = Pipeline.from_settings(ValidationSettings(), haproxy_binary=haproxy_bin)
    assert p.overlap == (max_concurrency() > 1) and list(p._window) == [1, 2]
    assert not Pipeline([], haproxy_version=None, cache=None, overlap=False).overlap


async def test_the_quickstart_with_its_rules_is_judged_the_same(
    quickstart_dir: Path, haproxy_bin: str
) -> None:
    """Through from_spec, with the quickstart's deferred rule: the real rules stage runs in
    the window too."""
    config, _ = load_config(quickstart_dir / "config.yaml")
    assert config is not None
    render = quickstart_render(quickstart_dir)
    reports = []
    for overlap in (False, True):
        p = Pipeline.from_spec(config.spec, haproxy_binary=haproxy_bin)
        p.overlap = overlap
        assert list(p._window) == [1, 2, 3]
        reports.append(await p.validate(render))
    assert reports[0].valid and Phase.RULES in reports[0].metadata.stages_run
    assert comparable(reports[1]) == comparable(reports[0])


# --- haproxy -c started at the syntax stage's gate ------------------------------------------


@dataclass
class Gated(Probe):
    """A syntax probe with a gate: its answer (or exception) and when it was asked."""

    answer: object = True

    def gate(self, ctx: StageContext) -> bool:
        self.events.append("syntax:gate")
        if isinstance(self.answer, BaseException):
            raise self.answer
        return self.answer is True


def gated(events: list[str], answer: object, **delays: float) -> list[Probe]:
    st = probes(events, **delays)
    st[0] = Gated(Phase.SYNTAX, events, delays.get("syntax", 0.0), answer=answer)
    return st


async def test_a_passing_gate_starts_haproxy_before_the_syntax_stage_ends() -> None:
    events: list[str] = []
    st = gated(events, True, syntax=0.02, haproxy=0.01)
    assert (
        await Pipeline(st, haproxy_version=None, cache=None, overlap=True).validate(render_of())
    ).valid
    assert events.index("syntax:gate") < events.index("haproxy:start")
    assert events.index("haproxy:start") < events.index("syntax:start") < events.index("syntax:end")
    # schema needs the stage's parse: it still starts only after the stage
    assert events.index("syntax:end") < events.index("schema:start")
    assert events.count("haproxy:start") == 1


@pytest.mark.parametrize("answer", [False, None, "yes", 1, RuntimeError("gate broke")])
async def test_anything_but_true_from_the_gate_waits_for_the_stage(answer: object) -> None:
    events: list[str] = []
    st = gated(events, answer, syntax=0.02, haproxy=0.01)
    report = await Pipeline(st, haproxy_version=None, cache=None, overlap=True).validate(
        render_of()
    )
    assert report.valid
    assert events.index("syntax:end") < events.index("haproxy:start")


async def test_without_overlap_the_gate_is_not_asked() -> None:
    events: list[str] = []
    st = gated(events, True)
    await Pipeline(st, haproxy_version=None, cache=None, overlap=False).validate(render_of())
    assert "syntax:gate" not in events
    assert events.index("syntax:end") < events.index("haproxy:start")


async def test_a_syntax_failure_after_the_gate_cancels_haproxy() -> None:
    events: list[str] = []
    st = gated(events, True, syntax=0.02, haproxy=5.0)
    st[0].diagnostics = [at("E2001", Phase.SYNTAX)]
    started = time.perf_counter()
    report = await Pipeline(st, haproxy_version=None, cache=None, overlap=True).validate(
        render_of()
    )
    assert time.perf_counter() - started < 2.0
    assert "haproxy:cancelled" in events and "haproxy:end" not in events
    assert not report.valid and report.metadata.stages_run == [Phase.SYNTAX]
    assert report.metadata.stages_skipped == [Phase.SCHEMA, Phase.HAPROXY, Phase.RULES]
    assert [d.rule_id for d in report.diagnostics if d.phase is Phase.HAPROXY] == ["I0003"]


@dataclass
class Cleared(Gated):
    """A gated probe that notes which phases the context lists as cleared when it runs."""

    cleared_at_run: frozenset[Phase] | None = None

    async def run(self, ctx: StageContext) -> StageOutcome:
        self.cleared_at_run = ctx.cleared
        return await super().run(ctx)


@pytest.mark.parametrize(("answer", "cleared"), [(True, {Phase.SYNTAX}), (False, set())])
async def test_the_pipeline_records_the_gates_answer_for_the_stages_run(
    answer: bool, cleared: set[Phase]
) -> None:
    events: list[str] = []
    st = probes(events)
    probe = st[0] = Cleared(Phase.SYNTAX, events, answer=answer)
    await Pipeline(st, haproxy_version=None, cache=None, overlap=True).validate(render_of())
    assert probe.cleared_at_run == frozenset(cleared)


def test_the_stage_hooks_default_to_doing_nothing() -> None:
    stage = FakeStage(Phase.SCHEMA)
    ctx = StageContext(render=render_of(), haproxy_version=None)
    stage.warm_up()  # nothing to prepare, and no error
    assert stage.input_key(ctx.render) is None
    assert stage.gate(ctx) is False


def test_the_real_gate_answers_without_touching_the_context(haproxy_bin: str) -> None:
    syntax = real(haproxy_bin).stages[0]
    ctx = StageContext(render=render_of(GOOD, extra=[HOSTS]), haproxy_version=None)
    before = dataclasses.replace(ctx)
    assert syntax.gate(ctx) is True
    assert ctx == before and ctx.cleared == frozenset()


@dataclass
class GatedFake(FakeStage):
    """A FakeStage syntax stage whose gate says True whatever it later finds."""

    def gate(self, ctx: StageContext) -> bool:
        return True


@pytest.mark.parametrize("syntax", KINDS)
async def test_fake_stages_with_a_gate_report_the_same_either_way(syntax: str) -> None:
    for schema, haproxy in itertools.product(("pass", "error"), KINDS):
        for opts in OPTIONS.values():
            reports = []
            for overlap in (False, True):
                st = fakes(schema, haproxy, "pass")
                gate = GatedFake(Phase.SYNTAX, delay=0.002)
                st[0] = behave(gate, syntax)
                p = Pipeline(st, haproxy_version="2.8.25", cache=None, overlap=overlap)
                reports.append(await p.validate(render_of(), options=opts))
            assert comparable(reports[1]) == comparable(reports[0]), (syntax, schema, haproxy)


@dataclass
class StricterSyntax(Stage):
    """The real syntax stage (and its real gate), plus one finding its full reading adds
    after the gate passed — the case of a parse rule the gate does not look at. Records which
    haproxy processes were alive when it was done."""

    inner: Any
    binary: str
    seen: dict[int, str] = field(default_factory=dict)
    phase: Phase = Phase.SYNTAX

    def fingerprint(self) -> str:
        return str(self.inner.fingerprint())

    def gate(self, ctx: StageContext) -> bool:
        return bool(self.inner.gate(ctx))

    async def run(self, ctx: StageContext) -> StageOutcome:
        outcome: StageOutcome = await self.inner.run(ctx)
        await asyncio.sleep(0.02)  # haproxy -c is loading the big pattern file meanwhile
        self.seen = _haproxy_children(self.binary)
        outcome.diagnostics.append(at("E2001", Phase.SYNTAX, line=3))
        return outcome


async def test_a_late_syntax_error_leaves_no_haproxy_process_behind(haproxy_bin: str) -> None:
    patterns = "".join(f"host{i}.example.test\n" for i in range(300_000)).encode()
    cfg = GOOD.replace(
        "    bind 127.0.0.1:18080\n",
        "    bind 127.0.0.1:18080\n    acl big hdr(host) -f maps/big.lst\n",
    )
    render = render_of(cfg, extra=[HOSTS, FileEntry("maps/big.lst", FileKind.MAP, patterns)])
    reports = []
    seen: dict[int, str] = {}
    for overlap in (False, True):
        base = real(haproxy_bin, timeout="20s")
        assert base.stages[0].gate(StageContext(render=render, haproxy_version=None))
        stricter = StricterSyntax(base.stages[0], haproxy_bin)
        p = Pipeline(
            [stricter, *base.stages[1:]],
            haproxy_version=base.haproxy_version,
            cache=None,
            overlap=overlap,
        )
        reports.append(await p.validate(render))
        if overlap:
            seen = stricter.seen
        else:
            assert not stricter.seen  # sequentially, nothing ran before the stage was done
    sequential, overlapped = reports
    assert comparable(overlapped) == comparable(sequential)
    assert overlapped.metadata.stages_run == [Phase.SYNTAX]
    assert overlapped.metadata.stages_skipped == [Phase.SCHEMA, Phase.HAPROXY]
    assert seen, "haproxy -c was not running when the syntax stage had finished"
    assert not _haproxy_children(haproxy_bin)
    for pid, workdir in seen.items():
        assert _is_zombie_free(pid)
        assert not Path(workdir).exists()


async def test_a_denied_directive_never_reaches_haproxy(haproxy_bin: str) -> None:
    """The real gate declines, so haproxy -c does not start before the stage refused."""
    cfg = GOOD.replace("    maxconn 100\n", "    maxconn 100\n    lua-load x.lua\n")
    render = render_of(cfg, extra=[HOSTS, FileEntry("x.lua", FileKind.FILE, b"-- x\n")])
    base = real(haproxy_bin)
    assert not base.stages[0].gate(StageContext(render=render, haproxy_version=None))
    stricter = StricterSyntax(base.stages[0], haproxy_bin)
    p = Pipeline(
        [stricter, *base.stages[1:]], haproxy_version=base.haproxy_version, cache=None, overlap=True
    )
    report = await p.validate(render)
    assert sorted(d.rule_id for d in report.errors) == ["E2001", "E2101"]
    assert not stricter.seen and report.metadata.stages_run == [Phase.SYNTAX]


async def test_a_passing_gate_spares_the_stage_its_second_run_of_the_checks(
    haproxy_bin: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The gate ran the policy and file-reference checks over every line they act on; the
    stage repeats them only when no gate cleared the candidate (sequentially, or declined)."""
    import controller.validation.syntax.stage as syntax_stage

    calls: list[str] = []
    real_policy = syntax_stage.check_policy  # type: ignore[attr-defined]

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append("policy")
        return real_policy(*args, **kwargs)

    monkeypatch.setattr(syntax_stage, "check_policy", counted)
    render = render_of(GOOD, extra=[HOSTS])
    reports = []
    for overlap in (False, True):
        calls.clear()
        p = real(haproxy_bin)
        p.overlap = overlap
        reports.append(await p.validate(render))
        assert calls == ([] if overlap else ["policy"])
    assert all(r.valid for r in reports)
    assert comparable(reports[1]) == comparable(reports[0])
    # A declined gate (a denied directive) leaves the checks to the stage, which reports.
    calls.clear()
    cfg = GOOD.replace("    maxconn 100\n", "    maxconn 100\n    lua-load x.lua\n")
    bad = render_of(cfg, extra=[HOSTS, FileEntry("x.lua", FileKind.FILE, b"-- x\n")])
    p = real(haproxy_bin)
    p.overlap = True
    report = await p.validate(bad)
    assert calls == ["policy"] and [d.rule_id for d in report.errors] == ["E2101"]
