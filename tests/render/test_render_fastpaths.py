"""The sandbox's direct paths (controller.render.environment: plain functions and classes
called directly, ``.get`` of mappings, missing keys; controller.render.trace: attribute reads
of stored objects, fragments, namespaces and loops, direct method calls, counting loops,
names looked up in the context) give what stock Jinja2's immutable sandbox gives: the same
value, or an error of the same kind — an unsafe callable or a private name stays refused."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from jinja2 import StrictUndefined, pass_context, pass_environment
from jinja2.exceptions import SecurityError, UndefinedError
from jinja2.sandbox import ImmutableSandboxedEnvironment
from jinja2.utils import Namespace

from controller.render import Renderer
from controller.render.environment import TemplateEnvironment
from controller.render.fragments import Fragment
from controller.render.grown import GrownList
from controller.render.incremental import Recorder, TracingCollection, current_recorder
from controller.render.keyed import Keyed
from controller.render.trace import Traced
from controller.resources import FrozenDict
from tests.render.render_kit import WATCHED, service, snapshot, spec, text


def plain(x: Any = 1) -> str:
    return f"plain {x}"


def unsafe(x: Any = 1) -> str:
    return f"called {x}"


unsafe.unsafe_callable = True  # type: ignore[attr-defined]


def alters(x: Any = 1) -> str:
    return f"altered {x}"


alters.alters_data = True  # type: ignore[attr-defined]


@pass_context
def wants_context(context: Any, x: Any = 1) -> str:
    return f"context {type(context).__name__} {x}"


@pass_environment
def wants_environment(environment: Any, x: Any = 1) -> str:
    return f"environment {x}"


def stops() -> None:
    raise StopIteration


class Plain:
    def __init__(self, x: Any = 1) -> None:
        self.x = x

    def __str__(self) -> str:
        return f"Plain {self.x}"


class Refused(Plain):
    unsafe_callable = True


class CallsWithContext:
    @pass_context
    def __call__(self, context: Any) -> str:
        return "instance with context"


VALUES: dict[str, Any] = {
    "plain": plain,
    "unsafe": unsafe,
    "alters": alters,
    "wants_context": wants_context,
    "wants_environment": wants_environment,
    "stops": stops,
    "Plain": Plain,
    "Refused": Refused,
    "calls_with_context": CallsWithContext(),
    "d": {"a": 1, "get": "a key named get"},
    "f": FrozenDict({"a": 1}),
    "k": Keyed("k", {"a": 1}),
    "ns": Namespace(a=1, items=[3], get=4),
    "words": ["a", "b", "c"],
}

TEMPLATES = [
    "{{ plain() }} {{ plain(2) }} {{ plain(x=3) }}",
    "{{ wants_context(4) }} {{ wants_environment(5) }}",
    "{{ Plain() }} {{ Plain(x=6) }}",
    "{{ calls_with_context() }}",
    "{{ stops() is undefined }}",
    "{{ dict(a=1) }} {{ range(3) | list }} {% set n = namespace(v=1) %}{{ n.v }}",
    "{{ d.get('a') }} {{ d.get('zz', 2) }} {{ f.get('a') }} {{ k.get('a') }} {{ k.get('b', 3) }}",
    "{{ d['get'] }} {{ d.zz | default('none') }} {{ f.zz | default('none') }}",
    # reads of fragments and namespaces (an export or attribute named like a method too)
    "{{ frag.a }} {{ frag.items }} {{ frag }} {{ frag.zz | default('none') }}",
    "{{ ns.a }} {{ ns.items }} {{ ns.get }} {{ ns.zz | default('none') }}",
    "{% set n = namespace(x=[]) %}{% set n.x = n.x + [1] %}{% set y = n.x %}"
    "{% set n.x = n.x + [n.x] %}{{ y }} {{ n.x }}",
    # .get falls back to the sandbox for other receivers
    "{{ ns.get }} {{ words.get | default('none') }} {{ 'abc'.get | default('none') }}",
    # loops: counted, with a filter, nested (the test reads the outer loop), and LoopContext
    "{% for w in words %}{{ loop.index0 }}{{ loop.index }}{{ loop.first }} {% endfor %}",
    "{% for w in words if w != 'a' %}{{ loop.index0 }}{{ w }}{{ loop.first }} {% endfor %}",
    "{% for w in words %}{% for v in words if loop.index0 < 1 %}{{ loop.index0 }}{{ v }}"
    "{% endfor %};{% endfor %}",
    "{% for w in words %}{{ loop.index0 }}{{ loop.last }}{{ loop.length }}"
    "{{ loop.previtem | default('-') }}{{ loop.revindex }} {% endfor %}",
    "{% for w in [] %}{{ loop.index0 }}{% else %}none{% endfor %}",
    "{% for w in words %}{% for v in words %}{{ loop.index0 }}{% endfor %}{{ loop.index }}"
    "{% endfor %}",
    # stock filters written out for constant arguments, and their other cases
    "{{ d.a | default('c') }} {{ d.zz | default('c') }} {{ none | default([]) }}"
    " {{ d.zz | default(d.a) }} {{ '' | default('e', true) }}",
    "{{ 'Ab' | lower }} {{ frag | lower }} {{ 7 | lower }} {{ 'a' | string }} {{ 80 | string }}"
    " {{ true | string }} {{ 1.5 | string }} {{ none | string }} {{ frag | string }}",
    "{{ 7 | int }} {{ true | int }} {{ '8' | int }} {{ '9.5' | int }} {{ 'x' | int(3) }}"
    " {{ 2.5 | int }} {{ '0x1f' | int(0, 16) }}",
    # namespace() and a name that shadows it
    "{% set n = namespace(a=1) %}{{ n.a }}{% set namespace = dict %}{{ namespace(b=2) }}",
]

NAME_READS = [
    # a name read after its {% set %} in the same or an enclosing block, and everywhere
    # else it may be unset: before it, after an if or a loop that set it, in a macro
    "{% set x = 1 %}{{ x }}{% set x = x + 1 %}{{ x }}",
    "{% set a, b = 1, 2 %}{{ a }}{{ b }}{% set c, d = words[:2] %}{{ c ~ d }}",
    "{{ x is defined }}{% set x = 1 %}{{ x is defined }}",
    "{% if words %}{% set x = 1 %}{{ x }}{% endif %}{{ x }}",
    "{% if not words %}{% set x = 1 %}{% endif %}{{ x is defined }}",
    "{% if not words %}{% set x = 1 %}{% endif %}{{ x }}",
    "{% for w in words %}{{ y is defined }}{% set y = w %}{{ y }}{% endfor %}{{ y is defined }}",
    "{% for w in words %}{% set y = w %}{% for v in words %}{{ y }}{{ v }}{% endfor %}{% endfor %}",
    "{% for w in words %}{% set y = w %}{% endfor %}{{ y }}",
    "{% for w in [] %}{% set y = w %}{% else %}{{ y is defined }}{% endfor %}",
    "{% set x = 1 %}{% for w in words if x %}{{ x }}{% else %}{{ x }}{% endfor %}",
    "{% set x = 'a' %}{% macro m() %}{{ x }}{% set x = 2 %}{{ x }}{% endmacro %}{{ m() }}",
    "{% macro m() %}{{ z is defined }}{% endmacro %}{% set z = 1 %}{{ m() }}",
    "{% for w in words %}{% set y = w %}{% macro m() %}{{ y }}{% endmacro %}"
    "{% set n = namespace(m=m) %}{% endfor %}{{ n is defined }}",
    "{% set o = namespace() %}{% for w in words %}{% set y = w %}"
    "{% macro m() %}{{ y }}{% endmacro %}{% set o.m = m %}{% endfor %}{{ o.m() }}",
    "{% set x = 1 %}{% call plain() %}{{ x }}{% endcall %}",
    "{% for w in [[1], [2]] recursive %}{% set y = w %}{{ y }}{% endfor %}",
    "{% set x %}a{% set y = 2 %}{{ y }}{% endset %}{{ x }}{{ y is defined }}",
    "{% with v = 1 %}{% set x = v %}{{ x }}{% endwith %}{{ x is defined }}",
    "{% filter upper %}{% set x = 'a' %}{{ x }}{% endfilter %}{{ x is defined }}",
    "{% set x = 1 %}{% with %}{% set x = 2 %}{{ x }}{% endwith %}{{ x }}",
    "{% set x = 1 %}{% if words %}{% set x = 2 %}{% for w in words %}{{ x }}{% endfor %}"
    "{% endif %}{{ x }}",
]

REFUSED = [
    "{{ unsafe() }}",
    "{{ alters() }}",
    "{{ Refused() }}",
    "{{ d.zz.yy }}",
    "{{ frag._hidden }}",
    "{{ frag._exports }}",
    "{{ ns._Namespace__attrs }}",
    "{{ frag.zz }}",
    "{{ ns.zz }}",
    "{% for w in words %}{{ loop._iterator }}{% endfor %}",
    "{{ words.get(1) }}",
    "{{ d.get(words) }}",
    "{{ zz.get(1) }}",
    "{{ d.a | default(zz.yy) }}",  # a default argument is evaluated even when not used
    "{{ zz | lower }}",
    "{{ zz | string }}",
]


def _render(env: Any, template: str) -> str:
    # A fragment of its own per render: a test elsewhere inspects every live Fragment.
    frag = Fragment({"a": 1, "items": [1, 2], "_hidden": 2}, Traced("text"))
    return str(env.from_string(template).render(**VALUES, frag=frag))


def _ours() -> TemplateEnvironment:
    return TemplateEnvironment()


def _stock() -> ImmutableSandboxedEnvironment:
    return ImmutableSandboxedEnvironment(undefined=StrictUndefined)


@pytest.mark.parametrize("template", TEMPLATES)
def test_the_same_value_as_the_stock_sandbox(template: str) -> None:
    env = _ours()
    first = _render(env, template)
    assert first == _render(_stock(), template)
    assert _render(env, template) == first  # again, with the verdicts cached


@pytest.mark.parametrize("template", NAME_READS)
def test_names_read_where_set_agree_with_the_stock_sandbox(template: str) -> None:
    """A name read where its ``{% set %}`` certainly ran is read without the test for an
    unset name; everywhere else the test stays, with the same value or the same error."""
    env = _ours()
    assert _outcome(env, template) == _outcome(_stock(), template)


def test_a_mapping_read_tests_the_two_mapping_types_by_identity() -> None:
    """``t in {FrozenDict, dict}`` written as two ``is`` tests: the same types, and only
    when the environment's ordered list holds exactly the set's."""
    env = TemplateEnvironment()
    assert set(env.htc_mapping_order) == set(env.htc_mappings)
    code = env.compile("{{ d.a }}", raw=True)
    assert "is t_htc_map1 and 'a' in t_htc_o" in code
    env.htc_mapping_order = (dict,)
    assert "in t_htc_maps and 'a' in t_htc_o" in env.compile("{{ d.a }}", raw=True)


class _OwnLookup(dict[str, Any]):
    """A mapping type that finds keys its own way."""

    def __getitem__(self, key: str) -> Any:
        return f"own {key}"


def test_a_stored_object_key_is_read_in_one_lookup_where_dict_finds_it() -> None:
    """A key of a FrozenDict (``dict``'s own lookups) is read by one ``dict.get``; a first
    mapping type with a lookup of its own keeps ``in`` and ``[]``, which call it."""
    env = TemplateEnvironment()
    assert env.htc_mapping_order[0] is FrozenDict
    code = env.compile("{{ d.a }}", raw=True)
    assert "is t_htc_map0 and (t_htc_v := t_htc_dget(t_htc_o, 'a', t_htc_miss))" in code
    assert env.from_string("{{ d.a }} {{ d.b is defined }}").render(d=FrozenDict(a=1)) == (
        "1 False"
    )
    env.htc_mappings = frozenset({_OwnLookup, dict})
    env.htc_mapping_order = (_OwnLookup, dict)
    code = env.compile("{{ d.a }}", raw=True)
    assert "t_htc_dget(" not in code
    assert "is t_htc_map0 or t_htc_t is t_htc_map1) and 'a' in t_htc_o" in code
    assert env.from_string("{{ d.a }}").render(d=_OwnLookup(a=1)) == "own a"


def test_a_name_read_after_its_set_skips_the_test_for_unset() -> None:
    code = TemplateEnvironment().compile(
        "{% set x = 1 %}{{ x }}{% if y %}{% set z = 1 %}{{ z }}{% endif %}{{ z }}", raw=True
    )
    assert "(undefined(name='x')" not in code
    assert code.count("(undefined(name='z') if l_0_z is missing else l_0_z)") == 1


@pytest.mark.parametrize("template", REFUSED)
def test_the_same_refusal_as_the_stock_sandbox(template: str) -> None:
    env = _ours()
    with pytest.raises((SecurityError, UndefinedError, TypeError)) as stock:
        _render(_stock(), template)
    for _ in range(2):  # the second time with the verdict cached
        with pytest.raises(stock.type):
            _render(env, template)


def test_resources_collections_read_as_attributes_as_the_sandbox_allows() -> None:
    """``resources.<name>`` goes straight to the collection and finds what the generic path
    finds, a collection named with a leading underscore included (Resources answers every
    collection name, as a subscript does)."""
    collections = {
        "services": {"apiVersion": "v1", "kind": "Service"},
        "_hidden": {"apiVersion": "v1", "kind": "Service"},
    }
    s = spec(
        "{{ resources.services | length }} {{ resources._hidden | length }}"
        " {{ resources['_hidden'] | length }} {{ resources.keys is defined }}"
        " {{ resources.nothere is defined }} {{ resources.services is sameas resources['services'] }}"
        "{% for r in [resources] %} {{ r.services | length }}{% endfor %}\n",
        watched=collections,
    )
    view = snapshot(s, [("services", service("a", 80)), ("_hidden", service("b", 80))])
    result = Renderer(s).render(view)
    assert text(result) == "1 1 1 True False True 1"


# -- every receiver, every name --------------------------------------------------------------

RECEIVERS = ["d", "f", "k", "frag", "ns", "words", "plain", "Plain", "'abc'", "none", "zz"]
NAMES = ["a", "get", "items", "keys", "index0", "first", "zz", "_hidden", "__class__", "pop"]
CALLS = [
    *["", ".get('a')", ".get('zz', 5)", ".get()", ".get(words)", ".keys() | list", ".a()"],
    *[" | default('c')", " | default([]) | string", " | lower", " | int", " | int(3)"],
]


def _outcome(env: Any, template: str) -> str:
    try:
        return _render(env, template)
    except Exception as exc:  # the kind of error is what must agree
        return f"raised {type(exc).__name__}"


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(RECEIVERS), st.sampled_from(NAMES), st.sampled_from(CALLS))
def test_any_read_or_call_agrees_with_the_stock_sandbox(
    receiver: str, name: str, call: str
) -> None:
    """``r.name`` and ``r.name.get(...)`` / ``r.get(...)`` on every kind of receiver: the
    direct paths where they apply, the sandbox's everywhere else — the same outcome."""
    ours, stock = _ours(), _stock()
    for template in (
        f"{{{{ {receiver}.{name}{call} }}}}",
        f"{{{{ {receiver}{call} }}}}",
        f"{{% for w in [{receiver}] %}}{{{{ w.{name} }}}} {{{{ loop.index0 }}}}{{% endfor %}}",
    ):
        assert _outcome(ours, template) == _outcome(stock, template), template


def test_a_grown_list_read_from_a_fragment_or_namespace_is_marked_shared() -> None:
    """The direct read marks a grown list as the environment's getattr does, so growing it
    again copies it (controller.render.grown)."""
    grown = GrownList([1])
    holder = Fragment({"x": grown}, Traced(""))
    env = _ours()
    assert env.from_string("{{ f.x }}").render(f=holder) == "[1]"
    assert grown._shared
    grown = GrownList([2])
    env.from_string("{{ n.x }}").render(n=Namespace(x=grown))
    assert grown._shared


def test_store_reads_by_whole_key_are_those_of_the_general_path() -> None:
    """fetch and get_single read entries by whole key directly (list is recorded the same
    direct way): the same answers as the general path (entries()), the same reads recorded, and
    the same refusals (too many keys, an ambiguous get_single), in the sandbox and in the
    stock one."""
    s = spec("")
    view = snapshot(
        s,
        [
            ("services", service("a", 80)),
            ("services", service("b", 81)),
            ("services", service("a", 82, ns="other")),
        ],
    )
    coll = TracingCollection(view.collection("services"))
    base = view.collection("services")
    for keys in [("default", "a"), ("default", "zz"), ("default",), ("other", "a"), ()]:
        general = [e.obj for e in base.entries(*keys)]
        assert coll.fetch(*keys) == general
        if len(general) <= 1:
            assert coll.get_single(*keys) == (general[0] if general else None)
    assert coll.list() == [e.obj for e in base.entries()] == list(base)
    assert coll.list() is not coll.list()  # a list of its own each time
    for bad in [("default", "a", "x"), (1, 2, 3)]:
        with pytest.raises(LookupError):
            coll.fetch(*bad)
    with pytest.raises(LookupError):
        coll.get_single("default")
    rec = Recorder()
    token = current_recorder().set(rec)
    try:
        coll.fetch("default", "a")
        coll.list()
        coll.get_single("default", "zz")
        with pytest.raises(LookupError):
            coll.get_single("default")
    finally:
        current_recorder().reset(token)
    assert [(c, op, args) for c, op, args, _ in rec.reads] == [
        ("services", "fetch", ("default", "a")),
        ("services", "list", ()),
        ("services", "get_single", ("default", "zz")),
        ("services", "get_single", ("default",)),
    ]
    assert rec.tokens == {"services": base.content_token()}
    template = (
        "{{ c.fetch('default', 'a') | length }} {{ c.get_single('default', 'a').metadata.name }}"
        " {{ c.get_single('default', 'zz') }} {{ c.list() | length }}"
    )
    for env in (_ours(), _stock()):
        assert env.from_string(template).render(c=coll) == "1 a None 3"
        with pytest.raises(SecurityError):
            env.from_string("{{ c._view }}").render(c=coll)


@settings(max_examples=60, deadline=None)
@given(
    names=st.lists(st.sampled_from(["a", "b", "1"]), max_size=6),
    asks=st.lists(
        st.tuples(
            st.sampled_from(["fetch", "get_single"]),
            st.lists(st.sampled_from(["default", "other", "a", "b", "zz", 1, None]), max_size=3),
        ),
        max_size=12,
    ),
)
@example(
    names=["a", "1"],
    asks=[("get_single", ["default"]), ("fetch", ["default"]), ("get_single", ["default", 1])],
)
def test_whole_key_reads_read_directly_answer_and_record_as_the_view(
    names: list[str], asks: list[tuple[str, list[Any]]]
) -> None:
    """fetch and get_single by a whole key of strings read the snapshot's table by whole key
    directly (:meth:`TracingCollection._direct`); any key, present or not, of any width and
    type, in a collection keyed by namespace and name and in one keyed by a field several
    objects share (ambiguous), gets the answer, the refusal and the recorded read the view's
    own methods give."""
    watched = {
        **WATCHED,
        "byapp": {"apiVersion": "v1", "kind": "Service", "indexBy": ["metadata.namespace"]},
    }
    s = spec("", watched=watched)
    objs = [(c, service(n, 80 + i)) for i, n in enumerate(names) for c in ("services", "byapp")]
    view = snapshot(s, objs)

    def outcome(coll: TracingCollection, op: str, keys: list[Any]) -> Any:
        rec = Recorder()
        token = current_recorder().set(rec)
        try:
            answer: Any = getattr(coll, op)(*keys)
        except LookupError as exc:
            answer = (type(exc), str(exc))
        finally:
            current_recorder().reset(token)
        ids: Any = [id(o) for o in answer] if type(answer) is list else id(answer)
        if type(answer) is tuple:  # a refusal: its type and message
            ids = answer
        reads = [
            (c, o, a, [id(x) for x in r] if type(r) is list else r) for c, o, a, r in rec.reads
        ]
        return answer, ids, reads, rec.tokens

    for name in ("services", "byapp"):
        direct = TracingCollection(view.collection(name))
        general = TracingCollection(view.collection(name))
        assert direct._exact is not None
        general._exact = None  # the view's own methods
        for op, keys in asks:
            assert outcome(direct, op, keys) == outcome(general, op, keys)


def test_whole_key_reads_do_not_ask_the_view(monkeypatch: pytest.MonkeyPatch) -> None:
    """A backend's two reads (get_single of its Service, fetch of its slices) by a whole key
    of strings do not go down to the view's methods (four calls each, 20,000 reads per full
    render at 10,000 Ingresses); the answer is the view's all the same."""
    from controller.resources.collection import StateView

    s = spec("")
    view = snapshot(s, [("services", service("a", 80))])
    coll = TracingCollection(view.collection("services"))
    want = view.collection("services").get_single("default", "a")

    def asked(*_: Any) -> Any:
        raise AssertionError("asked the view")

    monkeypatch.setattr(StateView, "get_single", asked)
    monkeypatch.setattr(StateView, "fetch", asked)
    assert coll.get_single("default", "a") is want
    assert coll.fetch("default", "a") == [want]
    assert coll.get_single("default", "zz") is None and coll.fetch("default", "zz") == []


_ARG_VALUES = st.one_of(
    st.text(alphabet=st.sampled_from("az09.:/@-' %\t\"#"), max_size=6),
    st.integers(-5, 5),
    st.builds(Traced, st.sampled_from(["a", "a b", ""])),
)


@settings(max_examples=150, deadline=None)
@given(value=_ARG_VALUES)
def test_haproxy_arg_written_out_is_the_filter(value: Any) -> None:
    """``x | haproxy_arg`` is written out for a str of plain characters (the filter's first
    test, a value returned as it is); every value gives what the filter gives, or the same
    refusal, with and without ``logformat`` (which is never written out)."""
    from controller.render.filters import FILTERS

    env = _ours()
    env.filters.update(FILTERS)
    for template in ("{{ v | haproxy_arg }}", "{{ v | haproxy_arg(true) }}"):
        logformat = "true" in template
        try:
            want: Any = FILTERS["haproxy_arg"](value, logformat)
        except ValueError as exc:
            want = str(exc)
        try:
            got: Any = env.from_string(template).render(v=value)
        except ValueError as exc:
            got = str(exc)
        assert got == want


def test_haproxy_arg_of_a_plain_str_is_not_called() -> None:
    """A server line's address and a backend's name (60,000 per full render at 10,000
    Ingresses) pass haproxy_arg's first test without a call of the filter; anything else
    (and the filter under another name, or one that is not ours) is called."""
    from controller.render.filters import FILTERS

    calls: list[Any] = []

    def counting(value: Any, logformat: bool = False) -> str:
        calls.append(value)
        return str(FILTERS["haproxy_arg"](value, logformat))

    env = _ours()
    env.filters.update(FILTERS)
    tpl = env.from_string("{{ a | haproxy_arg }} {{ b | haproxy_arg }} {{ a | haproxy_arg(true) }}")
    assert tpl.render(a="10.0.0.1:80", b="a b") == "10.0.0.1:80 'a b' 10.0.0.1:80"
    assert "t_htc_bare" in env.compile("{{ a | haproxy_arg }}", raw=True)
    env.filters["haproxy_arg"] = counting  # another filter under the name: always called
    tpl = env.from_string("{{ a | haproxy_arg }} {{ b | haproxy_arg }}")
    assert tpl.render(a="10.0.0.1:80", b="a b") == "10.0.0.1:80 'a b'"
    assert calls == ["10.0.0.1:80", "a b"]
