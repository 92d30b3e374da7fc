"""Store semantics: indexing, ignoreFields, snapshots, the change feed, resyncs."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from structlog.processors import format_exc_info
from structlog.testing import capture_logs

from controller.resources import (
    AmbiguousLookup,
    Change,
    InvalidObject,
    Store,
    StoreConfigError,
    TooManyKeys,
    UnknownCollection,
)
from controller.spec.models import HAProxyTemplateConfigSpec, WatchedResource

SERVICE_NAME = "metadata.labels['kubernetes.io/service-name']"


def ingress(name: str, ns: str = "default", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": {
            "name": name,
            "namespace": ns,
            "managedFields": [{"manager": "kubectl", "operation": "Apply"}],
        },
        "spec": spec,
    }


def slice_(name: str, service: str | None, ns: str = "default") -> dict[str, Any]:
    labels = {"kubernetes.io/service-name": service} if service is not None else {}
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {"name": name, "namespace": ns, "labels": labels},
        "endpoints": [{"addresses": ["10.0.0.1"]}],
    }


def make_store() -> Store:
    return Store(
        {
            "ingresses": WatchedResource(api_version="networking.k8s.io/v1", kind="Ingress"),
            "endpoints": WatchedResource(
                api_version="discovery.k8s.io/v1",
                kind="EndpointSlice",
                index_by=["metadata.namespace", SERVICE_NAME],
                ignore_fields=["metadata.managedFields", "status"],
            ),
        }
    )


def names(objs: list[Any]) -> list[str]:
    return [o["metadata"]["name"] for o in objs]


# --- indexing -------------------------------------------------------------------------------


def test_fetch_is_a_prefix_lookup_and_list_is_sorted_by_key() -> None:
    store = make_store()
    for ns, name in [("b", "z"), ("a", "y"), ("b", "a"), ("a", "x"), ("ab", "q")]:
        store.apply("ingresses", ingress(name, ns))
    view = store.snapshot().collection("ingresses")
    assert names(view.list()) == ["x", "y", "q", "a", "z"]
    assert names(view.fetch("b")) == ["a", "z"]
    assert names(view.fetch("a")) == ["x", "y"]  # "ab" is a different namespace, not a prefix
    assert names(view.fetch("a", "y")) == ["y"]
    assert view.fetch("c") == []
    assert names(view.fetch()) == names(view.list())
    assert len(view) == 5


def test_non_unique_index_and_get_single() -> None:
    store = make_store()
    store.apply("endpoints", slice_("web-1", "web"))
    store.apply("endpoints", slice_("web-2", "web"))
    store.apply("endpoints", slice_("api-1", "api"))
    view = store.snapshot()["endpoints"]
    assert names(view.fetch("default", "web")) == ["web-1", "web-2"]
    assert names([view.get_single("default", "api")]) == ["api-1"]
    assert view.get_single("default", "nope") is None
    with pytest.raises(AmbiguousLookup) as info:
        view.get_single("default", "web")
    msg = str(info.value)
    assert "endpoints" in msg and "'default', 'web'" in msg and "2 objects" in msg
    assert "default/web-1" in msg and SERVICE_NAME in msg


@given(
    st.lists(
        st.tuples(st.sampled_from(["a", "b", "c", "d"]), st.sampled_from(["web", "api", None])),
        max_size=12,
    )
)
@settings(max_examples=100, deadline=None)
def test_whole_key_lookups_of_a_snapshot_match_a_scan(slices: list[tuple[str, str | None]]) -> None:
    store = make_store()
    snaps = []
    for name, service in slices:  # a name seen again replaces its slice, maybe re-indexed
        store.apply("endpoints", slice_(name, service))
        snaps.append(store.snapshot())
    for snap in snaps:
        view = snap["endpoints"]
        every = view.list()
        for service in ("web", "api", "", "nope"):
            expected = [
                o
                for o in every
                if o["metadata"]["labels"].get("kubernetes.io/service-name", "") == service
            ]
            found = view.fetch("default", service)
            assert found == expected
            found.clear()  # the caller's own list
            assert view.fetch("default", service) == expected


def test_too_many_keys_is_a_clear_error() -> None:
    view = make_store().snapshot()["ingresses"]
    with pytest.raises(TooManyKeys, match=r"indexed by 2 field\(s\).*3 keys"):
        view.fetch("a", "b", "c")


def test_numbers_as_keys_match_their_string_form() -> None:
    store = Store(
        {"s": WatchedResource(api_version="v1", kind="Service", index_by=["spec.ports[0].port"])}
    )
    store.apply(
        "s",
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "a"},
            "spec": {"ports": [{"port": 80}]},
        },
    )
    assert names(store["s"].fetch(80)) == ["a"]  # type: ignore[arg-type]
    assert names(store["s"].fetch("80")) == ["a"]


def test_missing_index_field_stores_under_empty_key_with_warning() -> None:
    store = make_store()
    change = store.apply("endpoints", slice_("orphan", None))
    assert change is not None and change.op == "add"
    assert [d.rule_id for d in change.diagnostics] == ["W8011"]
    assert SERVICE_NAME in change.diagnostics[0].message
    assert (
        change.diagnostics[0].object is not None and change.diagnostics[0].object.name == "orphan"
    )
    assert names(store["endpoints"].fetch("default", "")) == ["orphan"]
    assert [d.rule_id for d in store.diagnostics()] == ["W8011"]
    store.apply("endpoints", slice_("orphan", "web"))  # fixed: the warning goes away
    assert store.diagnostics() == []
    assert names(store["endpoints"].fetch("default", "web")) == ["orphan"]


def test_cluster_scoped_objects_have_empty_namespace_without_warning() -> None:
    store = Store(
        {"classes": WatchedResource(api_version="networking.k8s.io/v1", kind="IngressClass")}
    )
    change = store.apply(
        "classes",
        {
            "apiVersion": "networking.k8s.io/v1",
            "kind": "IngressClass",
            "metadata": {"name": "haproxy"},
        },
    )
    assert change is not None and change.key == ("", "haproxy") and change.diagnostics == ()
    assert store["classes"].get_single("", "haproxy") is not None


def test_object_without_name_is_refused() -> None:
    with pytest.raises(InvalidObject):
        make_store().apply("ingresses", {"metadata": {"namespace": "x"}})


def test_unknown_collection_names_the_known_ones() -> None:
    store = make_store()
    with pytest.raises(UnknownCollection, match="endpoints, ingresses"):
        store.apply("secrets", ingress("a"))
    with pytest.raises(UnknownCollection):
        store.snapshot().collection("secrets")


def test_bad_paths_refuse_the_configuration_with_diagnostics() -> None:
    with pytest.raises(StoreConfigError) as info:
        Store(
            {
                "x": WatchedResource(
                    api_version="v1",
                    kind="Service",
                    index_by=["metadata..name"],
                    ignore_fields=["spec[0]"],
                )
            }
        )
    ids = [d.rule_id for d in info.value.diagnostics]
    assert ids == ["E8010", "E8010"]
    assert "spec.watchedResources.x.indexBy[0]" in info.value.diagnostics[0].message


def test_from_spec() -> None:
    spec = HAProxyTemplateConfigSpec.model_validate(
        {
            "haproxyConfig": {"template": ""},
            "watchedResources": {"svc": {"apiVersion": "v1", "kind": "Service"}},
        }
    )
    assert Store.from_spec(spec).names() == ["svc"]


# --- ignoreFields ---------------------------------------------------------------------------


def test_ignore_fields_are_stripped_and_changes_there_are_no_change() -> None:
    store = make_store()
    first = store.apply("ingresses", ingress("a", rules=[]))
    assert first is not None and "managedFields" not in first.new["metadata"]  # type: ignore[index]
    again = ingress("a", rules=[])
    again["metadata"]["managedFields"] = [{"manager": "someone-else"}]
    assert store.apply("ingresses", again) is None
    assert store.version == 1
    changed = store.apply("ingresses", ingress("a", rules=[{"host": "x"}]))
    assert changed is not None and changed.op == "update" and store.version == 2


def test_bracketed_ignore_path() -> None:
    store = Store(
        {
            "s": WatchedResource(
                api_version="v1",
                kind="Service",
                ignore_fields=[
                    "metadata.annotations['kubectl.kubernetes.io/last-applied-configuration']"
                ],
            )
        }
    )
    obj = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": "a",
            "annotations": {
                "kubectl.kubernetes.io/last-applied-configuration": "{...}",
                "keep": "me",
            },
        },
    }
    stored = store.apply("s", obj)
    assert stored is not None and dict(stored.new["metadata"]["annotations"]) == {"keep": "me"}  # type: ignore[index]


# --- snapshots ------------------------------------------------------------------------------


def test_snapshot_never_sees_later_changes() -> None:
    store = make_store()
    store.apply("ingresses", ingress("a", rules=[1]))
    store.apply("ingresses", ingress("b"))
    before = store.snapshot()
    store.apply("ingresses", ingress("a", rules=[2]))
    store.delete("ingresses", ("default", "b"))
    store.apply("ingresses", ingress("c"))
    store.apply("endpoints", slice_("e", "web"))
    view = before["ingresses"]
    assert names(view.list()) == ["a", "b"]
    assert view.fetch("default", "a")[0]["spec"]["rules"] == (1,)
    assert len(before["endpoints"]) == 0
    assert before.version == 2 and store.version == 6
    after = store.snapshot()
    assert names(after["ingresses"].list()) == ["a", "c"]
    assert after["ingresses"].fetch("default", "a")[0]["spec"]["rules"] == (2,)


def test_snapshot_without_intervening_change_shares_state_and_live_view_follows() -> None:
    store = make_store()
    live = store["ingresses"]
    store.apply("ingresses", ingress("a"))
    s1, s2 = store.snapshot(), store.snapshot()
    assert s1.collection("ingresses")._state is s2.collection("ingresses")._state  # O(collections)
    store.apply("ingresses", ingress("b"))
    assert names(live.list()) == ["a", "b"]
    assert names(s1["ingresses"].list()) == ["a"]


def test_snapshot_objects_are_read_only() -> None:
    store = make_store()
    store.apply("ingresses", ingress("a", rules=[{"host": "x"}]))
    obj = store.snapshot()["ingresses"].get_single("default", "a")
    assert obj is not None
    with pytest.raises(TypeError):
        obj["spec"]["rules"][0]["host"] = "evil"


def test_input_object_is_copied() -> None:
    store = make_store()
    src = ingress("a", rules=[{"host": "x"}])
    store.apply("ingresses", src)
    src["spec"]["rules"][0]["host"] = "changed-by-caller"
    assert store["ingresses"].fetch("default", "a")[0]["spec"]["rules"][0]["host"] == "x"


def test_snapshot_is_a_mapping_of_collections() -> None:
    snap = make_store().snapshot()
    assert list(snap) == ["endpoints", "ingresses"] and len(snap) == 2
    assert snap["ingresses"].name == "ingresses"
    assert "ingresses" in snap and "secrets" not in snap


# --- change feed ----------------------------------------------------------------------------


def test_change_feed_reports_every_op_in_version_order() -> None:
    store = make_store()
    seen: list[Change] = []
    unsubscribe = store.subscribe(seen.append)
    store.apply("ingresses", ingress("a"))
    store.apply("ingresses", ingress("a"))  # no change, no event
    store.apply("ingresses", ingress("a", rules=[]))
    store.delete("ingresses", ingress("a"))
    store.delete("ingresses", ingress("a"))  # already gone, no event
    assert [(c.op, c.key, c.version) for c in seen] == [
        ("add", ("default", "a"), 1),
        ("update", ("default", "a"), 2),
        ("delete", ("default", "a"), 3),
    ]
    add, update, delete = seen
    assert add.old is None and add.new is not None
    assert update.old == add.new and update.new is not None and update.new["spec"] == {"rules": ()}
    assert delete.new is None and delete.old == update.new
    unsubscribe()
    store.apply("ingresses", ingress("b"))
    assert len(seen) == 3 and store.version == 4


def test_delete_by_key_forms() -> None:
    store = make_store()
    for n in "abc":
        store.apply("ingresses", ingress(n))
    assert store.delete("ingresses", ("default", "a")) is not None
    assert store.delete("ingresses", "default/b") is not None
    assert store.delete("ingresses", ingress("c")) is not None
    assert len(store["ingresses"]) == 0


def test_a_failing_listener_does_not_stop_the_change_or_other_listeners() -> None:
    store = make_store()
    seen: list[str] = []

    def broken(_: Change) -> None:
        raise RuntimeError("boom")

    store.subscribe(broken)
    store.subscribe(lambda c: seen.append(c.op))
    with capture_logs(processors=[format_exc_info]) as logs:
        assert store.apply("ingresses", ingress("a")) is not None
    assert seen == ["add"] and len(store["ingresses"]) == 1
    [entry] = logs
    assert entry["event"] == "store listener failed" and "boom" in entry["exception"]


def test_listener_may_read_a_snapshot() -> None:
    store = make_store()
    versions: list[int] = []
    store.subscribe(lambda c: versions.append(store.snapshot().version))
    store.apply("ingresses", ingress("a"))
    assert versions == [1]


# --- resync ---------------------------------------------------------------------------------


def test_replace_adds_updates_and_deletes() -> None:
    store = make_store()
    for n in "abc":
        store.apply("ingresses", ingress(n))
    changes = store.replace("ingresses", [ingress("b", rules=[]), ingress("a"), ingress("d")])
    assert [(c.op, c.key[1]) for c in changes] == [("update", "b"), ("add", "d"), ("delete", "c")]
    assert names(store["ingresses"].list()) == ["a", "b", "d"]
    assert store.replace("ingresses", [ingress("a"), ingress("b", rules=[]), ingress("d")]) == []
    assert [c.op for c in store.replace("ingresses", [])] == ["delete"] * 3


def test_replace_leaves_kept_keys_as_the_watch_left_them() -> None:
    """A relist's list can predate what a watch delivered while it was in flight: an update
    (b), a create (n) and a delete (c) the watch made meanwhile all survive the replace."""
    store = make_store()
    for n in "abc":
        store.apply("ingresses", ingress(n))
    listed = [ingress("a", rules=[]), ingress("b"), ingress("c")]  # the list, taken earlier
    store.apply("ingresses", ingress("b", rules=[{"host": "newer.test"}]))
    store.apply("ingresses", ingress("n"))
    store.delete("ingresses", ingress("c"))
    keep = {("default", "b"), ("default", "n"), ("default", "c")}
    changes = store.replace("ingresses", listed, keep=keep)
    assert [(c.op, c.key[1]) for c in changes] == [("update", "a")]
    assert names(store["ingresses"].list()) == ["a", "b", "n"]
    [b] = [o for o in store["ingresses"].list() if o["metadata"]["name"] == "b"]
    assert b["spec"]["rules"][0]["host"] == "newer.test"


def test_reconfigure_keeps_unchanged_and_empties_changed_collections() -> None:
    store = make_store()
    store.apply("ingresses", ingress("a"))
    store.apply("endpoints", slice_("e", "web"))
    changes = store.reconfigure(
        {
            "ingresses": WatchedResource(api_version="networking.k8s.io/v1", kind="Ingress"),
            "endpoints": WatchedResource(api_version="discovery.k8s.io/v1", kind="EndpointSlice"),
            "services": WatchedResource(api_version="v1", kind="Service"),
        }
    )
    assert [(c.op, c.collection) for c in changes] == [("delete", "endpoints")]
    assert len(store["ingresses"]) == 1 and len(store["endpoints"]) == 0
    store.apply("endpoints", slice_("e", "web"))
    assert store["endpoints"].index_by == ("metadata.namespace", "metadata.name")
    assert [c.collection for c in store.reconfigure({})] == ["endpoints", "ingresses"]
    assert store.names() == []


# --- threads and a model check ----------------------------------------------------------------


def test_concurrent_writers_and_snapshots_stay_consistent() -> None:
    store = make_store()
    errors: list[BaseException] = []

    def writer(prefix: str) -> None:
        try:
            for i in range(300):
                store.apply("ingresses", ingress(f"{prefix}{i}", ns=prefix))
                if i % 3 == 0:
                    store.delete("ingresses", (prefix, f"{prefix}{i}"))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    def reader() -> None:
        try:
            for _ in range(200):
                snap = store.snapshot()
                view = snap["ingresses"]
                listed = view.list()
                assert len(listed) == len(view)
                keys = [(o["metadata"]["namespace"], o["metadata"]["name"]) for o in listed]
                assert keys == sorted(keys)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(p,)) for p in "xyz"] + [
        threading.Thread(target=reader)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(store["ingresses"]) == 3 * 200 and store.version == 3 * 400


OPS = st.lists(
    st.tuples(
        st.sampled_from(["apply", "delete", "snapshot"]),
        st.sampled_from(["a", "b"]),  # namespace
        st.sampled_from(["x", "y", "z"]),  # name
        st.sampled_from(["web", "api", None]),  # service label
    ),
    max_size=40,
)


@settings(max_examples=60, deadline=None)
@given(OPS)
def test_store_agrees_with_a_naive_model(ops: list[tuple[str, str, str, str | None]]) -> None:
    """Every snapshot answers fetch() exactly like a brute-force scan of a plain dict."""
    store = make_store()
    model: dict[tuple[str, str], dict[str, Any]] = {}
    snaps: list[tuple[Any, dict[tuple[str, str], dict[str, Any]]]] = []
    for op, ns, name, svc in ops:
        if op == "apply":
            model[(ns, name)] = slice_(name, svc, ns)
            store.apply("endpoints", slice_(name, svc, ns))
        elif op == "delete":
            model.pop((ns, name), None)
            store.delete("endpoints", (ns, name))
        else:
            snaps.append((store.snapshot(), dict(model)))
    snaps.append((store.snapshot(), dict(model)))
    for snap, frozen_model in snaps:
        view = snap["endpoints"]

        def expect(
            *prefix: str, m: dict[tuple[str, str], dict[str, Any]] = frozen_model
        ) -> list[str]:
            rows = []
            for (ns, name), obj in m.items():
                key = (ns, obj["metadata"]["labels"].get("kubernetes.io/service-name", ""))
                if key[: len(prefix)] == prefix:
                    rows.append((key, (ns, name)))
            return [k[1][1] for k in sorted(rows)]

        assert names(view.list()) == expect()
        for ns in "ab":
            assert names(view.fetch(ns)) == expect(ns)
            for svc in ("web", "api", ""):
                assert names(view.fetch(ns, svc)) == expect(ns, svc)


def test_templates_read_snapshots_through_the_sandbox() -> None:
    from jinja2 import StrictUndefined
    from jinja2.exceptions import UndefinedError
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    store = make_store()
    store.apply("ingresses", ingress("b"))
    store.apply("ingresses", ingress("a"))
    store.apply("endpoints", slice_("e", "web"))
    env = ImmutableSandboxedEnvironment(undefined=StrictUndefined)
    out = env.from_string(
        "{% for i in resources.ingresses.fetch('default') %}{{ i.metadata.name }} {% endfor %}"
        "{{ resources['endpoints'].get_single('default', 'web').metadata.name }} "
        "{{ resources.ingresses | length }}"
    ).render(resources=store.snapshot())
    assert out == "a b e 2"
    with pytest.raises(UndefinedError, match="secrets"):
        env.from_string("{{ resources.secrets.list() }}").render(resources=store.snapshot())
