"""Stored objects cannot be changed through any reader: Python code, Jinja2's sandbox, copies."""

from __future__ import annotations

import copy
import json
import pickle
import random
import sys
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pytest
from jinja2.exceptions import SecurityError
from jinja2.sandbox import ImmutableSandboxedEnvironment

from controller.resources import FrozenDict, freeze, thaw
from controller.resources.paths import StripTree

SOURCE: dict[str, Any] = {
    "metadata": {
        "name": "web",
        "labels": {"app": "web"},
        "managedFields": [{"manager": "kubectl"}],
    },
    "spec": {"rules": [{"host": "a.example", "paths": [{"path": "/"}]}]},
}


def test_freeze_strips_and_keeps_plain_access() -> None:
    frozen = freeze(SOURCE, {"metadata": {"managedFields": None}})
    assert "managedFields" not in frozen["metadata"]
    assert "managedFields" in SOURCE["metadata"]  # the input is not touched
    assert isinstance(frozen, Mapping) and isinstance(frozen, dict)
    assert isinstance(frozen["spec"]["rules"], Sequence)
    assert frozen["spec"]["rules"][0]["host"] == "a.example"
    assert json.loads(json.dumps(frozen)) == thaw(frozen)


def test_a_frozen_object_is_stripped_by_copy_only_when_it_has_a_key_to_strip() -> None:
    """Freezing what is frozen already (manifests read frozen) copies nothing when no key is
    to be removed, and strips as from the plain object when one is."""
    strip: StripTree = {"metadata": {"managedFields": None, "annotations": None}, "status": None}
    bare = freeze({k: v for k, v in SOURCE.items()} | {"metadata": {"name": "web"}})
    assert freeze(bare, strip) is bare
    once = freeze(SOURCE)
    again = freeze(once, strip)
    assert again is not once and again == freeze(SOURCE, strip)
    assert "managedFields" not in again["metadata"] and "managedFields" in once["metadata"]
    assert again["spec"] is once["spec"]  # what is not on a stripped path is shared
    nested = freeze({"metadata": FrozenDict(name="web", annotations={"a": "b"})})
    assert freeze(nested, strip) == {"metadata": {"name": "web"}}
    odd = freeze({"metadata": ("not", "a", "mapping")})  # a strip path through a list
    assert freeze(odd, strip) == odd


@pytest.mark.parametrize(
    "mutate",
    [
        lambda d: d.__setitem__("x", 1),
        lambda d: d.__delitem__("metadata"),
        lambda d: d.update(x=1),
        lambda d: d.setdefault("x", 1),
        lambda d: d.pop("metadata"),
        lambda d: d.popitem(),
        lambda d: d.clear(),
        lambda d: d["metadata"]["labels"].__setitem__("app", "evil"),
    ],
)
def test_mutating_methods_raise(mutate: object) -> None:
    frozen = freeze(SOURCE)
    with pytest.raises(TypeError, match="read-only"):
        mutate(frozen)  # type: ignore[operator]
    assert frozen["metadata"]["labels"]["app"] == "web"


def test_in_place_or_raises() -> None:
    frozen = freeze(SOURCE)
    with pytest.raises(TypeError):
        frozen |= {"x": 1}


def test_lists_become_tuples() -> None:
    frozen = freeze(SOURCE)
    with pytest.raises(AttributeError):
        frozen["spec"]["rules"].append({})


def test_copies_stay_frozen_and_thaw_gives_mutable() -> None:
    frozen = freeze(SOURCE)
    deep = copy.deepcopy(frozen)
    assert deep == frozen and isinstance(deep["metadata"], FrozenDict)
    assert copy.copy(frozen) is frozen
    assert pickle.loads(pickle.dumps(frozen)) == frozen
    plain = thaw(frozen)
    plain["metadata"]["name"] = "changed"
    plain["spec"]["rules"].append({})
    assert frozen["metadata"]["name"] == "web"


def test_keys_are_interned() -> None:
    a = freeze(json.loads('{"metadata": {"namespace": "x"}}'))
    b = freeze(json.loads('{"metadata": {"namespace": "y"}}'))
    ka = next(iter(a["metadata"]))
    kb = next(iter(b["metadata"]))
    assert ka is kb


