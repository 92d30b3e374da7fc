"""The filters: quoting that cannot be broken out of, map columns, data helpers."""

from __future__ import annotations

import base64
import re
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from controller.render.filters import (
    FilterError,
    b64decode,
    group_by,
    haproxy_arg,
    haproxy_quote,
    map_key,
    map_value,
    sort_by,
)
from tests.render.haproxy_model import HOSTILE, config_args, map_entry
from tests.render.render_kit import render, spec, text

# Any text HAProxy could carry in one argument: everything but the line enders (and lone
# surrogates, which are not text and cannot be written to a file at all).
ONE_LINE = st.text(
    alphabet=st.characters(blacklist_characters="\x00\n\r", blacklist_categories=["Cs"]),
    min_size=1,
)


@pytest.mark.parametrize("value", HOSTILE)
@pytest.mark.parametrize("quote", [haproxy_arg, haproxy_quote])
def test_hostile_values_stay_one_argument(value: str, quote: object) -> None:
    assert callable(quote)
    line = f"http-response set-header X-Test {quote(value)} # comment"
    assert config_args(line) == ["http-response", "set-header", "X-Test", value]


@given(ONE_LINE)
@settings(max_examples=400, deadline=None)
@example("'")
@example("\\")
@example("#")
@example("${X}")
def test_haproxy_arg_tokenizes_back_to_exactly_the_value(value: str) -> None:
    for quote in (haproxy_arg, haproxy_quote):
        quoted = quote(value)
        assert not any(c in quoted for c in "\x00\n\r")
        assert config_args(f"kw {quoted} next") == ["kw", value, "next"]
        # nothing HAProxy interprets survives outside single quotes: no env expansion, no
        # double quotes, no comment
        assert '"' not in _outside_single_quotes(quoted)
        assert "#" not in _outside_single_quotes(quoted)


def _outside_single_quotes(quoted: str) -> str:
    out, inside, i = [], False, 0
    while i < len(quoted):
        c = quoted[i]
        if c == "'" and not inside:
            inside = True
        elif c == "'" and inside:
            inside = False
        elif c == "\\" and not inside:
            i += 1  # the escaped character is literal
        elif not inside:
            out.append(c)
        i += 1
    return "".join(out)


@pytest.mark.parametrize("value", ["a\nb", "a\rb", "a\x00b", "\n", ""])
def test_values_that_would_end_the_line_or_the_arguments_are_refused(value: str) -> None:
    for quote in (haproxy_arg, haproxy_quote):
        with pytest.raises(FilterError):
            quote(value)


def test_plain_values_stay_readable() -> None:
    assert haproxy_arg("be_default_echo_80") == "be_default_echo_80"
    assert haproxy_arg("127.0.0.1:8080") == "127.0.0.1:8080"
    assert haproxy_arg("/api/v1") == "/api/v1"
    assert haproxy_arg(8080) == "8080"
    assert haproxy_quote("plain") == "'plain'"
    assert haproxy_arg("it's") == "'it'\\''s'"


def test_logformat_doubles_percent() -> None:
    assert haproxy_arg("%[env(X)]", logformat=True) == "'%%[env(X)]'"
    assert config_args("k " + haproxy_arg("100%", logformat=True)) == ["k", "100%%"]


@pytest.mark.parametrize("filt", [haproxy_arg, haproxy_quote, map_key, map_value])
def test_lone_surrogates_are_refused(filt: object) -> None:
    assert callable(filt)
    with pytest.raises(FilterError, match="not valid Unicode"):
        filt("a\ud800b")


def test_unencodable_output_is_a_diagnostic() -> None:
    r = render(spec("{{ extraContext.bad }}\n", extra={"bad": "x\ud800"}))
    (d,) = r.diagnostics
    assert d.rule_id == "E1004" and "not valid Unicode" in d.message
    assert "haproxy.cfg" not in r.files


