"""What ``htc local`` prints for each kind of event."""

from __future__ import annotations

import io

from controller.deploy import DeployOutcome, DeployResult
from controller.diagnostics import Location, ObjectRef, Phase, make
from controller.local.console import ConsoleSink
from controller.publish import Event, EventKind
from controller.render import FileEntry, FileKind, FileSet, RenderResult
from controller.validation import Pipeline

PIPELINE = Pipeline([], haproxy_version=None, cache=None, allow_partial=True)


def files(text: str = "global\n") -> FileSet:
    return FileSet.of([FileEntry("haproxy.cfg", FileKind.CONFIG, text.encode())])


async def test_one_line_per_deploy_and_a_report_per_rejection() -> None:
    out = io.StringIO()
    sink = ConsoleSink(out)
    good = (await PIPELINE.check(RenderResult(files()))).validated
    assert good is not None
    done = DeployResult("local", DeployOutcome.DEPLOYED, good.checksum, good.checksum, True, 12.0)
    sink(Event.deployed("change", good, [done], objects=["Ingress/default/a"]))
    same = DeployResult("local", DeployOutcome.UNCHANGED, good.checksum, good.checksum)
    sink(Event.deployed("resync", good, [same]))
    lines = out.getvalue().splitlines()
    assert lines == [
        f"deployed {good.checksum[:12]} (change; Ingress/default/a): local deployed in 12 ms, "
        "0 warnings"
    ]

    bad = make("E1004", Phase.RENDER, "boom", location=Location(file="haproxy.cfg", line=1))
    verdict = await PIPELINE.check(RenderResult(files(), diagnostics=(bad,)))
    sink(
        Event.rejected(
            "change", verdict.report, objects=["Ingress/default/b"], serving=good.checksum
        )
    )
    text = out.getvalue()
    assert (
        f"rejected (change; Ingress/default/b); the last good configuration "
        f"({good.checksum[:12]}) keeps serving:" in text
    )
    assert "E1004" in text and "INVALID" in text

    refused = DeployResult(
        "local",
        DeployOutcome.ROLLED_BACK,
        good.checksum,
        "0123456789abcdef",
        diagnostics=(make("E7001", Phase.DEPLOY, "HAProxy refused"),),
    )
    sink(Event.deployed("change", good, [refused], retry_in=2.0))
    text = out.getvalue()
    assert (
        "failed (change); the last good configuration (0123456789ab) keeps serving; "
        "retrying in 2 s:" in text
    )
    assert "E7001 error [deploy] HAProxy refused" in text


async def test_nothing_claims_to_keep_serving_before_the_first_deploy() -> None:
    out = io.StringIO()
    sink = ConsoleSink(out)
    bad = make("E1004", Phase.RENDER, "boom")
    verdict = await PIPELINE.check(RenderResult(files(), diagnostics=(bad,)))
    sink(Event.rejected("startup", verdict.report))
    good = (await PIPELINE.check(RenderResult(files()))).validated
    assert good is not None
    never_started = DeployResult(
        "local",
        DeployOutcome.FAILED,
        good.checksum,
        None,
        diagnostics=(make("E7008", Phase.DEPLOY, "HAProxy exited while starting"),),
    )
    sink(Event.deployed("startup", good, [never_started], retry_in=1.0))
    text = out.getvalue()
    assert "keeps serving" not in text
    assert "rejected (startup); no validated configuration is serving yet:" in text
    assert "failed (startup); no validated configuration is serving yet; retrying in 1 s:" in text


async def test_a_deploy_with_warnings_prints_them() -> None:
    out = io.StringIO()
    warn = make("W3003", Phase.SCHEMA, "deprecated keyword", location=Location(file="haproxy.cfg"))
    verdict = await PIPELINE.check(RenderResult(files(), diagnostics=(warn,)))
    assert verdict.validated is not None
    done = DeployResult(
        "local", DeployOutcome.DEPLOYED, verdict.validated.checksum, None, True, 3.0
    )
    ConsoleSink(out)(Event.deployed("change", verdict.validated, [done]))
    lines = out.getvalue().splitlines()
    assert lines[0].endswith("1 warning")
    assert lines[1] == "  W3003 warning [schema] haproxy.cfg: deprecated keyword"


async def test_hostile_names_and_messages_are_escaped() -> None:
    """A name carrying an escape sequence and a newline must not clear the screen or forge a
    line of its own (the audit's reproduction: a fake "deployed" line under a rejection)."""
    out = io.StringIO()
    sink = ConsoleSink(out)
    evil = "x\x1b[2J\x1b[31m\ndeployed 000000000000 (change)\u2028\x9b"
    bad = make(
        "E1004",
        Phase.RENDER,
        f"value {evil}",
        location=Location(file="haproxy.cfg", line=1),
        object=ObjectRef(kind="Ingress", namespace="default", name=evil),
    )
    render = RenderResult(files("global\n  # \x1b]0;title\x07\n"), diagnostics=(bad,))
    verdict = await PIPELINE.check(render)
    sink(Event.rejected("change", verdict.report, render=render, objects=[f"Ingress/{evil}"]))
    sink(Event(EventKind.RUNTIME, "haproxy", message=f"alert {evil}", diagnostics=(bad,)))
    sink.inputs([make("E8002", Phase.SPEC, evil, location=Location(file=f"{evil}.yaml"))])
    text = out.getvalue()
    for raw in ("\x1b", "\x9b", "\u2028", "\x07"):
        assert raw not in text
    assert "\\x1b[2J" in text and "\\u2028" in text and "\\x9b" in text
    assert not any(line.startswith("deployed") for line in text.splitlines())
    assert "x\\x1b[2J\\x1b[31m\\ndeployed 000000000000" in text


async def test_a_deploy_after_a_rejection_says_valid_again() -> None:
    out = io.StringIO()
    sink = ConsoleSink(out)
    good = (await PIPELINE.check(RenderResult(files()))).validated
    assert good is not None
    bad = make("E1004", Phase.RENDER, "boom", location=Location(file="haproxy.cfg", line=1))
    verdict = await PIPELINE.check(RenderResult(files(), diagnostics=(bad,)))
    sink(Event.rejected("change", verdict.report, serving=good.checksum))
    # the fix restores the bytes already running: HAProxy sees no change, the reader must
    same = DeployResult("local", DeployOutcome.UNCHANGED, good.checksum, good.checksum)
    sink(Event.deployed("change", good, [same], objects=["Ingress/default/b"]))
    sink(Event.deployed("resync", good, [same]))  # and only once
    lines = out.getvalue().splitlines()
    assert lines[-1] == f"valid again: {good.checksum[:12]} serving (change; Ingress/default/b)"
    assert sum(line.startswith("valid again") for line in lines) == 1
