"""Version tests do not hide anything from the directive policy or the file-reference rule.

``haproxy -c`` with 2.8 skips a branch under ``.if version_atleast(2.9)``, so the bytes pass
the check; a newer HAProxy loading the same bytes takes the branch and runs what it holds.
The security checks therefore read version-dependent branches as possibly active, and only
constant conditions switch lines off for them. The schema stage still sees what the
checking binary loads.
"""

from __future__ import annotations

import asyncio

import pytest

from controller.render import FileEntry, FileKind, FileSet, RenderResult
from controller.validation.schema import SchemaStage
from controller.validation.stage import StageContext
from controller.validation.syntax import parse
from controller.validation.syntax.stage import _for_any_version
from tests.validation.syntax.syntax_kit import binary_version, errors, run_haproxy, run_stage

TAIL = """\
defaults
    mode http
    timeout client 1s
    timeout server 1s
    timeout connect 1s
frontend fe
    bind 127.0.0.1:8080
"""


def config(global_body: str) -> bytes:
    return ("global\n" + global_body + TAIL).encode()


NEWER_ONLY = config(
    "    .if version_atleast(2.9)\n"
    "    lua-load files/x.lua\n"
    "    ssl-passphrase-cmd /bin/sh\n"
    "    .endif\n"
)


def denied(cfg: bytes, version: str | None) -> list[tuple[str, int | None]]:
    diags, _ = run_stage(cfg, allow=(), version=version, files={"files/x.lua": b"-- x\n"})
    return sorted(
        (d.rule_id, d.location.line if d.location else None)
        for d in errors(diags)
        if d.rule_id.startswith(("E21", "E22"))
    )


@pytest.mark.parametrize("version", ["2.6.12", "2.8.25", None])
def test_branch_for_a_newer_haproxy_is_checked(version: str | None) -> None:
    assert denied(NEWER_ONLY, version) == [("E2101", 3), ("E2103", 4)]


def test_both_sides_of_a_version_test_are_checked() -> None:
    cfg = config(
        "    .if version_atleast(2.8)\n"
        "    maxconn 100\n"
        "    .elif version_before(2.0)\n"
        "    ssl-engine rdrand\n"
        "    .else\n"
        "    insecure-fork-wanted\n"
        "    .endif\n"
    )
    # 2.8 takes the first branch; an older HAProxy would take one of the others.
    assert denied(cfg, "2.8.25") == [("E2102", 5), ("E2103", 7)]


def test_constant_conditions_still_switch_lines_off() -> None:
    cfg = config(
        "    .if 0\n"
        "    lua-load files/x.lua\n"
        "    .endif\n"
        "    .if streq(a,b)\n"
        "    ssl-engine rdrand\n"
        "    .elif 1\n"
        "    maxconn 10\n"
        "    .else\n"
        "    insecure-fork-wanted\n"
        "    .endif\n"
        "    .if 0\n"
        "    .if version_atleast(2.0)\n"
        "    setenv A b\n"
        "    .endif\n"
        "    .endif\n"
    )
    assert denied(cfg, "2.8.25") == []


def test_file_references_in_a_version_branch_are_checked() -> None:
    cfg = config(
        "    .if version_before(2.6)\n"
        "    ssl-dh-param-file /etc/ssl/dh.pem\n"
        "    .endif\n"
        "    .if version_atleast(3.0)\n"
        "    ssl-dh-param-file ../outside/dh.pem\n"
        "    .endif\n"
    )
    assert denied(cfg, "2.8.25") == [("E2201", 3), ("E2202", 6)]


def test_a_base_outside_is_refused_where_a_reference_uses_it() -> None:
    unused = config("    ca-base /etc/ssl\n    crt-base ../outside\n")
    assert denied(unused, "2.8.25") == []  # harmless: nothing is resolved against them
    used = unused.replace(
        b"bind 127.0.0.1:8080", b"bind 127.0.0.1:8443 ssl crt site.pem ca-file ca.pem"
    )
    assert denied(used, "2.8.25") == [("E2202", 10), ("E2202", 10)]


def test_later_stages_still_judge_what_this_binary_loads() -> None:
    cfg = config("    .if version_atleast(2.9)\n    not-a-keyword-before-2.9 on\n    .endif\n")
    diags, ctx = run_stage(cfg, version="2.8.25", files={})
    assert errors(diags) == []
    parsed = ctx.parsed["haproxy.cfg"]
    assert all(d.keyword != "not-a-keyword-before-2.9" for _, d in parsed.directives())
    files = FileSet.of([FileEntry("haproxy.cfg", FileKind.CONFIG, cfg)])
    schema_ctx = StageContext(render=RenderResult(files=files), haproxy_version="2.8.25")
    schema_ctx.parsed.update(ctx.parsed)
    outcome = asyncio.run(SchemaStage("2.8.25").run(schema_ctx))
    assert [d.rule_id for d in outcome.diagnostics if d.severity.rank <= 1] == []


def test_second_reading_only_for_files_with_version_tests() -> None:
    plain = "global\n    .if defined(X)\n    maxconn 1\n    .endif\n" + TAIL
    parsed, _ = parse(plain, "haproxy.cfg", haproxy_version="2.8.25")
    assert _for_any_version(parsed, plain, "haproxy.cfg", "2.8.25") is parsed
    text = NEWER_ONLY.decode()
    parsed, _ = parse(text, "haproxy.cfg", haproxy_version="2.8.25")
    again = _for_any_version(parsed, text, "haproxy.cfg", "2.8.25")
    assert again is not parsed
    assert {d.keyword for _, d in again.directives()} >= {"lua-load", "ssl-passphrase-cmd"}
    assert "lua-load" not in {d.keyword for _, d in parsed.directives()}


@pytest.mark.haproxy
def test_the_checking_binary_really_skips_the_branch(haproxy_bin: str) -> None:
    """Why this matters: the real binary accepts the bytes without ever loading the script
    (it does not even exist here), so ``haproxy -c`` alone could not have caught it."""
    assert binary_version(haproxy_bin).startswith(("2.6.", "2.8."))
    verdict = run_haproxy(haproxy_bin, NEWER_ONLY, files={})
    assert verdict.accepted, verdict.output
