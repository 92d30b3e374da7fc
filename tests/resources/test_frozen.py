"""Stored objects cannot be changed through any reader: Python code, Jinja2's sandbox, copies."""

from __future__ import annotations

import copy
import json
import pickle
from collections.abc import Mapping, Sequence
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


def test_equal_small_leaves_are_one_object() -> None:
    a = freeze({"spec": {"ports": [{"name": "http", "port": 80}], "ipFamilies": ["IPv4"]}})
    b = freeze({"spec": {"ports": [{"name": "http", "port": 80}], "ipFamilies": ["IPv4"]}})
    assert a == b and a is not b and a["spec"] is not b["spec"]  # only leaves are shared
    assert a["spec"]["ports"][0] is b["spec"]["ports"][0]
    assert a["spec"]["ipFamilies"] is b["spec"]["ipFamilies"]


def test_sharing_keeps_types_apart() -> None:
    # True == 1 == 1.0 and -0.0 == 0.0 in Python; a shared leaf must not change a value's type
    flag, one = freeze({"x": True}), freeze({"x": 1})
    assert flag["x"] is True and type(one["x"]) is int
    minus, zero = freeze({"x": -0.0}), freeze({"x": 0.0})
    assert str(minus["x"]) == "-0.0" and str(zero["x"]) == "0.0"
    assert freeze({"x": None}) is not freeze({"x": "None"})


def test_the_table_of_shared_leaves_is_bounded() -> None:
    from controller.resources import frozen

    for i in range(frozen._SHARED_MAX + 10):
        freeze({"name": f"n{i}"})
    assert len(frozen._shared) <= frozen._SHARED_MAX
    big = {f"k{i}": "v" for i in range(frozen._LEAF_MAX + 1)}
    assert freeze(big) is not freeze(big)  # larger mappings are not looked up