def test_short_values_are_shared_while_they_recur_and_one_offs_are_not_interned() -> None:
    """A short string value that recurs is one object; a one-off (a name, an address) is
    not put in the interpreter's table of interned strings, which would keep an entry for
    it as long as it lives, and the table of recent ones stays bounded."""
    from controller.resources import frozen

    frozen.forget_shared()
    a = freeze(json.loads('{"kind": "Service", "spec": {"type": "ClusterIP"}}'))
    b = freeze(json.loads('{"kind": "Service", "spec": {"type": "ClusterIP"}}'))
    assert a["kind"] is b["kind"] and a["spec"]["type"] is b["spec"]["type"]
    name = "".join(["one-off-", "name-4711"])  # built at run time: not interned by Python
    stored = freeze({"metadata": {"name": name}})["metadata"]["name"]
    assert stored is name
    assert sys.intern("".join(["one-off-", "name-4711"])) is not stored  # not interned
    for i in range(3 * frozen._SHARED_MAX):
        freeze({"name": f"n{i}"})
    assert len(frozen._texts.newer) <= frozen._SHARED_MAX
    assert len(frozen._texts.older) <= frozen._SHARED_MAX
    again = freeze(json.loads('{"kind": "Service"}'))
    assert again["kind"] == "Service"


def test_jinja_sandbox_reads_but_cannot_mutate() -> None:
    env = ImmutableSandboxedEnvironment()
    frozen = freeze(SOURCE)
    out = env.from_string(
        "{{ o.metadata.name }} {% for r in o.spec.rules %}{{ r.host }}{% endfor %} "
        "{{ o.metadata.labels | dictsort | first | join('=') }}"
    ).render(o=frozen)
    assert out == "web a.example app=web"
    with pytest.raises(SecurityError):
        env.from_string("{{ o.metadata.update({'name': 'x'}) }}").render(o=frozen)
    with pytest.raises(SecurityError):
        env.from_string("{{ o.__class__ }}{{ o.__setitem__('a', 1) }}").render(o=frozen)


def test_equal_small_values_are_one_object_but_objects_are_not() -> None:
    a = freeze({"metadata": {"name": "a"}, "spec": {"ports": [{"name": "http", "port": 80}]}})
    b = freeze({"metadata": {"name": "a"}, "spec": {"ports": [{"name": "http", "port": 80}]}})
    assert a == b and a is not b  # an object is told apart by identity (store, render caches)
    assert a["spec"]["ports"][0] is b["spec"]["ports"][0]
    assert a["spec"]["ports"] is b["spec"]["ports"] and a["spec"] is b["spec"]
    assert a["metadata"] is b["metadata"]
    template = {"template": {"metadata": {"labels": {"app": "x"}}, "spec": {}}}
    assert freeze(template)["template"] is not freeze(template)["template"]


def test_an_ingress_shares_its_repeated_backend() -> None:
    """Nested values are shared once their parts are: the second backend of the same
    service is the first one, whether the input repeats it or aliases it (a YAML anchor)."""
    backend = {"service": {"name": "web", "port": {"number": 80}}}
    spec = {"rules": [{"http": {"paths": [
        {"path": "/", "pathType": "Prefix", "backend": backend},
        {"path": "/api", "pathType": "Prefix", "backend": json.loads(json.dumps(backend))},
    ]}}]}  # fmt: skip
    paths = freeze({"metadata": {"name": "i"}, "spec": spec})["spec"]["rules"][0]["http"]["paths"]
    assert paths[0]["backend"] is paths[1]["backend"]
    assert paths[0] is not paths[1] and paths[0]["backend"] == backend


HOSTILE: list[Any] = [
    "a\nb", "#", "${x}", "\x00", "\u2028", "x" * 100, "", "1", "True", "None", "0.0",
    1, 0, -1, 2**70, True, False, None, 0.0, -0.0, 1.5, float("inf"),
]  # fmt: skip


def _values(seed: int) -> Iterator[Any]:
    """Small nested values mixing every kind of part, each repeated in several shapes."""
    rnd = random.Random(seed)
    for _ in range(3000):
        depth = rnd.randint(0, 3)
        value: Any = rnd.choice(HOSTILE)
        for _ in range(depth):
            parts = [value] + [rnd.choice(HOSTILE) for _ in range(rnd.randint(0, 3))]
            rnd.shuffle(parts)
            if rnd.random() < 0.5:
                value = parts
            else:
                value = {rnd.choice(["a", "b", "c\n", ""]) + str(i): p for i, p in enumerate(parts)}
        yield value


