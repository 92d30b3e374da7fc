"""``SchemaStage`` as the pipeline sees it: the Stage protocol, ``ctx.parsed`` in, diagnostics
with rendered and template locations out."""

from __future__ import annotations

from controller.diagnostics import Phase
from controller.validation.schema import SchemaStage
from controller.validation.stage import Stage, StageContext
from tests.validation.schema.schema_helpers import parse_cfg, render_result

TEXT = "global\n    maxconm 100\nbackend b\n    server s 127.0.0.1:80 weight 999\n"


def _ctx(text: str = TEXT, version: str | None = None) -> StageContext:
    ctx = StageContext(render=render_result(text), haproxy_version=version)
    ctx.parsed["haproxy.cfg"] = parse_cfg(text)
    return ctx


async def test_stage_reports_every_parsed_config_with_locations() -> None:
    stage: Stage = SchemaStage("2.8")
    assert stage.phase is Phase.SCHEMA
    outcome = await stage.run(_ctx())
    got = [
        (d.rule_id, d.phase, d.location.line if d.location else None) for d in outcome.diagnostics
    ]
    assert got == [("W3015", Phase.SCHEMA, 2), ("E3004", Phase.SCHEMA, 4)]
    tl = outcome.diagnostics[1].template_location
    assert tl is not None and (tl.template, tl.line) == ("haproxy.cfg.j2", 104)
    assert outcome.budget is None


async def test_clean_config_gives_no_findings() -> None:
    outcome = await SchemaStage("2.8.25").run(_ctx("backend b\n    server s 127.0.0.1:80 check\n"))
    assert outcome.diagnostics == []


async def test_version_without_family_warns_on_every_run() -> None:
    stage = SchemaStage("2.9.4")
    assert stage.family == "2.8"
    for _ in range(2):
        outcome = await stage.run(_ctx("global\n    maxconn 1\n"))
        assert [d.rule_id for d in outcome.diagnostics] == ["W3010"]


async def test_family_and_binary_disagreeing_is_a_warning() -> None:
    outcome = await SchemaStage("2.6").run(_ctx("global\n    maxconn 1\n", version="2.8.25"))
    (d,) = outcome.diagnostics
    assert d.rule_id == "W3010" and "2.8.25" in d.message


def test_fingerprint_is_stable_and_covers_family_and_overlays() -> None:
    a = SchemaStage("2.8").fingerprint()
    assert a == SchemaStage("2.8.25").fingerprint()
    assert a != SchemaStage("2.6").fingerprint()
    overlay = {
        "definitions": {
            "backend": {"properties": {"mode": {"properties": {"value": {"enum": ["http"]}}}}}
        }
    }
    assert a != SchemaStage("2.8", [overlay]).fingerprint()


async def test_an_internal_failure_becomes_a_diagnostic_not_a_crash() -> None:
    stage = SchemaStage("2.8")

    def boom(*args: object, **kwargs: object) -> list[object]:
        raise RuntimeError("simulated bug")

    stage.engine.diagnostics = boom  # type: ignore[method-assign, assignment]
    outcome = await stage.run(_ctx())
    (d,) = outcome.diagnostics
    assert d.rule_id == "F0001" and "simulated bug" in d.message
