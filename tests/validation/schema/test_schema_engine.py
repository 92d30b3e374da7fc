"""What the schema engine reports for one family: keywords per section and version, option
values, deprecations, suggestions, and where each finding points."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from controller.diagnostics import Diagnostic, Severity
from controller.validation.schema import SchemaEngine
from controller.validation.syntax import ParsedConfig

Parse = Callable[[str], ParsedConfig]

HEAD = "defaults\n    mode http\n    timeout connect 1s\n"


def findings(family: str, text: str, parse: Parse) -> list[Diagnostic]:
    return SchemaEngine(family).diagnostics(parse(text), "haproxy.cfg")


def rules(family: str, text: str, parse: Parse) -> list[str]:
    return [d.rule_id for d in findings(family, text, parse)]


@pytest.mark.parametrize(
    ("text", "per_family"),
    [
        # added in 2.8
        ("global\n    tune.disable-fast-forward\n", {"2.6": ["W3015"], "2.8": [], "3.2": []}),
        ("backend b\n    server s 127.0.0.1:1 shard 1\n", {"2.6": ["W3016"], "2.8": []}),
        (
            "frontend f\n    http-request set-bandwidth-limit lim\n",
            {"2.6": ["W3016"], "2.8": []},
        ),
        # deprecated in 2.6, removed in 2.7
        ("defaults\n    bind-process 1\n", {"2.6": ["W3008"], "2.8": ["E3007"], "3.0": ["E3007"]}),
        (
            "frontend f\n    bind 127.0.0.1:80 process 1\n",
            {"2.6": ["W3008"], "2.8": ["E3007"]},
        ),
        # removed long before 2.6
        ("global\n    nbproc 2\n", {"2.6": ["E3007"], "3.2": ["E3007"]}),
        ("frontend f\n    reqadd X-Foo:\\ bar\n", {"2.6": ["E3007"], "2.8": ["E3007"]}),
        # sections of newer versions
        ("crt-store web\n    crt-base /etc/ssl\n", {"2.8": ["E3009"], "3.0": [], "3.2": []}),
        ("program p\n    command /bin/true\n", {"2.8": [], "3.0": [], "3.2": ["W3008"]}),
        # 'mode log' backends arrived after 2.8
        ("backend b\n    mode log\n", {"2.8": ["E3004"], "3.0": []}),
        ("backend b\n    balance sticky\n", {"2.8": ["E3004"], "3.0": []}),
    ],
)
def test_keywords_by_version(text: str, per_family: dict[str, list[str]], cfg: Parse) -> None:
    for family, expected in per_family.items():
        assert rules(family, text, cfg) == expected, family


def test_unknown_keyword_suggests_the_closest_one(cfg: Parse) -> None:
    (d,) = findings("2.8", "global\n    maxconm 100\n", cfg)
    # a warning: the schema cannot know every keyword of every build; haproxy -c decides
    assert d.rule_id == "W3015" and d.severity is Severity.WARNING
    assert d.suggested_fix == "did you mean 'maxconn'?"
    assert d.location is not None
    assert (d.location.line, d.location.column, d.location.end_column) == (2, 5, 11)


def test_unknown_action_and_option_suggest_too(cfg: Parse) -> None:
    text = "frontend f\n    http-request set-headr X y\n    option dontlognul\n"
    a, b = findings("2.8", text, cfg)
    assert (a.rule_id, a.suggested_fix) == ("W3016", "did you mean 'set-header'?")
    assert a.location is not None and a.location.column == 18
    assert (b.rule_id, b.suggested_fix) == ("W3016", "did you mean 'dontlognull'?")


def test_keyword_of_another_section_kind_says_where_it_belongs(cfg: Parse) -> None:
    (d,) = findings("2.8", "backend b\n    nameserver dns1 127.0.0.1:53\n", cfg)
    assert d.rule_id == "W3015" and "'resolvers'" in d.message


def test_keyword_from_a_newer_version_says_since_when(cfg: Parse) -> None:
    (d,) = findings("2.6", "global\n    prealloc-fd\n", cfg)
    assert d.rule_id == "W3015" and "since 2.8" in d.message


@pytest.mark.parametrize(
    ("line", "rule", "fragment"),
    [
        ("server s 127.0.0.1:80 weight 300", "E3004", "<= 256"),
        # HAProxy reads 'ten' as 0 and loads the line: advice, not an error
        ("server s 127.0.0.1:80 weight ten", "W3017", "must be an integer (got 'ten')"),
        ("server s 127.0.0.1:80 inter 0", "E3004", "> 0 ms"),
        ("server s 127.0.0.1:80 inter 2x", "E3004", "a time such as 5s"),
        ("server s 127.0.0.1:80 maxconn -5", "W3017", ">= 0"),
        ("server s 127.0.0.1:80 verify sometimes", "E3004", "one of none, required"),
        ("server s 127.0.0.1:80 init-addr last,dns", "E3004", ""),
        ("server s 127.0.0.1:80 check inter", "W3017", "expects a time"),
        ("server s 127.0.0.1:80 chek", "W3016", "did you mean"),
        ("server s", "E3005", "missing argument <address>"),
        ("timeout server 25d", "E3004", "<= 2147483647 ms"),
        ("timeout server 5s 6s", "W3017", "unexpected argument(s) '6s'"),
        ("balance roundrobn", "E3004", "not an accepted value"),
        ("mode https", "E3004", "one of tcp, http"),
        ("use_backend x if", "W3017", "empty condition"),
    ],
)
def test_values_are_checked(line: str, rule: str, fragment: str, cfg: Parse) -> None:
    got = findings("2.8", f"backend b\n    {line}\n", cfg)
    errors = [d for d in got if d.rule_id != "W3003"]
    assert [d.rule_id for d in errors] == [rule], [d.message for d in got]
    assert fragment in errors[0].message + (errors[0].suggested_fix or "")


def test_enum_error_points_at_the_value_and_suggests(cfg: Parse) -> None:
    (d,) = findings("2.8", "frontend f\n    bind :80 ssl-min-ver TLSv1.22\n", cfg)
    assert d.suggested_fix == "did you mean 'TLSv1.2'?"
    assert d.location is not None
    assert (d.location.column, d.location.end_column) == (14, 33)


@pytest.mark.parametrize(
    "line",
    [
        "server s 127.0.0.1:80 check inter 2s fall 3 rise 2 weight 256 maxconn 100 backup",
        "server s 127.0.0.1:80 ssl verify none sni str(example.com) alpn h2,http/1.1",
        "timeout server 0",
        "balance hdr(host)",
        "option httpchk GET /healthz",
        "http-request set-var(txn.x) str(a) if { path /x }",
        "tcp-request content track-sc1 src",
        "no option http-keep-alive",
        "log global",
        "no log",
    ],
)
def test_valid_lines_pass(line: str, cfg: Parse) -> None:
    assert rules("2.8", f"backend b\n    {line}\n", cfg) == []


def test_placement_follows_haproxy(cfg: Parse) -> None:
    text = (
        "defaults\n    acl a src 1.2.3.4\n"
        "defaults named\n    acl a src 1.2.3.4\n"
        "frontend f\n    server s 127.0.0.1:1\n    balance roundrobin\n"
        "backend b\n    bind :80\n"
    )
    got = [(d.rule_id, d.location.line if d.location else 0) for d in findings("2.8", text, cfg)]
    assert got == [("E3002", 2), ("E3002", 6), ("W3003", 7), ("W3003", 9)]


def test_prefixes_only_where_haproxy_supports_them(cfg: Parse) -> None:
    text = HEAD + "    no option httplog\n    no option redispatch\n    default option redispatch\n"
    got = findings("2.8", text, cfg)
    assert [(d.rule_id, d.location.line if d.location else 0) for d in got] == [("E3005", 4)]


def test_values_with_environment_expansion_are_not_judged(cfg: Parse) -> None:
    assert rules("2.8", 'backend b\n    server s 127.0.0.1:80 weight "${W}"\n', cfg) == []


def test_template_location_comes_from_the_source_map(cfg: Parse) -> None:
    from tests.validation.schema.schema_helpers import render_result

    text = "global\n    maxconm 1\n"
    smap = render_result(text).source_map
    (d,) = SchemaEngine("2.8").diagnostics(cfg(text), "haproxy.cfg", smap)
    assert d.template_location is not None
    assert (d.template_location.template, d.template_location.line) == ("haproxy.cfg.j2", 102)


def test_undescribed_section_is_informational() -> None:
    from controller.validation.syntax import ParsedConfig
    from tests.validation.schema.schema_helpers import token_section

    section = token_section("mystery", "x", ["whatever 1"])
    engine = SchemaEngine("2.8")
    (d,) = engine.diagnostics(ParsedConfig("t.cfg", (section,)), "t.cfg")
    assert d.rule_id == "I3014"


def test_acme_section_is_open_in_32(cfg: Parse) -> None:
    assert rules("3.2", "acme le\n    directory https://example.com/dir\n", cfg) == []
    assert rules("3.0", "acme le\n    directory https://example.com/dir\n", cfg) == ["E3009"]


@pytest.mark.parametrize(
    ("text", "rule"),
    [
        # build-optional modules this schema does not describe (QUIC, 51Degrees, DeviceAtlas,
        # WURFL): a build that has them accepts these lines, so they must never block
        ("global\n    tune.quic.frontend.max-idle-timeout 30s\n", "W3015"),
        ("global\n    51degrees-data-file /etc/51d.dat\n", "W3015"),
        ("global\n    deviceatlas-json-file /etc/da.json\n", "W3015"),
        ("global\n    wurfl-data-file /etc/wurfl.zip\n", "W3015"),
        ("frontend f\n    bind quic4@:443 quic-cc-algo cubic ssl crt site.pem\n", "W3016"),
        ("frontend f\n    http-request lua.auth if TRUE\n", "W3016"),
        # a keyword a later patch release of the family may have gained
        ("global\n    tune.h2.fe.glitches-threshold 100\n", "W3015"),
    ],
)
def test_keywords_the_schema_does_not_know_only_warn(text: str, rule: str, cfg: Parse) -> None:
    got = findings("2.6", text, cfg)
    assert [d.rule_id for d in got] == [rule]
    assert got[0].severity is Severity.WARNING


@pytest.mark.parametrize(
    ("text", "rule"),
    [
        # HAProxy reads numbers with atoi: these load, with another value than written
        ("global\n    maxconn 10x\n", "W3017"),
        ("global\n    maxconn -1\n", "W3017"),
        ("backend b\n    server s 127.0.0.1:80 weight 4294967296\n", "W3017"),
        ("backend b\n    retries 3 4\n", "W3017"),
        # ranges both binaries refuse (marked '!' in the data)
        ("global\n    tune.http.maxhdr 0\n", "E3004"),
        ("backend b\n    server s 127.0.0.1:80 weight 257\n", "E3004"),
    ],
)
def test_number_findings_are_errors_only_where_haproxy_refuses(
    text: str, rule: str, cfg: Parse
) -> None:
    assert rules("2.8", text, cfg) == [rule]


def test_keywords_the_reviewer_found_missing_are_known(cfg: Parse) -> None:
    assert rules("2.6", "global\n    max-spread-checks 2s\n", cfg) == []
    assert rules("2.8", "backend b\n    dynamic-cookie-key abc\n", cfg) == []
    assert rules("2.8", "peers p\n    shards 2\n", cfg) == []
    assert rules("2.6", "peers p\n    shards 2\n", cfg) == ["W3015"]