@pytest.mark.parametrize("value", [None, True, ["list"], {"a": 1}])
def test_non_scalars_are_refused(value: object) -> None:
    with pytest.raises(FilterError):
        haproxy_arg(value)


# -- map files ----------------------------------------------------------------------------------

KEY = st.text(
    alphabet=st.characters(blacklist_characters=" \t\n\r\x00", blacklist_categories=["Cs"]),
    min_size=1,
    max_size=60,
).filter(lambda k: not k.startswith("#"))
VALUE = st.text(
    alphabet=st.characters(blacklist_characters="\n\r\x00", blacklist_categories=["Cs"]),
    max_size=60,
).filter(lambda v: v == v.strip(" \t"))


@given(KEY, VALUE)
@settings(max_examples=300, deadline=None)
def test_map_line_reads_back_as_key_and_value(key: str, value: str) -> None:
    assert map_entry(f"{map_key(key)} {map_value(value)}\n") == (key, value)


@pytest.mark.parametrize("key", ["a b", "a\tb", "a\nb", "a\rb", "a\x00b", "#x", ""])
def test_map_keys_that_would_split_or_comment_are_refused(key: str) -> None:
    with pytest.raises(FilterError):
        map_key(key)


@pytest.mark.parametrize("value", ["a\nb", "a\rb", "a\x00b", " lead", "trail\t"])
def test_map_values_that_would_change_are_refused(value: str) -> None:
    with pytest.raises(FilterError):
        map_value(value)


def test_map_columns_are_bounded_below_haproxys_line_buffer() -> None:
    with pytest.raises(FilterError):
        map_key("k" * 5000)
    with pytest.raises(FilterError):
        map_value("v" * 9000)
    assert map_value("two words inside") == "two words inside"
    assert map_key("a#b") == "a#b"


# -- data helpers -----------------------------------------------------------------------------


def test_b64decode() -> None:
    assert b64decode(base64.b64encode("-----BEGIN é-----".encode()).decode()) == "-----BEGIN é-----"
    # "YW Jj" decodes to "abc" when non-alphabet characters are skipped; only strict
    # decoding refuses it, as a Secret's data field would.
    assert base64.b64decode("YW Jj") == b"abc"
    for bad in ["not base64!", "YQ", "YW Jj", base64.b64encode(b"\xff\xfe").decode()]:
        with pytest.raises(FilterError):
            b64decode(bad)


OBJS = [
    {"metadata": {"name": "b", "namespace": "x", "labels": {"app.kubernetes.io/name": "web"}}},
    {"metadata": {"name": "a", "namespace": "y"}},
    {"metadata": {"name": "c", "namespace": "x", "labels": {"app.kubernetes.io/name": "api"}}},
]


def test_sort_by_paths_with_missing_values_first() -> None:
    assert [o["metadata"]["name"] for o in sort_by(OBJS, "metadata.name")] == ["a", "b", "c"]
    assert [
        o["metadata"]["name"] for o in sort_by(OBJS, "metadata.namespace", "metadata.name")
    ] == ["b", "c", "a"]
    by_label = sort_by(OBJS, "metadata.labels['app.kubernetes.io/name']")
    assert [o["metadata"]["name"] for o in by_label] == ["a", "c", "b"]
    assert [o["metadata"]["name"] for o in sort_by(OBJS, "metadata.name", reverse=True)] == [
        "c",
        "b",
        "a",
    ]
    with pytest.raises(FilterError):
        sort_by(OBJS, "metadata[")
    with pytest.raises(FilterError):
        sort_by([{"a": 1}, {"a": "x"}], "a")


@pytest.mark.parametrize("items", [[], [OBJS[0]], (OBJS[0],)])
def test_sort_by_checks_its_paths_even_with_nothing_to_compare(items: object) -> None:
    """A short list takes a shortcut, but a bad path is refused the same: the template's
    mistake shows on the first render, not on the first one with two objects."""
    assert sort_by(items, "metadata.name") == list(items)  # type: ignore[call-overload]
    for bad in ("metadata[", "", 3):
        with pytest.raises(FilterError):
            sort_by(items, bad)  # type: ignore[arg-type]
    with pytest.raises(FilterError):
        sort_by(items)