def _same(a: Any, b: Any) -> bool:
    """Equal with the same types all the way down (``True == 1``, ``-0.0 == 0.0``)."""
    if isinstance(a, Mapping):
        return isinstance(b, Mapping) and list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple):
        return isinstance(b, list | tuple) and len(a) == len(b) and all(map(_same, a, b))
    if isinstance(a, float) and isinstance(b, float):
        return repr(a) == repr(b)
    return type(a) is type(b) and a == b


def test_sharing_never_changes_a_value(monkeypatch: pytest.MonkeyPatch) -> None:
    """Hostile strings, booleans next to integers, -0.0, nesting: each frozen value reads as
    its input, although most of them are shared and the table turns over many times while
    earlier values are dropped (their identities reused)."""
    from controller.resources import frozen

    monkeypatch.setattr(frozen, "_SHARED_MAX", 64)
    kept = []
    for i, value in enumerate(_values(7)):
        got = freeze(value)
        assert _same(got, value), (value, got)
        assert _same(thaw(got), value)
        if i % 10 == 0:
            kept.append((value, got))  # the rest is dropped at once
    assert all(_same(got, value) for value, got in kept)
    shared = freeze([{"a": [True]}, {"a": [1]}, {"a": ["x"]}, {"a": [{"b": None}]}] * 2)
    assert shared[0] is shared[4] and shared[0] is not shared[1]
    assert [type(s["a"][0]) for s in shared[:4]] == [bool, int, str, FrozenDict]
    # Keys list a mapping's keys before its values: sizes and orders must still tell apart.
    lookalikes: list[Any] = [
        {"a": "b", "c": "d"}, {"a": "c", "b": "d"}, {"c": "a", "d": "b"}, {"a": "b"},
        ["a", "b", "c", "d"], ["a", "b"], {"a": "b", "c": 1}, {"a": "b", "c": "1"},
        {"a": "b", "c": "d", "e": "f"}, {"a": "b", "c": {"d": "e"}}, {"a": "b", "c": ["d"]},
    ]  # fmt: skip
    for _ in range(2):
        for value in lookalikes:
            assert _same(freeze(value), value), value


def test_a_shared_value_is_read_only_everywhere_it_appears() -> None:
    a = freeze({"metadata": {"name": "a"}, "spec": {"tls": [{"hosts": ["x"]}]}})
    b = freeze({"metadata": {"name": "b"}, "spec": {"tls": [{"hosts": ["x"]}]}})
    assert a["spec"] is b["spec"]
    with pytest.raises(TypeError):
        a["spec"]["tls"][0]["hosts"] = ("y",)
    with pytest.raises(TypeError):
        a["spec"]["extra"] = 1
    assert thaw(b) == {"metadata": {"name": "b"}, "spec": {"tls": [{"hosts": ["x"]}]}}


def test_sharing_keeps_types_apart() -> None:
    # True == 1 == 1.0 and -0.0 == 0.0 in Python; a shared leaf must not change a value's type
    flag, one = freeze({"x": True}), freeze({"x": 1})
    assert flag["x"] is True and type(one["x"]) is int
    minus, zero = freeze({"x": -0.0}), freeze({"x": 0.0})
    assert str(minus["x"]) == "-0.0" and str(zero["x"]) == "0.0"
    assert freeze({"x": None}) is not freeze({"x": "None"})


def test_the_table_of_shared_values_is_bounded_and_keeps_what_repeats() -> None:
    from controller.resources import frozen

    frozen.forget_shared()
    first = freeze({"x": {"port": 80}})["x"]
    for i in range(3 * frozen._SHARED_MAX):
        freeze({"name": f"n{i}"})
        if i % 1000 == 0:
            assert freeze({"x": {"port": 80}})["x"] is first  # found again, kept shared
        assert len(frozen._values.newer) <= frozen._SHARED_MAX
        assert len(frozen._values.older) <= frozen._SHARED_MAX
    big = {f"k{i}": "v" for i in range(frozen._LEAF_MAX + 1)}
    assert freeze(big) is not freeze(big)  # larger mappings are not looked up
