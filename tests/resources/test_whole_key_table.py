"""The whole-key table a shared collection state keeps (``CollectionState._exact``) is carried
into the writable copy the next change makes and kept up to date there, instead of being
built again by a pass over every entry on the next render's first lookup. It must always be
the table that pass would build, and no earlier snapshot's table may change."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from controller.resources import Store
from controller.resources.collection import CollectionState, _by_whole_key
from tests.resources.test_store import make_store, slice_


def _state(store: Store, name: str) -> CollectionState:
    state: CollectionState = store.snapshot().collection(name)._state
    return state


def _ids(table: dict[Any, Any]) -> dict[Any, tuple[int, ...]]:
    """The table by identity: a key's entries (one, or a list of several), in order."""
    return {k: tuple(map(id, v)) if isinstance(v, list) else (id(v),) for k, v in table.items()}


def test_the_next_change_carries_the_table_instead_of_building_it_again() -> None:
    store = make_store()
    for i in range(5):
        store.apply("endpoints", slice_(f"web-{i}", "web"))
    assert _state(store, "endpoints").by_whole_key() is not None  # built by a lookup
    store.apply("endpoints", slice_("api-1", "api"))
    state = _state(store, "endpoints")
    assert state._exact is not None  # before any lookup of this state
    assert _ids(state._exact) == _ids(_by_whole_key(state.order))


_OPS = st.lists(
    st.tuples(
        st.sampled_from(["apply", "delete", "lookup"]),
        st.integers(0, 7),  # the slice
        st.sampled_from(["web", "api", "db", None]),  # its Service (None: no label)
        st.sampled_from(["default", "shop"]),
    ),
    max_size=40,
)


@settings(max_examples=150, deadline=None)
@given(_OPS)
def test_a_carried_table_is_the_table_a_pass_would_build(ops: list[Any]) -> None:
    store = make_store()
    earlier: list[tuple[CollectionState, dict[Any, tuple[int, ...]]]] = []
    for op, i, service, ns in ops:
        if op == "apply":
            store.apply("endpoints", slice_(f"s-{i}", service, ns))
        elif op == "delete":
            store.delete("endpoints", (ns, f"s-{i}"))
        else:
            state = _state(store, "endpoints")
            table = state.by_whole_key()
            assert table is not None
            assert _ids(table) == _ids(_by_whole_key(state.order))
            earlier.append((state, _ids(table)))
    state = _state(store, "endpoints")
    table = state.by_whole_key()
    assert table is not None and _ids(table) == _ids(_by_whole_key(state.order))
    for old, seen in earlier:  # copies never wrote into a shared state's table
        assert old._exact is not None and _ids(old._exact) == seen


def test_a_snapshot_lists_its_objects_once_and_never_changes_that_list() -> None:
    """A shared state makes its object list once for every caller (a render asks for it
    several times, and an unchanged collection is the same state next render); the next
    change lists afresh and leaves the earlier snapshot's list as it was."""
    store = make_store()
    for i in range(3):
        store.apply("endpoints", slice_(f"web-{i}", "web"))
    before = store.snapshot().collection("endpoints")
    listed = before.list()
    assert before.list() is listed
    assert [o["metadata"]["name"] for o in listed] == ["web-0", "web-1", "web-2"]
    store.apply("endpoints", slice_("api-1", "api"))
    after = store.snapshot().collection("endpoints")
    assert after.list() is not listed and len(after.list()) == 4
    assert [o["metadata"]["name"] for o in before.list()] == ["web-0", "web-1", "web-2"]
    live = store.collection("endpoints")  # writable until the next snapshot: a new list each time
    assert live.list() == after.list()