def test_group_by_sorts_groups_and_keeps_item_order() -> None:
    groups = group_by(OBJS, "metadata.namespace")
    assert [(g.key, [o["metadata"]["name"] for o in g.items]) for g in groups] == [
        ("x", ["b", "c"]),
        ("y", ["a"]),
    ]
    labelled = group_by(OBJS, "metadata.labels['app.kubernetes.io/name']")
    assert [g.key for g in labelled] == [None, "api", "web"]
    with pytest.raises(FilterError):
        group_by([{"a": {"b": 1}}], "a")


def test_filters_in_templates() -> None:
    s = spec(
        "{% set x = extraContext %}"
        "server {{ x.name | haproxy_arg }} {{ x.addr | haproxy_arg }}\n"
        "{% for g in x['items'] | group_by('k') %}{{ g.key }}={{ g['items'] | length }} {% endfor %}\n"
        "{{ (x['items'] | sort_by('n') | first).n }}\n",
        extra={
            "name": "web 1",
            "addr": "10.0.0.1:80",
            "items": [{"k": "b", "n": 2}, {"k": "a", "n": 1}, {"k": "b", "n": 0}],
        },
    )
    r = render(s)
    assert text(r) == "server 'web 1' 10.0.0.1:80\na=1 b=2 0\n"
    assert config_args(text(r).splitlines()[0]) == ["server", "web 1", "10.0.0.1:80"]


def test_map_columns_remember_only_what_passed(monkeypatch: pytest.MonkeyPatch) -> None:
    """map_key/map_value skip the checks for a string that passed them before: a refused one
    is refused every time, and the memory is bounded."""
    from controller.render import filters

    monkeypatch.setattr(filters, "_PASSED_MAX", 3)
    monkeypatch.setattr(filters, "_PASSED_KEYS", {})
    for _ in range(2):
        assert filters.map_key("a.test/x") == "a.test/x"
        with pytest.raises(filters.FilterError):
            filters.map_key("a b")
        with pytest.raises(filters.FilterError):
            filters.map_value("x\ny")
    for i in range(10):
        filters.map_key(f"k{i}")
    assert len(filters._PASSED_KEYS) <= 3
    assert "a b" not in filters._PASSED_KEYS


def test_map_columns_checked_in_one_pass_only_when_every_value_passed() -> None:
    """A whole column is taken as it is only when each of its values is a plain string that
    passed before; otherwise each is checked in turn, so a long map's first bad line (key or
    value) is the one refused, as item by item."""
    from controller.render import filters
    from controller.render.listfilters import LIST_FILTERS

    keys = [f"h{i}.test/p" for i in range(70)]
    assert list(map(filters.map_key, keys)) == keys
    assert filters.map_keys(keys) is keys
    assert filters.map_keys([*keys, "never passed"]) is not keys
    with pytest.raises(filters.FilterError, match="never passed"):
        list(filters.map_keys([*keys, "never passed"]))

    class Text(str):
        __slots__ = ()

    assert filters.map_keys([*keys, Text("h1.test/p")]) is not keys
    names = [f"be_{i}" for i in range(70)]
    list(map(filters.map_value, names))
    rows = [{"k": k, "v": v} for k, v in zip(keys, names, strict=True)]
    entries = LIST_FILTERS["map_entries"]
    assert entries(render_environment(), rows, "k", "v") == "".join(
        f"{k} {v}\n" for k, v in zip(keys, names, strict=True)
    )
    bad = [*rows[:3], {"k": "x y", "v": "ok"}, {"k": "ok", "v": "a\nb"}, *rows[3:]]
    with pytest.raises(filters.FilterError, match="map_key"):
        entries(render_environment(), bad, "k", "v")
    bad[3], bad[4] = bad[4], bad[3]
    with pytest.raises(filters.FilterError, match="map_value"):
        entries(render_environment(), bad, "k", "v")


