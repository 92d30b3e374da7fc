"""The directive policy: each denied directive, the allow-list, and the exported table."""

from __future__ import annotations

import pytest

from controller.diagnostics import RULES
from controller.validation.syntax import (
    ALLOW_NAMES,
    DENIED_DIRECTIVES,
    check_policy,
    parse,
    unknown_allow_names,
)

CASES = [
    ("global\n    lua-load files/x.lua\n", "lua-load", "E2101", 2),
    ("global\n    lua-load-per-thread files/x.lua\n", "lua-load-per-thread", "E2101", 2),
    ("global\n    lua-prepend-path files/?.lua\n", "lua-prepend-path", "E2101", 2),
    ("global\n    ssl-engine rdrand\n", "ssl-engine", "E2102", 2),
    ("global\n    ssl-provider legacy\n", "ssl-provider", "E2102", 2),
    ("global\n    ssl-provider-path lib\n", "ssl-provider-path", "E2102", 2),
    ("global\n    ssl-passphrase-cmd /bin/echo\n", "ssl-passphrase-cmd", "E2103", 2),
    ("global\n    master-worker\nprogram p\n    command /bin/true\n", "program", "E2103", 3),
    ("backend b\n    option external-check\n", "external-check", "E2103", 2),
    ("backend b\n    external-check command /bin/true\n", "external-check", "E2103", 2),
    ("global\n    insecure-fork-wanted\n", "insecure-fork-wanted", "E2103", 2),
    ("global\n    insecure-setuid-wanted\n", "insecure-setuid-wanted", "E2103", 2),
    ("ring r\n    size 32764\n    backing-file ring.bin\n", "backing-file", "E2104", 3),
    ("global\n    setenv A b\n", "setenv", "E2105", 2),
    ("global\n    presetenv A b\n", "presetenv", "E2105", 2),
    ("global\n    resetenv A\n", "resetenv", "E2105", 2),
    ("global\n    unsetenv A\n", "unsetenv", "E2105", 2),
    ('backend b\n    http-request set-header X "${SECRET}"\n', "env-expansion", "E2106", 2),
    ("global\n    expose-experimental-directives\n", "expose-experimental-directives", "E2107", 2),
]


@pytest.mark.parametrize(
    ("text", "name", "rule", "line"), CASES, ids=[c[1] + "@" + c[0][:8] for c in CASES]
)
def test_denied_unless_allowed(text: str, name: str, rule: str, line: int) -> None:
    parsed, _ = parse(text, "haproxy.cfg")
    (d,) = check_policy(parsed)
    assert d.rule_id == rule and d.location is not None and d.location.line == line
    assert name in d.message and f"line {line}" in d.message  # names the directive and line
    assert check_policy(parsed, {name}) == []
    assert check_policy(parsed, ALLOW_NAMES - {name}) != []  # only its own name allows it


def test_the_global_external_check_switch_alone_is_harmless() -> None:
    alone, _ = parse("global\n    external-check\n", "haproxy.cfg")
    assert check_policy(alone) == []
    used, _ = parse(
        "global\n    external-check\nbackend b\n    option external-check\n", "haproxy.cfg"
    )
    assert [(d.rule_id, d.location.line if d.location else 0) for d in check_policy(used)] == [
        ("E2103", 4),
        ("E2103", 2),
    ]
    assert check_policy(used, {"external-check"}) == []


def test_the_table_covers_every_case_and_is_registered() -> None:
    assert {c[1] for c in CASES} == set(DENIED_DIRECTIVES) == ALLOW_NAMES
    for denial in DENIED_DIRECTIVES.values():
        assert denial.rule_id in RULES


@pytest.mark.parametrize(
    "text",
    [
        "backend b\n    no option external-check\n",
        "global\n    no insecure-fork-wanted\n",
        "backend b\n    http-request set-header X $HOME\n",  # no expansion outside quotes
        "backend b\n    http-request set-header X '${HOME}'\n",
        'backend b\n    http-request set-header X "\\${HOME}"\n',
        'backend b\n    http-request set-header X "${.LINE} ${.SECTION}"\n',  # not the environment
        "backend b\n    option httpchk\n",
    ],
)
def test_not_denied(text: str) -> None:
    parsed, diags = parse(text, "haproxy.cfg")
    assert diags == [] and check_policy(parsed) == []


def test_denied_in_every_branch_of_a_condition() -> None:
    text = "global\n.if defined(FOO)\n    lua-load files/x.lua\n.endif\n"
    parsed, _ = parse(text, "haproxy.cfg")
    assert [d.rule_id for d in check_policy(parsed)] == ["E2101"]


def test_expansion_in_dot_directives_is_denied() -> None:
    text = 'global\n.if streq("${ENV}",prod)\n.endif\n.notice "${USER}"\n'
    parsed, _ = parse(text, "haproxy.cfg")
    found = check_policy(parsed)
    assert [(d.rule_id, d.location.line if d.location else 0) for d in found] == [
        ("E2106", 2),
        ("E2106", 4),
    ]
    assert check_policy(parsed, {"env-expansion"}) == []


def test_every_expanding_token_is_reported_with_its_span() -> None:
    text = 'backend b\n    server s "${HOST}" weight "${W}"\n'
    parsed, _ = parse(text, "haproxy.cfg")
    found = check_policy(parsed)
    assert [(d.location.column, d.location.end_column) for d in found if d.location] == [
        (14, 22),
        (31, 36),
    ]


def test_unknown_allow_names() -> None:
    assert unknown_allow_names(["lua-load", "lua_load", "env"]) == ["env", "lua_load"]


def test_repeated_checks_agree_whatever_is_allowed() -> None:
    parsed, _ = parse("global\n    lua-load files/x.lua\nbackend b\n    server s 1.2.3.4:80\n", "h")
    for _ in range(2):
        assert [d.rule_id for d in check_policy(parsed)] == ["E2101"]
        assert check_policy(parsed, {"lua-load"}) == []
