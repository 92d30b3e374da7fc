"""File references must resolve inside the file set, the way HAProxy resolves them."""

from __future__ import annotations

import pytest

from controller.render import FileEntry, FileKind, FileSet
from controller.validation.syntax import Need, check_file_refs, file_references, filerefs, parse

FILES = {
    "maps/hosts.map": FileKind.MAP,
    "maps/blocked.lst": FileKind.MAP,
    "certs/site.pem": FileKind.CERT,
    "certs/ca.pem": FileKind.CERT,
    "certs/crl.pem": FileKind.CERT,
    "certs/dir/a.pem": FileKind.CERT,
    "certs/site.crtlist": FileKind.CERT,
    "files/503.http": FileKind.FILE,
    "files/x.lua": FileKind.FILE,
    "files/spoe.conf": FileKind.FILE,
}
CRT_LIST = (
    b"# comment\nsite.pem [alpn h2 ca-file ca.pem crl-file crl.pem] example.com\n\nmissing.pem\n"
)


def fileset(config: str, extra: dict[str, bytes] | None = None) -> FileSet:
    entries = [FileEntry("haproxy.cfg", FileKind.CONFIG, config.encode())]
    for path, kind in FILES.items():
        content = CRT_LIST if path.endswith(".crtlist") else b"x\n"
        entries.append(FileEntry(path, kind, content))
    for path, content in (extra or {}).items():
        entries.append(FileEntry(path, FileKind.FILE, content))
    return FileSet.of(entries)


def check(config: str, extra: dict[str, bytes] | None = None) -> list[tuple[str, str, int | None]]:
    parsed, diags = parse(config, "haproxy.cfg")
    assert [d for d in diags if d.rule_id.startswith("E")] == []
    found = check_file_refs(parsed, fileset(config, extra))
    return [(d.rule_id, d.location.file, d.location.line) for d in found if d.location]


GLOBAL = "global\n    crt-base certs\n    ca-base certs\n"


@pytest.mark.parametrize(
    "line",
    [
        "frontend f\n    errorfile 503 files/503.http",
        "http-errors e\n    errorfile 503 files/503.http",
        "frontend f\n    acl a src -f maps/blocked.lst -f maps/hosts.map",
        "frontend f\n    acl a src -i -m ip -f maps/blocked.lst",
        "frontend f\n    acl a req.hdr(host) -M -f maps/hosts.map",
        "frontend f\n    http-request deny if { src -f maps/blocked.lst }",
        "frontend f\n    use_backend %[req.hdr(host),lower,map(maps/hosts.map,be)]",
        "frontend f\n    http-request set-var(txn.x) req.hdr(host),map_dom(maps/hosts.map)",
        "frontend f\n    http-request set-var(txn.x) req.hdr(host),map_str_int(maps/hosts.map,0)",
        "frontend f\n    http-request return status 200 file files/503.http if TRUE",
        "frontend f\n    http-request return status 200 content-type file lf-file files/503.http",
        "frontend f\n    http-request deny deny_status 400 errorfile files/503.http",
        "frontend f\n    http-error status 503 errorfile files/503.http",
        "frontend f\n    bind :443 ssl crt site.pem ca-file ca.pem crl-file crl.pem verify optional",
        "frontend f\n    bind :443 ssl crt dir",
        "frontend f\n    bind :443 ssl crt ./site.pem",
        "frontend f\n    bind :443 ssl crt-list certs/site.crtlist",
        "backend b\n    server crt 127.0.0.1:443 ssl crt site.pem ca-file @system-ca",
        "backend b\n    server s 127.0.0.1:443 cookie crt ssl ca-file ca.pem",
        "backend b\n    default-server ssl ca-file ca.pem",
        "backend b\n    server-template s 3 127.0.0.1:443 ssl crt site.pem",
        "backend b\n    filter spoe engine x config files/spoe.conf",
        "backend b\n    server-state-file-name use-backend-name",
        "backend b\n    server-state-file-name state/b.state",
        "frontend f\n    http-request set-var(txn.x) req.hdr(a),jwt_verify(RS256,certs/site.pem)",
        'frontend f\n    http-request deny unless { req.hdr(a),jwt_verify("ES256","site.pem") 1 }',
        'frontend f\n    http-response set-header x "%[var(txn.b),jwt_verify(txn.a,certs/ca.pem)]"',
        "frontend f\n    http-request set-var(txn.x) \"req.hdr(a),map('maps/hosts.map',be)\"",
        "global\n    wurfl-patch-file files/x.lua files/spoe.conf",
        "global\n    stats-file state/haproxy.stats",
    ],
)
def test_resolved_inside_the_file_set(line: str) -> None:
    config = GLOBAL + line + "\n"
    found = [
        (r, f) for r, f, _ in check(config) if f == "haproxy.cfg"
    ]  # (the crt-list has its own)
    assert found == [], file_references(parse(config, "h")[0])


