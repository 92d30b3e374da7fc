"""What ``htc local`` prints for each kind of event."""

from __future__ import annotations

import io

from controller.deploy import DeployOutcome, DeployResult
from controller.diagnostics import Location, Phase, make
from controller.local.console import ConsoleSink
from controller.publish import Event
from controller.render import FileEntry, FileKind, FileSet, RenderResult
from controller.validation import Pipeline


async def test_one_line_per_deploy_and_a_report_per_rejection() -> None:
    out = io.StringIO()
    sink = ConsoleSink(out)
    files = FileSet.of([FileEntry("haproxy.cfg", FileKind.CONFIG, b"global\n")])
    pipeline = Pipeline([], haproxy_version=None, cache=None)
    good = (await pipeline.check(RenderResult(files))).validated
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
    verdict = await pipeline.check(RenderResult(files, diagnostics=(bad,)))
    sink(Event.rejected("change", verdict.report, objects=["Ingress/default/b"]))
    text = out.getvalue()
    assert (
        "rejected (change; Ingress/default/b); the last good configuration keeps serving:" in text
    )
    assert "E1004" in text and "INVALID" in text

    refused = DeployResult(
        "local",
        DeployOutcome.ROLLED_BACK,
        good.checksum,
        "old",
        diagnostics=(make("E7001", Phase.DEPLOY, "HAProxy refused"),),
    )
    sink(Event.deployed("change", good, [refused]))
    assert "failed (change); the last good configuration keeps serving" in out.getvalue()
    assert "E7001 error [deploy] HAProxy refused" in out.getvalue()


def test_input_problems_appear_and_disappear() -> None:
    out = io.StringIO()
    sink = ConsoleSink(out)
    problem = make("E8002", Phase.SPEC, "bad yaml", location=Location(file="a.yaml", line=3))
    sink.inputs([problem])
    sink.inputs([problem])  # unchanged: printed once
    sink.inputs([])
    assert out.getvalue().splitlines() == [
        "input files: 1 problem(s)",
        "  E8002 error [spec] a.yaml:3: bad yaml",
        "input files: all problems fixed",
    ]
