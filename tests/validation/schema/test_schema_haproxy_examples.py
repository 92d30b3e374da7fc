"""The catalog's claims, checked line by line against both real haproxy binaries.

Every keyword example is placed in each section kind: where the schema says "allowed",
haproxy must accept it silently (or warn, when the schema says "deprecated"); where the schema
says "ignored here" haproxy must warn; where it says "not allowed" or "removed" haproxy must
refuse it. Option examples are generated for every ``bind``/``server`` option the same way.
This is what backs the *core* keywords, which ``haproxy -dKall`` does not list.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from controller.validation.schema.catalog import Family, OptionEntry
from tests.validation.schema.schema_helpers import (
    Case,
    check_alerts,
    check_cases,
    family_features_ok,
    family_of,
    features_of,
    proxy_placements,
    sections_of,
)

pytestmark = pytest.mark.haproxy


def _cases(fam: Family, feats: frozenset[str], mode: str) -> list[Case]:
    cases: list[Case] = []
    for group, specs in fam.keywords.items():
        for spec in specs.values():
            if not spec.examples or not family_features_ok(spec.feature, set(feats)):
                continue
            removed = spec.removed is not None
            if (mode == "removed") != removed:
                continue
            expect_ok = "warn" if spec.deprecated else "clean"
            for example in spec.examples:
                if group != "proxy":
                    if mode in ("allowed", "removed"):
                        for kind in sections_of(fam, group):
                            expect = "alert" if removed else expect_ok
                            cases.append(Case(kind, example, expect, spec.key))
                    continue
                for kind, named, placement in proxy_placements(spec):
                    if mode == "removed":
                        if placement == "ok":
                            cases.append(Case(kind, example, "alert", spec.key, named))
                        continue
                    if mode == "allowed" and placement == "ok":
                        cases.append(Case(kind, example, expect_ok, spec.key, named))
                    elif mode == "misplaced" and placement != "ok":
                        expect = "alert" if placement == "error" else "warn"
                        cases.append(Case(kind, example, expect, spec.key, named))
    return cases


def test_allowed_examples_are_accepted(haproxy_bin: str, tmp_path: Path) -> None:
    fam = family_of(haproxy_bin)
    cases = _cases(fam, features_of(haproxy_bin), "allowed")
    assert len(cases) > 400
    check_cases(haproxy_bin, cases, tmp_path)


def test_misplaced_examples_warn_or_fail_as_the_schema_says(
    haproxy_bin: str, tmp_path: Path
) -> None:
    fam = family_of(haproxy_bin)
    cases = _cases(fam, features_of(haproxy_bin), "misplaced")
    assert len(cases) > 150
    warn = [c for c in cases if c.expect == "warn"]
    alert = [c for c in cases if c.expect == "alert"]
    check_cases(haproxy_bin, warn, tmp_path, strict=False)
    check_alerts(haproxy_bin, alert, tmp_path)


def test_removed_examples_are_rejected(haproxy_bin: str, tmp_path: Path) -> None:
    fam = family_of(haproxy_bin)
    cases = _cases(fam, features_of(haproxy_bin), "removed")
    assert len(cases) >= 20
    check_alerts(haproxy_bin, cases, tmp_path)


#: Sample values for string options; options whose meaning needs files, certificates or
#: kernel features the test host lacks are left out (None).
_OPTION_SAMPLES: dict[str, str | None] = {
    "addr": "127.0.0.1",
    "agent-addr": "127.0.0.1",
    "agent-check": "agent-port 8081",
    "agent-send": "ping",
    "alpn": "h2,http/1.1",
    "ca-file": None,
    "ca-ignore-err": "all",
    "ca-sign-file": None,
    "ca-sign-pass": None,
    "ca-verify-file": None,
    "check-alpn": "h2",
    "check-proto": "h2",
    "check-sni": "example.com",
    "check-ssl": "verify none",
    "ciphers": "ECDHE+AESGCM",
    "ciphersuites": "TLS_AES_128_GCM_SHA256",
    "client-sigalgs": "RSA+SHA256",
    "cookie": "c1",
    "crl-file": None,
    "crt": None,
    "crt-ignore-err": "all",
    "crt-list": None,
    "curves": "X25519",
    "ecdhe": "prime256v1",
    "group": "root",
    "init-addr": "last,libc,none",
    "interface": "lo",
    "mode": "600",
    "name": "schema",
    "namespace": None,
    "npn": "h2",
    "process": "1",
    "proto": "h2",
    "proxy-v2-options": "ssl",
    "redir": "http://example.com",
    "resolve-net": "10.0.0.0/8",
    "resolvers": "dns1",
    "shards": "1",
    "sigalgs": "RSA+SHA256",
    "sni": "str(example.com)",
    "socks4": "127.0.0.1:1080",
    "ssl": "verify none",
    "tfo": None,
    "source": "0.0.0.0",
    "thread": "1",
    "tls-ticket-keys": None,
    "track": None,
    "user": "root",
    "usesrc": None,
    "verifyhost": "example.com",
}


#: (table, option) pairs that cannot stand alone: a listening 'ssl' needs a certificate.
_SKIP = {("bind", "ssl")}


def _sample(table: str, name: str, entry: OptionEntry) -> str | None:
    spec = entry.spec
    if (table, name) in _SKIP:
        return None
    if name in _OPTION_SAMPLES:
        return _OPTION_SAMPLES[name]
    if spec.type is None:
        return ""
    schema = spec.type.schema
    if name == "id":
        return "{port}"
    if spec.type.kind == "int":
        lo, hi = schema.get("minimum"), schema.get("maximum")
        value = max(lo if lo is not None else 1, 1)
        return str(min(value, hi) if hi is not None else value)
    if spec.type.kind == "time":
        return "1s"
    if spec.type.kind == "enum":
        return str(schema["enum"][0])
    if spec.type.kind == "list" and "enum" in schema["items"]:
        return str(schema["items"]["enum"][0])
    return None


def _option_cases(fam: Family, feats: frozenset[str]) -> list[Case]:
    cases: list[Case] = []
    for table, kind, prefix in (
        ("server", "backend", "server o{port} 127.0.0.1:8080"),
        ("bind", "frontend", "bind 127.0.0.1:{port}"),
    ):
        for name, entry in fam.option_tables[table].items():
            if not family_features_ok(entry.feature, set(feats)):
                continue
            value = _sample(table, name, entry)
            if value is None:
                continue
            expect = "alert" if entry.removed else "warn" if entry.deprecated else "clean"
            line = f"{prefix} {name} {value}".rstrip()
            cases.append(Case(kind, line, expect, f"{table} option {name}"))
    return cases


def test_bind_and_server_options_are_accepted(haproxy_bin: str, tmp_path: Path) -> None:
    fam = family_of(haproxy_bin)
    cases = _option_cases(fam, features_of(haproxy_bin))
    assert len(cases) > 120
    ok = [c for c in cases if c.expect != "alert"]
    check_cases(haproxy_bin, ok, tmp_path)
    refused = [c for c in cases if c.expect == "alert"]
    if refused:
        check_alerts(haproxy_bin, refused, tmp_path)
