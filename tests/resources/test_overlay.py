"""Overlays show one proposed change through every lookup, and leave the base alone."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.resources import AmbiguousLookup, Overlay, Snapshot, Store, UnknownCollection
from controller.spec.models import WatchedResource


def slice_(name: str, service: str, ns: str = "default", addr: str = "10.0.0.1") -> dict[str, Any]:
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": name,
            "namespace": ns,
            "labels": {"kubernetes.io/service-name": service},
            "managedFields": [{"manager": "controller"}],
        },
        "endpoints": [{"addresses": [addr]}],
    }


def names(objs: list[Any]) -> list[str]:
    return [o["metadata"]["name"] for o in objs]


@pytest.fixture
def base() -> Snapshot:
    store = Store(
        {
            "endpoints": WatchedResource(
                api_version="discovery.k8s.io/v1",
                kind="EndpointSlice",
                index_by=["metadata.namespace", "metadata.labels['kubernetes.io/service-name']"],
            ),
            "services": WatchedResource(api_version="v1", kind="Service"),
        }
    )
    store.apply("endpoints", slice_("web-1", "web"))
    store.apply("endpoints", slice_("api-1", "api"))
    store.apply("endpoints", slice_("other-1", "web", ns="other"))
    store.apply(
        "services",
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "web", "namespace": "default"},
        },
    )
    return store.snapshot()


def test_create_is_seen_by_fetch_list_get_single_and_len(base: Snapshot) -> None:
    over = Overlay(base, "endpoints", "create", slice_("web-2", "web"))
    view = over["endpoints"]
    assert names(view.fetch("default", "web")) == ["web-1", "web-2"]
    assert names(view.list()) == ["api-1", "web-1", "web-2", "other-1"]
    assert names(view.fetch("default")) == ["api-1", "web-1", "web-2"]
    assert view.fetch("other", "api") == []
    with pytest.raises(AmbiguousLookup):
        view.get_single("default", "web")
    assert len(view) == 4
    assert view.get(("default", "web-2")) is not None
    # the base is untouched
    assert names(base["endpoints"].fetch("default", "web")) == ["web-1"]
    assert len(base["endpoints"]) == 3


def test_update_replaces_and_can_move_the_object_in_the_index(base: Snapshot) -> None:
    over = Overlay(base, "endpoints", "update", slice_("web-1", "api", addr="10.9.9.9"))
    view = over["endpoints"]
    assert view.get_single("default", "web") is None
    assert names(view.fetch("default", "api")) == ["api-1", "web-1"]
    moved = view.get(("default", "web-1"))
    assert moved is not None and moved["endpoints"][0]["addresses"] == ("10.9.9.9",)
    assert "managedFields" not in moved["metadata"]  # stripped like a stored object
    assert len(view) == 3


def test_delete_hides_the_object(base: Snapshot) -> None:
    over = Overlay(base, "endpoints", "delete", slice_("api-1", "api"))
    view = over["endpoints"]
    assert view.get_single("default", "api") is None
    assert names(view.list()) == ["web-1", "other-1"]
    assert len(view) == 2
    by_key = Overlay(base, "endpoints", "delete", ("default", "web-1"))
    assert names(by_key["endpoints"].fetch("default")) == ["api-1"]
    absent = Overlay(base, "endpoints", "delete", ("default", "nope"))
    assert len(absent["endpoints"]) == 3


def test_other_collections_come_from_the_base(base: Snapshot) -> None:
    over = Overlay(base, "endpoints", "delete", ("default", "web-1"))
    assert over["services"] is not None and len(over["services"]) == 1
    assert list(over) == ["endpoints", "services"] and "services" in over


def test_overlays_stack(base: Snapshot) -> None:
    one = Overlay(base, "endpoints", "create", slice_("web-2", "web"))
    two = Overlay(one, "endpoints", "delete", ("default", "web-1"))
    three = Overlay(two, "endpoints", "update", slice_("web-2", "web", addr="10.1.1.1"))
    view = three["endpoints"]
    assert names(view.fetch("default", "web")) == ["web-2"]
    single = view.get_single("default", "web")
    assert single is not None and single["endpoints"][0]["addresses"] == ("10.1.1.1",)
    assert len(view) == 3


def test_objects_seen_through_an_overlay_are_frozen(base: Snapshot) -> None:
    over = Overlay(base, "endpoints", "create", slice_("web-2", "web"))
    obj = over["endpoints"].get(("default", "web-2"))
    assert obj is not None
    with pytest.raises(TypeError):
        obj["metadata"]["name"] = "x"


def test_bad_arguments(base: Snapshot) -> None:
    with pytest.raises(UnknownCollection):
        Overlay(base, "secrets", "create", slice_("a", "b"))
    with pytest.raises(ValueError, match="create, update or delete"):
        Overlay(base, "endpoints", "patch", slice_("a", "b"))  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        Overlay(base, "endpoints", "create", ("default", "x"))


NAMES = st.sampled_from(["a", "b", "c", "d"])
SERVICES = st.sampled_from(["web", "api"])
NAMESPACES = st.sampled_from(["x", "y"])
OBJECTS = st.tuples(NAMESPACES, NAMES, SERVICES)


@settings(max_examples=80, deadline=None)
@given(
    st.lists(OBJECTS, max_size=10),
    st.lists(
        st.tuples(st.sampled_from(["create", "update", "delete"]), OBJECTS), min_size=1, max_size=3
    ),
)
def test_stacked_overlays_agree_with_a_naive_model(
    base_objs: list[tuple[str, str, str]], ops: list[tuple[str, tuple[str, str, str]]]
) -> None:
    store = Store(
        {
            "endpoints": WatchedResource(
                api_version="discovery.k8s.io/v1",
                kind="EndpointSlice",
                index_by=["metadata.namespace", "metadata.labels['kubernetes.io/service-name']"],
            )
        }
    )
    model: dict[tuple[str, str], str] = {}
    for ns, name, svc in base_objs:
        store.apply("endpoints", slice_(name, svc, ns))
        model[(ns, name)] = svc
    view: Any = store.snapshot()
    for op, (ns, name, svc) in ops:
        view = Overlay(view, "endpoints", op, slice_(name, svc, ns))  # type: ignore[arg-type]
        if op == "delete":
            model.pop((ns, name), None)
        else:
            model[(ns, name)] = svc

    def expect(*prefix: str) -> list[str]:
        rows = sorted(((ns, svc), (ns, name)) for (ns, name), svc in model.items())
        return [key[1] for ikey, key in rows if ikey[: len(prefix)] == prefix]

    coll = view["endpoints"]
    assert names(coll.list()) == expect()
    assert len(coll) == len(model)
    for ns in ("x", "y"):
        assert names(coll.fetch(ns)) == expect(ns)
        for svc in ("web", "api"):
            assert names(coll.fetch(ns, svc)) == expect(ns, svc)
