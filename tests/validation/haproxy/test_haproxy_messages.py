"""Message parsing and mapping on the forms HAProxy prints, including ones hard to provoke.

Most forms are also exercised end-to-end against both binaries in test_haproxy_stage.py; the
lines here cover older releases' date prefix, out-of-memory artefacts and a failed exit with
no output at all, which real runs do not produce on demand.
"""

from __future__ import annotations

from controller.render import FileEntry, FileKind, FileSet
from controller.validation.haproxy.messages import Level, parse_output
from controller.validation.haproxy.redact import Redactor
from controller.validation.haproxy.stage import interpret
from controller.validation.sandbox import SandboxResult


def _result(rc: int, stderr: str = "", stdout: str = "") -> SandboxResult:
    return SandboxResult(rc, stdout, stderr, False, 1.0, "/tmp/htc-sandbox-x/d")


def test_levels_contexts_and_locations() -> None:
    text = (
        "[ALERT]    (7) : config : parsing [haproxy.cfg:12] : unknown keyword 'x'\n"
        "[WARNING]  (7) : config : [haproxy.cfg:6] : 'server b/s2' : could not resolve\n"
        "[ALERT]    (7) : config : http frontend 'f' (haproxy.cfg:6) uses backend 'b' (haproxy.cfg:11)\n"
        "[NOTICE]   (7) : haproxy version is 2.8.25\n"
        "[ALERT] 123/456789 (7) : parsing [old.cfg:3] : date-prefixed form\n"
        "[DIAG]     (7) : config : something odd\n"
        "[WARNING]  (7) : config : parsing [haproxy.cfg:244]: 'tune.x' is deprecated\n"
    )
    msgs = parse_output(text)
    assert [m.level for m in msgs] == [
        Level.ALERT,
        Level.WARNING,
        Level.ALERT,
        Level.NOTICE,
        Level.ALERT,
        Level.DIAG,
        Level.WARNING,
    ]
    assert (msgs[0].file, msgs[0].line, msgs[0].parsing) == ("haproxy.cfg", 12, True)
    assert msgs[0].text == "unknown keyword 'x'" and msgs[0].context == "config"
    assert (msgs[1].file, msgs[1].line, msgs[1].parsing) == ("haproxy.cfg", 6, False)
    assert (msgs[2].file, msgs[2].line) == ("haproxy.cfg", 6)  # the first inline location
    assert (msgs[4].file, msgs[4].line) == ("old.cfg", 3)
    assert (msgs[6].file, msgs[6].line, msgs[6].text) == (
        "haproxy.cfg",
        244,
        "'tune.x' is deprecated",
    )


def test_capitalised_parsing_prefix_is_a_parser_location() -> None:
    [msg] = parse_output(
        "[ALERT]    (7) : config : Parsing [haproxy.cfg:7]: failed to parse log-format : "
        "format variable 'tr' is reserved for HTTP mode.\n"
    )
    assert (msg.file, msg.line, msg.parsing) == ("haproxy.cfg", 7, True)
    assert msg.text.startswith("failed to parse log-format")


def test_declared_at_is_the_location_when_nothing_else_is() -> None:
    [l6, dup] = parse_output(
        "[WARNING]  (7) : config : Proxy 'fe': L6 sample fetches ignored on HTTP proxies "
        "(declared at haproxy.cfg:10).\n"
        "[ALERT]    (7) : config : Parsing [haproxy.cfg:13]: resolvers 'r' has same name as "
        "another resolvers (declared at haproxy.cfg:12).\n"
    )
    assert (l6.file, l6.line) == ("haproxy.cfg", 10)
    # After a parsing prefix, "declared at" names the first definition, not the offender.
    assert (dup.file, dup.line, dup.parsing) == ("haproxy.cfg", 13, True)


def test_continuations_and_stray_output() -> None:
    text = (
        "hello from lua\n"
        "[WARNING]  (7) : config : missing timeouts for frontend 'f'.\n"
        "   | While not properly invalid,\n"
        "   | you will certainly encounter problems.\n"
        "(null)(null)[ALERT]    (7) : config : (null)out of memory.\n"
    )
    msgs = parse_output(text)
    assert msgs[0].level is Level.OUTPUT and msgs[0].text == "hello from lua"
    assert msgs[1].full_text.endswith(
        "While not properly invalid, you will certainly encounter problems."
    )
    assert msgs[2].level is Level.ALERT and msgs[2].text == "out of memory."


def test_exit_status_is_authoritative() -> None:
    silent = interpret(_result(1), Redactor(None))
    assert [d.rule_id for d in silent] == ["E4007"]
    killed = interpret(_result(-11), Redactor(None))
    assert "signal 11" in killed[0].message
    only_summary = interpret(
        _result(1, "[ALERT]    (7) : config : Fatal errors found in configuration.\n"),
        Redactor(None),
    )
    assert [d.rule_id for d in only_summary] == ["I4005", "E4007"]


def test_alert_on_a_passing_check_is_a_warning() -> None:
    out = interpret(_result(0, "[ALERT]    (7) : config : odd but fine\n"), Redactor(None))
    assert [d.rule_id for d in out] == ["W4010"]


def test_redactor_removes_sandbox_paths_pem_blocks_and_known_key_runs() -> None:
    key = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7VJTUt9Us8cKj"
    files = FileSet.of(
        [
            FileEntry("haproxy.cfg", FileKind.CONFIG, b"global\n"),
            FileEntry("certs/a.pem", FileKind.CERT, f"-----BEGIN X-----\n{key}\n".encode()),
        ]
    )
    r = Redactor("/tmp/htc-sandbox-abc/d", files)
    assert r("open /tmp/htc-sandbox-abc/d/maps/x.map") == "open maps/x.map"
    assert r("cwd /tmp/htc-sandbox-abc/d") == "cwd ."
    assert key[10:40] not in r(f"bad line '{key[10:40]}'")
    assert "BEGIN" not in r("-----BEGIN RSA PRIVATE KEY-----\nabc\n-----END RSA PRIVATE KEY-----")
    assert r("plain words stay as they are") == "plain words stay as they are"
