"""``server_lines``: a backend's server lines in one call, as the template loop wrote them."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.render.filters import FilterError, haproxy_arg, server_lines
from controller.resources import FrozenDict
from tests.render.render_kit import render, spec, text

# The loop the filter replaced in the quickstart's backend snippet: the reference.
LOOP = """\
{% for ep in extraContext['items'] %}
{% set endpoint = ep.address ~ ':' ~ ep.port %}
{% set arg = endpoint | haproxy_arg %}
    server {{ arg ~ ' ' ~ ((('ipv6@' ~ endpoint) | haproxy_arg) if ':' in ep.address else arg) ~ extraContext.options }}
{% endfor %}
"""
FILTER = "{{ extraContext['items'] | server_lines(extraContext.options) -}}"

PLAIN = ["10.0.0.1", "10.0.0.2", "127.1.7.5", "a.example.test", ""]
IPV6 = ["fd00::1", "::1", "2001:db8::a"]
ODD = ["a b", "it's", "a#b", "${HOME}", "back\\slash", "tab\there", "é.example", "x{0}"]
BROKEN = ["x\ny", "10.0.0.1\r", "nul\x00"]
ADDRESS = st.sampled_from(PLAIN + IPV6 + ODD + BROKEN) | st.text("ab:.# '\n", max_size=6)
ITEM = st.fixed_dictionaries({"address": ADDRESS, "port": st.integers(-1, 70000)})
OPTIONS = st.sampled_from(
    ["", " check", " ssl verify none alpn h2", " check sni 'str(a b)'", " x{0}y}", " 100%s"]
)


def reference(items: list[dict[str, Any]], options: str, indent: int = 4) -> str:
    """The loop above in Python."""
    out = []
    for ep in items:
        endpoint = f"{ep['address']}:{ep['port']}"
        arg = haproxy_arg(endpoint)
        at = haproxy_arg("ipv6@" + endpoint) if ":" in ep["address"] else arg
        out.append(f"{' ' * indent}server {arg} {at}{options}\n")
    return "".join(out)


def outcome(f: Any, *args: Any) -> tuple[str, str]:
    try:
        return ("ok", f(*args))
    except FilterError as exc:
        return ("error", str(exc))


@given(st.lists(ITEM, max_size=6), OPTIONS, st.sampled_from([0, 2, 4, 8]))
@settings(max_examples=600, deadline=None)
def test_the_filter_writes_what_the_loop_writes(
    items: list[dict[str, Any]], options: str, indent: int
) -> None:
    # Mixed lists too: one IPv6 or quoted address among plain ones takes the slow path.
    want = outcome(reference, items, options, indent)
    assert outcome(server_lines, items, options, indent) == want
    frozen = [FrozenDict(i) for i in items]
    assert outcome(server_lines, tuple(frozen), options, indent) == want


@given(st.lists(ITEM, max_size=4), OPTIONS)
@settings(max_examples=80, deadline=None)
def test_in_a_template_the_filter_renders_what_the_loop_renders(
    items: list[dict[str, Any]], options: str
) -> None:
    extra = {"items": items, "options": options}
    loop = render(spec(LOOP, extra=extra))
    native = render(spec(FILTER, extra=extra))
    if loop.diagnostics:  # an address HAProxy cannot take: the same refusal
        assert [(d.rule_id, d.message) for d in native.diagnostics] == [
            (d.rule_id, d.message) for d in loop.diagnostics
        ]
        assert loop.diagnostics[0].rule_id == "E1004"
    else:
        assert not native.diagnostics
        assert text(native) == text(loop)


def test_plain_ipv6_and_quoted_addresses() -> None:
    items = [
        {"address": "10.0.0.1", "port": 80},
        {"address": "fd00::1", "port": 80},
        {"address": "a b", "port": 8080},
    ]
    assert server_lines(items, " check") == (
        "    server 10.0.0.1:80 10.0.0.1:80 check\n"
        "    server fd00::1:80 ipv6@fd00::1:80 check\n"
        "    server 'a b:8080' 'a b:8080' check\n"
    )
    assert server_lines(items[:1], indent=0) == "server 10.0.0.1:80 10.0.0.1:80\n"
    assert server_lines([]) == server_lines(()) == ""


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (([{"address": "10.0.0.1\n", "port": 80}],), "haproxy_arg: .* contains '\\\\n'"),
        ((["10.0.0.1:80"],), "an item is a str, not a mapping"),
        (([{"address": None, "port": 80}],), "address is a NoneType, not a string"),
        (([{"address": "10.0.0.1", "port": "80"}],), "port is a str, not a number"),
        (([{"address": "10.0.0.1", "port": True}],), "port is a bool, not a number"),
        (([{"port": 80}],), "an item has no address"),
        (([{"address": "10.0.0.1"}],), "an item has no port"),
        (("10.0.0.1",), "expected a list, got str"),
        (([], 1), "options must be a string"),
        (([], "check"), "must start with a space"),
        (([], " check\nlua-load /x"), "contain a line break"),
        (([], " a\rb"), "contain a line break"),
        (([], "", -1), "indent must be a number of spaces"),
        (([], "", "4"), "indent must be a number of spaces"),
    ],
)
def test_refusals_say_what(args: tuple[Any, ...], message: str) -> None:
    with pytest.raises(FilterError, match=message):
        server_lines(*args)


def test_a_refusal_in_a_template_is_e1004() -> None:
    extra = {"items": [{"address": "10.0.0.1", "port": 80}], "options": " check\nlua-load x"}
    r = render(spec(FILTER, extra=extra))
    (d,) = r.diagnostics
    assert d.rule_id == "E1004" and "server_lines: options" in d.message
    assert "haproxy.cfg" not in r.files
