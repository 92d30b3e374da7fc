"""Which Ingresses the quickstart serves (its `our-ingresses` snippet), against the rule
written out in Python: spec.ingressClassName equal to ours while no IngressClass of that name
names another controller; without the field, the kubernetes.io/ingress.class annotation
instead; with neither (or a null class), only when that IngressClass is ours and the
default.

The snippet takes a fast path (two memoized filters) when every Ingress has the field, and
a loop otherwise; random mixes reach both, rendered by one long-lived renderer so that the
filters' memo answers from earlier calls too."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from controller.render import Renderer, listmemo
from controller.resources import Store
from controller.testing import ingress
from tests.render.render_kit import quickstart_spec

CONTROLLER = "haproxy-template.dev/ingress-controller"

# How an Ingress names its class: (spec.ingressClassName, the annotation); None = absent.
KINDS: list[tuple[Any, str | None]] = [
    ("haproxy", None),
    ("other", None),
    ("haproxy", "other"),  # the field wins over the annotation
    (None, "haproxy"),
    (None, "other"),
    (None, None),
    ("", None),
    ("null", None),  # spec.ingressClassName: null
    ("null", "haproxy"),  # a null field: the annotation is not read
]

# The IngressClass named "haproxy": absent, ours and default, ours, another controller's.
CLASSES = ["absent", "default", "ours", "foreign"]


def _ingress(i: int, kind: int) -> dict[str, Any]:
    cls, annotation = KINDS[kind]
    obj = ingress(f"ing-{i}", f"h{i}.test", ("/", "Prefix", "svc", 80), cls=None)
    if cls == "null":
        obj["spec"]["ingressClassName"] = None
    elif cls is not None:
        obj["spec"]["ingressClassName"] = cls
    if annotation is not None:
        obj["metadata"]["annotations"] = {"kubernetes.io/ingress.class": annotation}
    return obj


def _class(which: str) -> dict[str, Any] | None:
    if which == "absent":
        return None
    meta: dict[str, Any] = {"name": "haproxy"}
    if which == "default":
        meta["annotations"] = {"ingressclass.kubernetes.io/is-default-class": "true"}
    controller = "someone.else/controller" if which == "foreign" else CONTROLLER
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "IngressClass",
        "metadata": meta,
        "spec": {"controller": controller},
    }


def _expected(kinds: list[int], which: str) -> list[str]:
    class_ok = which != "foreign"
    is_default = which == "default"
    out = []
    for i, kind in enumerate(kinds):
        cls, annotation = KINDS[kind]
        named = None if cls == "null" else cls if cls is not None else annotation
        if (named == "haproxy" and class_ok) or (named is None and is_default):
            out.append(f"h{i}.test")
    return out


def _served(renderer: Renderer, store: Store) -> list[str]:
    result = renderer.render(store.snapshot())
    assert result.ok, [d.message for d in result.diagnostics]
    hosts = next(e for e in result.files if e.path == "maps/hosts.map").content.decode()
    return [line.split()[0] for line in hosts.splitlines() if line and line[0] != "#"]


@pytest.fixture(autouse=True, scope="module")
def _memo_every_list() -> Any:
    """The filters' memo takes lists this short too, so the fast path goes through it."""
    saved = listmemo.MIN_ITEMS
    listmemo.MIN_ITEMS = 1
    yield
    listmemo.MIN_ITEMS = saved


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(
            st.sampled_from(CLASSES),
            st.lists(st.integers(0, len(KINDS) - 1), min_size=1, max_size=6),
        ),
        min_size=1,
        max_size=4,
    )
)
def test_the_ingresses_served_follow_the_class_rule(steps: list[tuple[str, list[int]]]) -> None:
    spec = quickstart_spec()
    store = Store.from_spec(spec)
    renderer = Renderer(spec)
    present = 0
    for which, kinds in steps:
        cls = _class(which)
        if cls is None:
            store.delete("ingressclasses", ("", "haproxy"))
        else:
            store.apply("ingressclasses", cls)
        for i, kind in enumerate(kinds):
            store.apply("ingresses", _ingress(i, kind))
        for i in range(len(kinds), present):
            store.delete("ingresses", ("default", f"ing-{i}"))
        present = len(kinds)
        want = _expected(kinds, which)
        assert sorted(_served(renderer, store)) == sorted(want), (which, kinds)
        assert sorted(_served(Renderer(spec), store)) == sorted(want)
