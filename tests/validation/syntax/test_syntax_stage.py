"""SyntaxStage as the pipeline uses it."""

from __future__ import annotations

from controller.diagnostics import Phase, TemplateLocation
from controller.render import FileEntry, FileKind, FileSet, RenderResult, SourceMap
from controller.validation.stage import Stage, StageContext
from controller.validation.syntax import SyntaxStage

CFG = b"""global
    lua-load files/x.lua
frontend f
    bind 127.0.0.1:80
    errorfile 503 files/missing.http
    http-request set-header X "unterminated
"""


def context(config: bytes = CFG, source_map: SourceMap | None = None) -> StageContext:
    files = FileSet.of(
        [
            FileEntry("haproxy.cfg", FileKind.CONFIG, config),
            FileEntry("files/x.lua", FileKind.FILE, b"-- lua\n"),
            FileEntry("maps/not-a-config.map", FileKind.MAP, b'a "unterminated\n'),
        ]
    )
    return StageContext(render=RenderResult(files=files, source_map=source_map or SourceMap()))


async def test_run_reports_parse_policy_and_file_problems() -> None:
    stage = SyntaxStage()
    ctx = context()
    outcome = await stage.run(ctx)
    got = [(d.rule_id, d.location.line if d.location else None) for d in outcome.diagnostics]
    assert got == [("E2001", 6), ("E2101", 2), ("E2203", 5)]
    assert all(d.phase is Phase.SYNTAX for d in outcome.diagnostics)
    assert list(ctx.parsed) == ["haproxy.cfg"]  # only config files are parsed
    assert [s.keyword for s in ctx.parsed["haproxy.cfg"].sections] == ["global", "frontend"]
    assert outcome.budget is None and set(outcome.extra_timings) == {
        "syntaxParseMs",
        "syntaxChecksMs",
    }


async def test_allow_list() -> None:
    outcome = await SyntaxStage(allow_directives=["lua-load"]).run(context())
    assert "E2101" not in [d.rule_id for d in outcome.diagnostics]


async def test_template_locations_come_from_the_source_map() -> None:
    where = TemplateLocation(template="haproxy.cfg.j2", line=42)
    source_map = SourceMap({"haproxy.cfg": (None, where, None, None, where, where)})
    outcome = await SyntaxStage().run(context(source_map=source_map))
    by_rule = {d.rule_id: d.template_location for d in outcome.diagnostics}
    assert by_rule == {"E2001": where, "E2101": where, "E2203": where}


async def test_unknown_allow_names_are_warned_about() -> None:
    outcome = await SyntaxStage(allow_directives=["lua_load"]).run(context(b"global\n"))
    assert [d.rule_id for d in outcome.diagnostics] == ["W2019"]


async def test_bad_bytes_are_a_report_not_a_crash() -> None:
    outcome = await SyntaxStage().run(context(b'global\n    \xff\xfe \x00\x01 "\xc3\n'))
    assert [d.rule_id for d in outcome.diagnostics] == ["E2007"]


def test_fingerprint_follows_the_allow_list() -> None:
    a, b = SyntaxStage(), SyntaxStage(allow_directives=["lua-load"])
    assert a.fingerprint() == SyntaxStage([]).fingerprint() != b.fingerprint()
    assert SyntaxStage(["a", "b"]).fingerprint() == SyntaxStage(["b", "a"]).fingerprint()


def test_implements_the_stage_protocol() -> None:
    stage: Stage = SyntaxStage()
    assert stage.phase is Phase.SYNTAX
