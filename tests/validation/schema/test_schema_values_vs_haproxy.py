"""Argument values: every line real haproxy rejects gets a schema finding (an error where the
rejection is one the schema can be sure of, a warning where it cannot) — and what the schema
accepts, haproxy accepts. Each line is checked by both on the same configuration text."""

from __future__ import annotations

from pathlib import Path

import pytest

from controller.validation.schema import SchemaEngine
from tests.validation.schema.schema_helpers import (
    Case,
    check_alerts,
    family_of,
    parse_cfg,
    render_cases,
    run_haproxy,
)

pytestmark = pytest.mark.haproxy

#: (section kind, line, rule the schema must report). Every one of these makes haproxy fail.
#: Unknown names are W3015/W3016 and surplus words or missing option values W3017 on purpose:
#: other builds and keywords accept what these binaries refuse (see docs/schema.md).
BAD = [
    ("defaults", "timeout server 1.5s", "E3004"),
    ("defaults", "timeout server 10S", "E3004"),
    ("defaults", "timeout server 30d", "E3004"),
    ("defaults", "timeout client -1", "E3004"),
    ("defaults", "timeout client 10 s", "W3017"),
    ("defaults", "timeout bogus 1s", "W3016"),
    ("defaults", "mode foo", "E3004"),
    ("defaults", "mode HTTP", "E3004"),
    ("defaults", "mode log", "E3004"),  # a 'log' mode backend needs 2.9 or later
    ("backend", "balance sticky", "E3004"),  # generalised in 3.0
    ("backend", "balance foo", "E3004"),
    ("backend", "balance RoundRobin", "E3004"),
    ("backend", "hash-type foo", "E3004"),
    ("backend", "http-reuse sometimes", "E3004"),
    ("backend", "server s1 127.0.0.1:80 weight 257", "E3004"),
    ("backend", "server s1 127.0.0.1:80 inter 0", "E3004"),
    ("backend", "server s1 127.0.0.1:80 inter 10x", "E3004"),
    ("backend", "server s1 127.0.0.1:80 observe layer9", "E3004"),
    ("backend", "server s1 127.0.0.1:80 check inter", "W3017"),
    ("backend", "server s1 127.0.0.1:80 chek", "W3016"),
    ("backend", "server s1", "E3005"),
    ("frontend", "bind 127.0.0.1:{port} ssl-min-ver TLSv9", "E3004"),
    ("frontend", "bind 127.0.0.1:{port} bogus-option", "W3016"),
    ("frontend", "log 127.0.0.1:514 nosuchfacility", "E3004"),
    ("frontend", "log 127.0.0.1:514 local0 loud", "E3004"),
    ("frontend", "option bogus", "W3016"),
    ("frontend", "http-request set-headr X-A b", "W3016"),
    ("frontend", "http-request set-log-level shout", "E3004"),
    ("frontend", "tcp-request content bogus", "W3016"),
    ("frontend", "capture request header Host len", "E3005"),
    ("defaults", "no option httplog", "E3005"),
    ("defaults", "no maxconn 10", "E3005"),
    ("defaults", "default option http-keep-alive", "E3005"),
    ("frontend", "default log", "E3005"),
    ("global", "tune.http.maxhdr 0", "E3004"),
    ("global", "tune.comp.maxlevel 10", "E3004"),
    ("global", "maxconm 100", "W3015"),
    ("global", "spread-checks 51", "E3004"),
    ("resolvers", "hold sometimes 10s", "E3004"),
]

#: Edge values haproxy accepts: the schema must accept them too.
GOOD = [
    ("defaults", "timeout server 0"),
    ("defaults", "timeout server 2147483647"),
    ("defaults", "timeout tunnel 24d"),
    ("defaults", "timeout client 100us"),
    ("backend", "server s1 127.0.0.1:80 weight 0"),
    ("backend", "server s1 127.0.0.1:80 weight 256 inter 1ms fall 1 rise 1"),
    ("backend", "server s1 127.0.0.1:80 check init-addr last,libc,none resolve-prefer ipv6"),
    ("backend", "balance random(3)"),
    ("backend", "balance hdr(Host)"),
    ("backend", "retries -1"),
    ("frontend", "log 127.0.0.1:514 len 1024 format rfc5424 local7 debug info"),
    ("frontend", "log global"),
    ("frontend", "no log"),
    ("defaults", "no option dontlognull"),
    ("global", "tune.http.maxhdr 32767"),
    ("global", "spread-checks 50"),
]

#: Family-specific: haproxy 2.6 mis-parses 'default option <registered option>', 2.8 accepts it.
BAD_IN = {"2.6": [("defaults", "default option dontlognull", "E3005")]}
GOOD_IN = {"2.8": [("defaults", "default option dontlognull")]}


def test_schema_rejects_what_haproxy_rejects(haproxy_bin: str, tmp_path: Path) -> None:
    fam = family_of(haproxy_bin)
    bad = BAD + BAD_IN.get(fam.name, [])
    cases = [Case(kind, line, "alert", rule) for kind, line, rule in bad]
    check_alerts(haproxy_bin, cases, tmp_path, schema=False)
    text = render_cases(cases)
    engine = SchemaEngine(fam.name)
    rules: dict[int, set[str]] = {}
    for d in engine.diagnostics(parse_cfg(text, "t.cfg"), "t.cfg"):
        assert d.location is not None and d.location.line is not None
        rules.setdefault(d.location.line, set()).add(d.rule_id)
    wrong = [
        f"{c.line}: expected {c.what}, got {sorted(rules.get(c.lineno, set()))}"
        for c in cases
        if c.what not in rules.get(c.lineno, set())
    ]
    assert not wrong, "\n".join(wrong)


def test_schema_accepts_what_haproxy_accepts(haproxy_bin: str, tmp_path: Path) -> None:
    fam = family_of(haproxy_bin)
    good = GOOD + GOOD_IN.get(fam.name, [])
    cases = [Case(kind, line, "clean", line) for kind, line in good]
    text = render_cases(cases)
    outcome = run_haproxy(haproxy_bin, text, tmp_path)
    assert outcome.rc in (0, 2), outcome.output
    noisy = [c.line for c in cases if "ALERT" in outcome.levels(c.lineno)]
    assert not noisy
    findings = SchemaEngine(fam.name).diagnostics(parse_cfg(text, "t.cfg"), "t.cfg")
    lines = {c.lineno: c.line for c in cases}
    flagged = [
        f"{lines[d.location.line]}: {d.message}"
        for d in findings
        if d.location and d.location.line in lines
    ]
    assert not flagged, "\n".join(flagged)