def render_environment() -> Any:
    from controller.render.environment import TemplateEnvironment

    return TemplateEnvironment()


_VALUES = st.one_of(st.none(), st.integers(-3, 3), st.sampled_from(["a", "b", "B", ""]))
_ITEMS = st.lists(
    st.one_of(
        st.dictionaries(st.sampled_from(["k", "j"]), _VALUES, max_size=2),
        st.dictionaries(st.sampled_from(["k"]), st.dictionaries(st.just("k"), _VALUES)),
    ),
    max_size=8,
)


@settings(max_examples=300, deadline=None)
@given(_ITEMS, st.sampled_from([("k",), ("k", "j"), ("k.k",), ("j", "k")]), st.booleans())
def test_sort_by_fast_keys_sort_as_the_field_walk_does(
    items: list[dict[str, Any]], paths: tuple[str, ...], reverse: bool
) -> None:
    """sort_by's key for one field of a plain dict is the walk's, shortcut: same order (ties
    stable), same errors (an int and a str cannot be compared)."""
    from controller.render.filters import _sort_key, compile_paths
    from controller.resources import freeze

    compiled = compile_paths(list(paths), "sort_by")
    for given_items in (items, [freeze(i) for i in items]):
        try:
            want: Any = sorted(given_items, key=lambda i: _sort_key(i, compiled), reverse=reverse)
        except TypeError:
            want = FilterError
        try:
            got: Any = sort_by(given_items, *paths, reverse=reverse)
        except FilterError:
            got = FilterError
        assert got == want


_MAP_TEXT = st.text(alphabet=st.sampled_from("ab.#/ \t\n\r\x00é-"), max_size=8)


def _verdict(filt: Any, value: str) -> str | None:
    try:
        return str(filt(value))
    except FilterError:
        return None


@settings(max_examples=400)
@given(value=_MAP_TEXT)
@example(value="#a")
@example(value="a#")
@example(value=" a")
@example(value="a\t")
@example(value="")
def test_map_columns_one_match_agrees_with_the_checks(value: str) -> None:
    """A fresh ASCII string passes map_key/map_value by one pattern match; the pattern
    accepts exactly what the checks one by one accept (they run when it does not match)."""
    from controller.render import filters

    with pytest.MonkeyPatch.context() as m:
        m.setattr(filters, "_PASSED_KEYS", {})
        m.setattr(filters, "_PASSED_VALUES", {})
        fast = (_verdict(map_key, value), _verdict(map_value, value))
        m.setattr(filters, "_KEY_GOOD", re.compile(r"(?!)"))
        m.setattr(filters, "_VALUE_GOOD", re.compile(r"(?!)"))
        m.setattr(filters, "_PASSED_KEYS", {})
        m.setattr(filters, "_PASSED_VALUES", {})
        checked = (_verdict(map_key, value), _verdict(map_value, value))
    assert fast == checked


def test_map_columns_pass_a_fresh_plain_string_in_one_match(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A fresh ASCII key or value that every check would accept is not taken through the
    checks one by one (at 10,000 Ingresses, 70,000 of them per full render); at the length
    bound it still is refused."""
    from controller.render import filters

    def no_checks(value: Any, name: str) -> str:
        raise AssertionError("checked one by one")

    monkeypatch.setattr(filters, "_PASSED_KEYS", {})
    monkeypatch.setattr(filters, "_PASSED_VALUES", {})
    monkeypatch.setattr(filters, "_text", no_checks)
    assert map_key("app-1.example.test/api") == "app-1.example.test/api"
    assert map_value("be_default_svc-1_80") == "be_default_svc-1_80"
    assert map_value("") == ""
    with pytest.raises(AssertionError):
        map_key("k" * (filters.MAX_MAP_KEY + 1))