@pytest.mark.parametrize(
    ("line", "rule"),
    [
        ("frontend f\n    errorfile 503 /etc/haproxy/errors/503.http", "E2201"),
        ("frontend f\n    acl a src -f /dev/null", "E2201"),
        ("frontend f\n    errorfile 503 files/../files/503.http", "E2202"),
        ("frontend f\n    errorfile 503 ../secret", "E2202"),
        ("frontend f\n    errorfile 503 files/missing.http", "E2203"),
        ("frontend f\n    acl a src -f maps/missing.lst", "E2203"),
        ("frontend f\n    http-request deny if { src -f /etc/hosts }", "E2201"),
        ("frontend f\n    use_backend %[req.hdr(host),map(/etc/passwd)]", "E2201"),
        ("frontend f\n    use_backend %[req.hdr(host),map(maps/nope.map,be)]", "E2203"),
        ("frontend f\n    http-request return status 200 file /etc/shadow", "E2201"),
        ("frontend f\n    bind :443 ssl crt certs/site.pem", "E2203"),  # crt-base applies
        ("frontend f\n    bind :443 ssl crt missing.pem", "E2203"),
        ("frontend f\n    bind :443 ssl crt-list site.crtlist", "E2203"),  # crt-base does not
        ("frontend f\n    bind :443 ssl crt /etc/ssl/private/key.pem", "E2201"),
        ('frontend f\n    errorfile 503 "${ERRDIR}/503.http"', "E2204"),
        ("backend b\n    server s 127.0.0.1:443 ssl ca-file ../ca.pem", "E2202"),
        ("backend b\n    server-state-file-name /var/lib/state", "E2201"),
        (
            'frontend f\n    http-request set-var(txn.x) req.hdr(a),jwt_verify("RS256","/etc/passwd")',
            "E2201",
        ),
        ("frontend f\n    http-request set-var(txn.x) req.hdr(a),jwt_verify(RS256,../x)", "E2202"),
        (
            "frontend f\n    use_backend %[req.hdr(a),jwt_verify(txn.alg,certs/missing.pem)]",
            "E2203",
        ),
        # HAProxy opens the key whatever the algorithm, so an HMAC secret must be a file too.
        ("frontend f\n    use_backend %[req.hdr(a),jwt_verify(HS256,secret)]", "E2203"),
        (
            'frontend f\n    http-request set-var(txn.x) "req.hdr(a),jwt_verify(RS256,${KEY})"',
            "E2204",
        ),
        ('frontend f\n    http-request set-var(txn.x) "req.hdr(${H}),map(/etc/passwd)"', "E2201"),
        # A quoted comma or bracket is part of the path HAProxy opens, not its end.
        (
            "frontend f\n    http-request set-var(txn.x) \"req.hdr(a),map('maps/hosts.map,/../../x')\"",
            "E2202",
        ),
        ("frontend f\n    use_backend \"%[req.hdr(a),map('maps/hosts.map]x,/../../x')]\"", "E2202"),
        (
            'frontend f\n    use_backend \'%[req.hdr(a),jwt_verify(RS256,"certs/site.pem\\",/../x")]\'',
            "E2202",
        ),
        ("global\n    wurfl-patch-file files/x.lua /usr/share/wurfl/patch.xml", "E2201"),
        ("global\n    stats-file /var/lib/haproxy/stats", "E2201"),
    ],
)
def test_refused(line: str, rule: str) -> None:
    found = check(GLOBAL + line + "\n")
    assert [r for r, _, _ in found] == [rule]
    assert found[0][2] == 5


def test_global_path_directives() -> None:
    config = (
        "global\n"
        "    lua-load files/x.lua\n"
        "    lua-load-per-thread /usr/share/x.lua\n"
        "    h1-case-adjust-file files/missing\n"
        "    ssl-dh-param-file certs/site.pem\n"
        "    issuers-chain-path certs/dir\n"
        "    server-state-file state/global.state\n"
        "    httpclient.ssl.ca-file @system-ca\n"
    )
    assert check(config) == [
        ("E2201", "haproxy.cfg", 3),
        ("E2203", "haproxy.cfg", 4),
    ]


def test_bases_must_stay_inside() -> None:
    config = "global\n    crt-base /etc/ssl\n    ca-base ../ca\nfrontend f\n    bind :443 ssl crt site.pem ca-file ca.pem\n"
    # the bases alone are harmless; each reference resolved against one names it
    assert [(r, line) for r, _, line in check(config)] == [("E2202", 5), ("E2202", 5)]
    parsed, _ = parse(config, "haproxy.cfg")
    messages = [d.message for d in check_file_refs(parsed, fileset(config))]
    assert "'crt-base /etc/ssl' at line 2: absolute path" in messages[0]
    assert "'ca-base ../ca' at line 3" in messages[1]


