"""The store is filled by the controller's own list before kopf's watches start; an object
deleted between that list and kopf's is reported by neither, and the handover list made once
kopf has synced removes it. In process, against the real API server: the race is made certain
by deleting the object exactly between the two lists (the only seam used is the moment the
watch set starts)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from controller.operator.app import OperatorApp, OperatorOptions
from controller.operator.watchset import WatchSet
from controller.resources import Store
from controller.spec.models import HAProxyTemplateConfigSpec
from controller.testbed.cluster import Namespace
from tests.operator.operator_kit import backend_manifests, config_doc, free_port

pytestmark = pytest.mark.cluster

NOBODY = "10.244.200.204"


async def test_an_object_deleted_between_the_two_lists_leaves_the_store(
    kube: Namespace, tmp_path: Path
) -> None:
    doc = config_doc(kube.name, free_port())
    kube.apply(yaml.safe_dump(doc))
    kube.apply(backend_manifests(kube.name, "kept", NOBODY))
    kube.apply(backend_manifests(kube.name, "gone", NOBODY))

    class DeletingBetweenLists(OperatorApp):
        def _start_watch(
            self,
            spec: HAProxyTemplateConfigSpec,
            store: Store,
            expected: dict[str, int] | None = None,
        ) -> WatchSet:
            assert _names(store) == {"kept", "gone"}
            kube.plane.kubectl("delete", "service", "gone", "-n", kube.name)
            return super()._start_watch(spec, store, expected)

    app = DeletingBetweenLists(_options(kube, tmp_path))
    store, watch_set, handovers = await _watch_filled(app)
    try:
        await _handed_over(app, handovers)
        names = _names(store)
        assert names == {"kept"}
        assert watch_set.synced.is_set()
    finally:
        await watch_set.stop()


def _options(kube: Namespace, tmp_path: Path) -> OperatorOptions:
    return OperatorOptions(
        namespace=kube.name,
        config="quickstart",
        kubeconfig=str(kube.plane.kubeconfig),
        haproxy="/usr/sbin/haproxy",
        status_addr=None,
        work_dir=tmp_path / "run",
        leader_election=False,
    )


async def _watch_filled(app: OperatorApp) -> tuple[Store, WatchSet, float]:
    """The app's store filled by its own list and its watch set started, as ``start`` does;
    also the handover count before (the metrics are the process's: other tests count too)."""
    spec = app._spec_of(await app._read_config())
    assert spec is not None
    store = Store(spec.watched_resources)
    app.store = store
    handovers = _handovers(app)
    return store, await app._watch_filled(spec, store), handovers


def _handovers(app: OperatorApp) -> float:
    return app.metrics.sample("htc_resyncs_total", {"reason": "handover"})


async def _handed_over(app: OperatorApp, before: float) -> None:
    """Waits for kopf's sync and then the handover list of ``app``: bounded at 60 s."""
    for _ in range(300):
        if _handovers(app) > before:
            return
        await asyncio.sleep(0.2)
    raise AssertionError("no handover list within 60 s")


def _names(store: Store) -> set[str]:
    return {str(obj["metadata"]["name"]) for obj in store.collection("services").list()}


async def test_a_change_delivered_while_a_relist_lists_is_not_undone(
    kube: Namespace, tmp_path: Path
) -> None:
    """The relist's list is taken, then the Service changes and the watch delivers the change
    before the list is applied: the older listed state must not overwrite it (nothing would
    ever deliver that change again)."""
    kube.apply(yaml.safe_dump(config_doc(kube.name, free_port())))
    kube.apply(backend_manifests(kube.name, "web", NOBODY))
    app = OperatorApp(_options(kube, tmp_path))
    store, watch_set, handovers = await _watch_filled(app)
    real_list = app._list_all

    def list_then_change(watched: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
        lists = real_list(watched)
        if "services" not in watched:
            return lists
        kube.plane.kubectl("label", "service", "web", "-n", kube.name, "step=after-the-list")
        for _ in range(150):  # bounded: 30 s for the watch to deliver it
            if _label(store) == "after-the-list":
                break
            time.sleep(0.2)
        assert _label(store) == "after-the-list"
        return lists

    try:
        await _handed_over(app, handovers)
        app._list_all = list_then_change  # type: ignore[method-assign]
        await app.relist("test", store)
        assert _label(store) == "after-the-list"
    finally:
        await watch_set.stop()


def _label(store: Store) -> str | None:
    [web] = store.collection("services").list()
    label = web["metadata"].get("labels", {}).get("step")
    return None if label is None else str(label)
