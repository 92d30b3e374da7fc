"""What one stored entry costs: an object indexed by namespace and name (the default) keeps
one tuple for its key and its index key (controller.resources.collection.prepare)."""

from __future__ import annotations

from controller.resources import Store
from controller.resources.api import Entry
from controller.resources.collection import CollectionConfig
from controller.spec.models import WatchedResource
from tests.resources.test_store import SERVICE_NAME, ingress, make_store, names, slice_


def test_the_default_index_key_is_the_object_key_itself() -> None:
    config = CollectionConfig.compile(
        "ingresses", WatchedResource(api_version="networking.k8s.io/v1", kind="Ingress")
    )
    entry, problems = config.prepare(ingress("web", "shop"))
    assert problems == ()
    assert entry.index_key == entry.key == ("shop", "web")
    assert entry.index_key is entry.key


def test_other_index_keys_stay_their_own() -> None:
    by_service = CollectionConfig.compile(
        "endpoints",
        WatchedResource(
            api_version="discovery.k8s.io/v1",
            kind="EndpointSlice",
            index_by=["metadata.namespace", SERVICE_NAME],
        ),
    )
    entry, _ = by_service.prepare(slice_("web-1", "web"))
    assert (entry.index_key, entry.key) == (("default", "web"), ("default", "web-1"))
    by_name = CollectionConfig.compile(
        "classes",
        WatchedResource(
            api_version="networking.k8s.io/v1", kind="IngressClass", index_by=["metadata.name"]
        ),
    )
    entry, _ = by_name.prepare({"metadata": {"name": "haproxy"}})
    assert (entry.index_key, entry.key) == (("haproxy",), ("", "haproxy"))


def test_lookups_and_order_are_unchanged() -> None:
    store: Store = make_store()
    for ns, name in [("b", "z"), ("a", "y"), ("b", "a"), ("a", "x")]:
        store.apply("ingresses", ingress(name, ns))
    store.delete("ingresses", ("b", "a"))
    store.apply("ingresses", ingress("a", "b"))
    view = store.snapshot().collection("ingresses")
    assert names(view.list()) == ["x", "y", "a", "z"]
    assert names(view.fetch("b")) == ["a", "z"]
    assert view.get_single("a", "y") is not None and view.get_single("a", "q") is None


def test_a_whole_key_of_one_entry_is_kept_as_the_entry_itself() -> None:
    """The table of a shared state by whole index key keeps the one entry of a key (nearly
    every key) itself, not in a list of its own (88 bytes more per object); a key of several
    keeps them in order, and lookups answer as the general way does."""
    store: Store = make_store()
    for name, service in [("a-1", "a"), ("b-1", "b"), ("b-2", "b"), ("c-1", "c")]:
        store.apply("endpoints", slice_(name, service))
    view = store.snapshot().collection("endpoints")
    assert names(view.fetch("default", "b")) == ["b-1", "b-2"]
    assert names(view.fetch("default", "a")) == ["a-1"] and view.fetch("default", "x") == []
    assert names([view.get_single("default", "c")]) == ["c-1"]
    assert view.get_single("default", "x") is None
    exact = view._state._exact
    assert exact is not None
    one = exact["default", "a"]
    assert isinstance(one, Entry) and one.key == ("default", "a-1")
    several = exact["default", "b"]
    assert isinstance(several, list) and [e.key[1] for e in several] == ["b-1", "b-2"]
    for keys in [("default",), ("default", "a"), ("default", "b"), ("default", "x")]:
        assert view.fetch(*keys) == [e.obj for e in view.entries(*keys)]