def test_default_path() -> None:
    base = "frontend f\n    errorfile 503 files/503.http\n"
    assert check("global\n    default-path config\n" + base) == []
    assert check("global\n    default-path current\n" + base) == []
    assert [r for r, _, _ in check("global\n    default-path parent\n" + base)] == [
        "E2202",
        "E2202",
    ]
    assert [r for r, _, _ in check("global\n    default-path origin /srv\n" + base)] == [
        "E2201",
        "E2202",
    ]
    moved = "global\n    default-path origin files\nfrontend f\n    errorfile 503 503.http\n"
    assert check(moved) == []


def test_crt_list_entries_are_checked_in_the_crt_list() -> None:
    config = GLOBAL + "frontend f\n    bind :443 ssl crt-list certs/site.crtlist\n"
    assert check(config) == [("E2203", "certs/site.crtlist", 4)]


def test_crt_store_bases(tmp_path: object) -> None:
    config = (
        "crt-store web\n"
        "    crt-base certs\n"
        "    key-base certs\n"
        "    load crt site.pem key ca.pem alias site\n"
        "    load crt missing.pem\n"
        "frontend f\n"
        "    bind :443 ssl crt @web/site\n"
    )
    assert check(config) == [("E2203", "haproxy.cfg", 5)]


def test_references_report_how_they_resolve() -> None:
    parsed, _ = parse(GLOBAL + "frontend f\n    bind :443 ssl crt site.pem crt-list x.lst\n", "h")
    refs = file_references(parsed)
    assert [(r.option, r.candidates, r.need) for r in refs] == [
        ("crt", ("certs/site.pem",), Need.FILE_OR_DIR),
        ("crt-list", ("x.lst",), Need.FILE),
    ]


def test_runtime_paths_are_not_file_references() -> None:
    config = (
        "global\n    stats socket /run/haproxy.sock\n    pidfile /run/haproxy.pid\n"
        "    chroot /var/empty\n    log /dev/log local0\n    unix-bind prefix /run\n"
        "fcgi-app php\n    docroot /var/www\n"
        "frontend f\n    errorloc 503 https://example.com/down\n"
        "    http-request set-map(maps/runtime.map) %[src] 1\n"
    )
    assert check(config) == []


def test_conditional_branches_are_checked_too() -> None:
    config = "global\n.if defined(X)\n    lua-load /tmp/evil.lua\n.endif\n"
    assert [r for r, _, _ in check(config)] == ["E2201"]


def test_repeated_checks_agree() -> None:
    """Sections without references are remembered and skipped; bases must still apply."""
    config = (
        GLOBAL
        + "backend b\n    server s 1.2.3.4:80\nfrontend f\n    bind :443 ssl crt certs/site.pem\n"
    )
    first = check(config)
    assert first == check(config) == check(config) == [("E2203", "haproxy.cfg", 7)]


def test_jwt_verify_keys_are_reported_with_directive_and_line() -> None:
    config = GLOBAL + (
        "frontend f\n"
        '    http-request set-var(txn.x) req.hdr(a),jwt_verify("RS256","/etc/passwd")\n'
        "    http-request deny unless { req.hdr(a),jwt_verify(RS256,../../key.pem) -m int 1 }\n"
        "    http-request set-var(txn.y) req.hdr(a),jwt_verify(RS256,certs/site.pem)\n"
    )
    parsed, _ = parse(config, "haproxy.cfg")
    found = check_file_refs(parsed, fileset(config))
    assert [(d.rule_id, d.location.line if d.location else 0) for d in found] == [
        ("E2201", 5),
        ("E2202", 6),
    ]
    assert "'http-request jwt_verify()' '/etc/passwd' at line 5" in found[0].message
    refs = [r for r in file_references(parsed) if r.option == "jwt_verify()"]
    assert [r.candidates for r in refs][-1] == ("certs/certs/site.pem", "certs/site.pem")


@pytest.mark.parametrize(
    ("text", "args"),
    [
        ("maps/a.map)", ["maps/a.map"]),
        ("maps/a.map,be),lower", ["maps/a.map", "be"]),
        ("'a,b')", ["a,b"]),
        ('"a)b",\'c"d\')', ["a)b", 'c"d']),
        ('"a\\",b")', ['a",b']),
        ("a\\ b\\\\c)", ["a b\\c"]),
        ("a\\,b)", ["a\\", "b"]),  # a comma is not escaped: HAProxy opens 'a\\'
        ("a\\)b)", ["a\\"]),
        ("'a\\,b')", ["a\\,b"]),  # no escapes inside single quotes
        ("a\\qb)", ["a\\qb"]),  # a lone backslash is kept
        (" a ,b)", [" a ", "b"]),  # blanks are kept
        ("a,'b", ["a", "b"]),  # unterminated
    ],
)
def test_converter_arguments_are_read_like_haproxy(text: str, args: list[str]) -> None:
    assert filerefs._converter_args(text, 0) == args
