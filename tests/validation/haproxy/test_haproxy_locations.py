"""Locations of message forms that used to be mapped wrongly, and sandbox-only messages, on
both real binaries (the configurations below provoke each form; the literal lines are in
test_haproxy_messages.py)."""

from __future__ import annotations

import pytest

from controller.render import FileEntry, FileKind
from controller.validation.haproxy.sandboxed import sandbox_note
from tests.validation.haproxy.haproxy_kit import check, render

BASE = """\
global
defaults
    mode http
    timeout client 10s
    timeout server 10s
    timeout connect 5s
frontend fe
    bind 127.0.0.1:8080
    default_backend be
backend be
    server s1 127.0.0.1:80
"""


@pytest.mark.haproxy
async def test_capitalised_parsing_from_the_real_binary(haproxy_bin: str) -> None:
    cfg = BASE.replace("    mode http\n", '    mode tcp\n    log-format "%tr %ci"\n')
    out = await check(haproxy_bin, render(cfg))
    [err] = [d for d in out.diagnostics if "log-format" in d.message]
    assert err.rule_id == "E4001" and err.location is not None
    assert (err.location.file, err.location.line) == ("haproxy.cfg", 4)
    assert err.template_location is not None and err.template_location.line == 104


@pytest.mark.haproxy
async def test_declared_at_from_the_real_binary(haproxy_bin: str) -> None:
    cfg = BASE.replace(
        "    default_backend be\n",
        "    acl big req.len gt 10\n    use_backend be if big\n    default_backend be\n",
    )
    out = await check(haproxy_bin, render(cfg))
    [warn] = [d for d in out.diagnostics if "L6 sample fetches" in d.message]
    assert warn.rule_id == "W4003" and warn.location is not None
    assert warn.location.line == 10  # the use_backend rule, not the frontend header (7)


@pytest.mark.haproxy
async def test_duplicate_section_points_at_the_second_definition(haproxy_bin: str) -> None:
    cfg = BASE + "resolvers r\nresolvers r\n"
    out = await check(haproxy_bin, render(cfg))
    [err] = [d for d in out.diagnostics if "same name" in d.message]
    assert err.rule_id == "E4001" and err.location is not None
    assert err.location.line == 13


@pytest.mark.haproxy
async def test_unindented_continuation_from_the_real_binary(haproxy_bin: str) -> None:
    # jwt_verify's warning ends in a newline of its own, so its "." comes on a bare line.
    cfg = BASE.replace(
        "    default_backend be\n",
        '    http-request set-var(txn.x) req.hdr(a),jwt_verify("RS256","files/k.pem")\n'
        "    default_backend be\n",
    )
    key = FileEntry("files/k.pem", FileKind.FILE, b"not a key\n")
    out = await check(haproxy_bin, render(cfg, [key]))
    [warn] = [d for d in out.diagnostics if "file not found" in d.message]
    assert warn.rule_id == "W4003" and warn.message == "file not found (files/k.pem)."
    assert warn.location is not None and warn.location.line == 9
    assert warn.template_location is not None and warn.template_location.line == 109
    assert [d.rule_id for d in out.diagnostics] == ["W4003"]


# --- messages that exist only in the sandbox -------------------------------------------------

RESOLVERS = BASE + "resolvers dns\n    # cluster DNS\n    nameserver ns1 10.96.0.10:53\n"


def test_nameserver_socket_note_finds_the_nameserver_line() -> None:
    text = "resolvers 'dns': can't connect socket for nameserver 'ns1'."
    note = sandbox_note(text, RESOLVERS)
    assert note is not None and note.line == 14
    other = RESOLVERS + "resolvers dns2\n    nameserver ns1 10.0.0.1:53\n"
    assert sandbox_note(text.replace("'dns'", "'dns2'"), other).line == 16  # type: ignore[union-attr]
    assert sandbox_note("resolvers 'dns': something else", RESOLVERS) is None


@pytest.mark.haproxy
async def test_nameserver_warning_is_info_at_the_nameserver_line(haproxy_bin: str) -> None:
    out = await check(haproxy_bin, render(RESOLVERS, template_lines={14: 7}))
    [note] = [d for d in out.diagnostics if "nameserver" in d.message]
    assert note.rule_id == "I4014"
    assert note.location is not None and note.location.line == 14
    assert note.template_location is not None and note.template_location.line == 7
    assert "no network" in note.message
    assert not [d for d in out.diagnostics if d.severity.rank <= 2]  # nothing for --strict


@pytest.mark.haproxy
async def test_strict_passes_with_a_resolvers_section(haproxy_bin: str) -> None:
    from controller.spec.models import ValidationSettings
    from controller.validation import Pipeline, ValidationOptions

    pipeline = Pipeline.from_settings(ValidationSettings(), haproxy_binary=haproxy_bin)
    report = await pipeline.validate(render(RESOLVERS), options=ValidationOptions(strict=True))
    assert report.valid, [(d.rule_id, d.message) for d in report.diagnostics]
    assert "I4014" in report.rule_ids()
