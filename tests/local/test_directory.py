"""The directory adapter against a real temp directory, the real config loader and watchfiles.

The sync tests call ``sync()`` directly (what every watch batch does), so they are exact and
fast; the watch tests run the real watcher with a rescan interval far longer than the test, so
a passing test proves that filesystem events, not polling, delivered the change.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from controller.diagnostics import Diagnostic
from controller.local.directory import DirectoryAdapter
from controller.resources import Change
from controller.spec.loader import parse_config
from controller.spec.models import WatchedResource

CONFIG = """\
apiVersion: haproxy-template.dev/v1alpha1
kind: HAProxyTemplateConfig
metadata: {{name: local, namespace: default}}
spec:
  haproxyConfig: {{template: "global\\n"}}
  watchedResources:
    services: {{apiVersion: v1, kind: Service}}
{extra}"""

ENDPOINTS = """\
    endpoints:
      apiVersion: discovery.k8s.io/v1
      kind: EndpointSlice
      indexBy: [metadata.namespace, "metadata.labels['kubernetes.io/service-name']"]
"""


def service(name: str, port: int = 80, ns: str = "default") -> str:
    return (
        f"apiVersion: v1\nkind: Service\nmetadata: {{name: {name}, namespace: {ns}}}\n"
        f"spec: {{ports: [{{port: {port}}}]}}\n"
    )


class Recorder:
    """The runtime's side: parses configs with the real loader, records what it was told."""

    def __init__(self) -> None:
        self.configs: list[tuple[Path, int]] = []
        self.config_errors: list[Diagnostic] = []
        self.reports: list[list[Diagnostic]] = []

    def on_config(
        self, doc: Mapping[str, Any], file: Path, line: int
    ) -> Mapping[str, WatchedResource] | None:
        self.configs.append((file, line))
        cfg, diags = parse_config(doc, file=str(file))
        self.config_errors = diags
        return cfg.spec.watched_resources if cfg else None

    def on_diagnostics(self, diags: list[Diagnostic]) -> None:
        self.reports.append(diags)

    @property
    def last(self) -> list[str]:
        return [d.rule_id for d in self.reports[-1]]


@pytest.fixture
def root(tmp_path: Path) -> Path:
    (tmp_path / "config.yaml").write_text(CONFIG.format(extra=""))
    (tmp_path / "svc").mkdir()
    (tmp_path / "svc" / "a.yaml").write_text(service("a") + "---\n" + service("b"))
    return tmp_path


def adapter(root: Path, rec: Recorder, **kw: Any) -> DirectoryAdapter:
    return DirectoryAdapter(root, on_config=rec.on_config, on_diagnostics=rec.on_diagnostics, **kw)


def names(ad: DirectoryAdapter, collection: str = "services") -> list[str]:
    return [o["metadata"]["name"] for o in ad.store[collection].list()]


def port(ad: DirectoryAdapter, name: str) -> int:
    obj = ad.store["services"].get_single("default", name)
    assert obj is not None
    return int(obj["spec"]["ports"][0]["port"])


def rewrite(path: Path, text: str) -> None:
    """Write and make sure the stat signature moves (mtime ticks are coarse)."""
    before = path.stat().st_mtime_ns if path.exists() else 0
    path.write_text(text)
    if path.stat().st_mtime_ns == before:
        os.utime(path, ns=(before + 1_000_000, before + 1_000_000))


# --- initial load and sync ---------------------------------------------------------------------


def test_load_initial_reads_config_then_objects(root: Path) -> None:
    rec = Recorder()
    ad = adapter(root, rec)
    assert ad.load_initial() == []
    assert rec.configs == [(root / "config.yaml", 1)]
    assert names(ad) == ["a", "b"]
    assert rec.reports == [[]]  # reported once, even when empty


def test_the_store_holds_the_objects_the_adapter_read(root: Path) -> None:
    # One copy per object: the adapter keeps what it read (for broken files and duplicate
    # claims) and the store stores those very objects, read frozen, instead of copies.
    ad = adapter(root, Recorder())
    ad.load_initial()
    [state] = [s for p, s in ad._files.items() if p.name == "a.yaml"]
    stored = {o["metadata"]["name"]: o for o in ad.store["services"].list()}
    assert all(stored[m.obj["metadata"]["name"]] is m.obj for m in state.objects)


def test_add_edit_remove_files_and_objects(root: Path) -> None:
    rec = Recorder()
    ad = adapter(root, rec)
    ad.load_initial()
    seen: list[tuple[str, str]] = []
    ad.store.subscribe(lambda c: seen.append((c.op, c.key[1])))
    (root / "svc" / "c.yaml").write_text(service("c"))
    assert ad.sync()
    rewrite(root / "svc" / "a.yaml", service("a", port=81))  # b removed from the file
    ad.sync()
    assert names(ad) == ["a", "c"] and port(ad, "a") == 81
    (root / "svc" / "c.yaml").unlink()
    ad.sync()
    assert names(ad) == ["a"]
    assert sorted(seen) == sorted([("add", "c"), ("update", "a"), ("delete", "b"), ("delete", "c")])
    assert not ad.sync()  # nothing changed on disk: nothing read
    assert rec.configs == [(root / "config.yaml", 1)]  # resources never re-deliver the config


def test_half_saved_file_keeps_its_objects_until_it_parses(root: Path) -> None:
    rec = Recorder()
    ad = adapter(root, rec)
    ad.load_initial()
    bad = root / "svc" / "a.yaml"
    rewrite(bad, service("a", port=99) + "---\napiVersion: v1\nkind: Service\nmetadata: {name: b\n")
    ad.sync()
    assert names(ad) == ["a", "b"] and port(ad, "a") == 80  # nothing lost, nothing half-applied
    assert rec.last == ["E8002"]
    loc = rec.reports[-1][0].location
    assert loc is not None and loc.file == str(bad) and loc.line is not None and loc.line >= 5
    rewrite(bad, service("a", port=99))
    ad.sync()
    assert names(ad) == ["a"] and port(ad, "a") == 99
    assert rec.last == []


def test_object_without_name_keeps_the_file_as_it_was(root: Path) -> None:
    rec = Recorder()
    ad = adapter(root, rec)
    ad.load_initial()
    rewrite(
        root / "svc" / "a.yaml",
        service("a") + "---\napiVersion: v1\nkind: Service\nmetadata: {namespace: x}\n",
    )
    ad.sync()
    assert names(ad) == ["a", "b"] and rec.last == ["E8003"]


def test_duplicate_definitions_fall_back_instead_of_deleting(root: Path) -> None:
    rec = Recorder()
    ad = adapter(root, rec)
    ad.load_initial()
    (root / "svc" / "z.yaml").write_text(service("a", port=8080))
    ad.sync()
    assert port(ad, "a") == 80  # svc/a.yaml sorts first and wins
    assert rec.last == ["W8013"]
    assert (
        "svc/a.yaml:1" in rec.reports[-1][0].message
        and "svc/z.yaml:1" in rec.reports[-1][0].message
    )
    rewrite(root / "svc" / "a.yaml", service("b"))  # a moves away: the other definition takes over
    ad.sync()
    assert names(ad) == ["a", "b"] and port(ad, "a") == 8080
    assert rec.last == []


def test_same_size_rewrite_is_seen_when_the_watcher_names_the_file(root: Path) -> None:
    rec = Recorder()
    ad = adapter(root, rec)
    ad.load_initial()
    f = root / "svc" / "a.yaml"
    st = f.stat()
    f.write_text(service("a", port=81) + "---\n" + service("b"))  # same size as before
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))  # as if within one mtime tick
    assert f.stat().st_size == st.st_size
    ad.sync(hinted=[str(f)])
    assert port(ad, "a") == 81


def test_config_edit_reconfigures_and_reroutes(root: Path) -> None:
    rec = Recorder()
    ad = adapter(root, rec)
    ad.load_initial()
    (root / "eps.yaml").write_text(
        "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\n"
        "metadata: {name: a-1, namespace: default, labels: {kubernetes.io/service-name: a}}\n"
    )
    ad.sync()
    assert [d.rule_id for d in rec.reports[-1]] == ["I8014"]  # not watched yet
    rewrite(root / "config.yaml", CONFIG.format(extra=ENDPOINTS))
    ad.sync()
    assert len(rec.configs) == 2 and rec.last == []
    assert ad.store.names() == ["endpoints", "services"]
    eps = ad.store["endpoints"].get_single("default", "a")
    assert eps is not None and eps["metadata"]["name"] == "a-1"
    assert names(ad) == ["a", "b"]  # the unchanged collection kept its objects


def test_rejected_config_keeps_the_previous_one(root: Path) -> None:
    rec = Recorder()
    ad = adapter(root, rec)
    ad.load_initial()
    rewrite(root / "config.yaml", CONFIG.format(extra="    broken: {apiVersion: v1}\n"))
    ad.sync()
    assert len(rec.configs) == 2 and rec.config_errors  # the runtime saw and refused it
    assert ad.store.names() == ["services"] and names(ad) == ["a", "b"]
    ad.sync()
    assert len(rec.configs) == 2  # the same rejected document is not offered again


def test_unindexable_config_is_refused_before_the_runtime_sees_it(root: Path) -> None:
    rec = Recorder()
    ad = adapter(root, rec)
    ad.load_initial()
    broken = ENDPOINTS.replace("metadata.namespace,", "metadata..namespace,")
    rewrite(root / "config.yaml", CONFIG.format(extra=broken))
    ad.sync()
    assert len(rec.configs) == 1  # on_config was not asked
    assert rec.last == ["E8010"]
    d = rec.reports[-1][0]
    assert "spec.watchedResources.endpoints.indexBy[0]" in d.message
    assert d.location is not None and d.location.file == str(root / "config.yaml")
    assert ad.store.names() == ["services"]


def test_config_file_outside_the_directory(
    root: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    elsewhere = tmp_path_factory.mktemp("cfg") / "htc.yaml"
    (root / "config.yaml").rename(elsewhere)
    (root / "svc" / "ignored.yaml").write_text(CONFIG.format(extra=ENDPOINTS))  # not the config
    rec = Recorder()
    ad = adapter(root, rec, config_file=elsewhere)
    ad.load_initial()
    assert rec.configs == [(elsewhere, 1)] and rec.last == []
    assert ad.store.names() == ["services"] and names(ad) == ["a", "b"]
    elsewhere.unlink()
    ad.sync()
    assert rec.last == ["E8002", "E8015"] and names(ad) == ["a", "b"]


def test_exactly_one_config_is_required(root: Path) -> None:
    rec = Recorder()
    ad = adapter(root, rec)
    ad.load_initial()
    (root / "second.yaml").write_text(CONFIG.format(extra=""))
    ad.sync()
    assert rec.last == ["E8015"] and "config.yaml:1" in rec.reports[-1][0].message
    (root / "second.yaml").unlink()
    (root / "config.yaml").unlink()
    ad.sync()
    assert (
        rec.last == ["E8015"]
        and "no document with kind: HAProxyTemplateConfig" in rec.reports[-1][0].message
    )
    assert names(ad) == ["a", "b"]  # the accepted config stays in effect


def test_an_empty_directory_says_it_has_no_config(tmp_path: Path) -> None:
    """Nothing to read must still be judged: the audit's empty directory printed nothing."""
    rec = Recorder()
    ad = adapter(tmp_path, rec)
    assert [d.rule_id for d in ad.load_initial()] == ["E8015"]
    assert (
        rec.last == ["E8015"]
        and "no document with kind: HAProxyTemplateConfig" in rec.reports[-1][0].message
    )
    ad.sync()
    assert len(rec.reports) == 1  # unchanged, so not reported again
    (tmp_path / "config.yaml").write_text(CONFIG.format(extra=""))
    ad.sync()
    assert rec.last == [] and rec.configs == [(tmp_path / "config.yaml", 1)]


def test_index_warnings_carry_file_and_line(root: Path) -> None:
    rec = Recorder()
    (root / "config.yaml").write_text(CONFIG.format(extra=ENDPOINTS))
    (root / "eps.yaml").write_text(
        service("x")
        + "---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {name: nolabel, namespace: default}\n"
    )
    ad = adapter(root, rec)
    ad.load_initial()
    assert rec.last == ["W8011"]
    loc = rec.reports[-1][0].location
    assert loc is not None and loc.file == str(root / "eps.yaml") and loc.line == 6


def test_namespace_labels_from_namespace_manifests(root: Path) -> None:
    rec = Recorder()
    (root / "config.yaml").write_text(
        CONFIG.format(extra="").replace(
            "services: {apiVersion: v1, kind: Service}",
            "services: {apiVersion: v1, kind: Service, namespaceSelector: {matchLabels: {team: a}}}",
        )
    )
    (root / "ns.yaml").write_text(
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: default, labels: {team: b}}\n"
    )
    ad = adapter(root, rec)
    ad.load_initial()
    assert names(ad) == []
    rewrite(
        root / "ns.yaml",
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: default, labels: {team: a}}\n",
    )
    ad.sync()
    assert names(ad) == ["a", "b"]


def test_missing_directory_is_reported_not_raised(tmp_path: Path) -> None:
    rec = Recorder()
    ad = adapter(tmp_path / "nope", rec)
    ad.load_initial()
    assert rec.last[0] == "E8002"


def test_a_failing_callback_is_reported(root: Path) -> None:
    reports: list[list[Diagnostic]] = []

    def boom(doc: Mapping[str, Any], file: Path, line: int) -> None:
        raise RuntimeError("config handler crashed")

    ad = DirectoryAdapter(root, on_config=boom, on_diagnostics=reports.append)
    ad.load_initial()
    assert [d.rule_id for d in reports[-1]] == ["F0001"]
    assert "crashed" in reports[-1][0].message


# --- the real watcher ----------------------------------------------------------------------------


@pytest.fixture
async def watching(root: Path) -> AsyncIterator[tuple[DirectoryAdapter, Recorder]]:
    rec = Recorder()
    ad = adapter(root, rec, debounce_ms=50, step_ms=10, rescan_interval=60)
    ad.load_initial()
    stop = asyncio.Event()
    task = asyncio.create_task(ad.run(stop))
    await asyncio.wait_for(ad.ready.wait(), 5)
    yield ad, rec
    stop.set()
    await asyncio.wait_for(task, 5)
    assert ad.stats["timeout_rescans"] == 0  # events did the work


async def until(cond: Callable[[], bool], timeout: float = 5.0) -> None:
    async def poll() -> None:
        while not cond():
            await asyncio.sleep(0.01)

    await asyncio.wait_for(poll(), timeout)


async def test_watcher_applies_add_edit_and_delete(
    root: Path, watching: tuple[DirectoryAdapter, Recorder]
) -> None:
    ad, _ = watching
    (root / "svc" / "c.yaml").write_text(service("c"))
    await until(lambda: "c" in names(ad))
    (root / "svc" / "c.yaml").write_text(service("c", port=9000))
    await until(lambda: port(ad, "c") == 9000)
    (root / "svc" / "c.yaml").unlink()
    await until(lambda: "c" not in names(ad))
    assert ad.stats["event_batches"] >= 3


async def test_watcher_keeps_objects_of_a_broken_file_and_recovers(
    root: Path, watching: tuple[DirectoryAdapter, Recorder]
) -> None:
    ad, rec = watching
    (root / "svc" / "a.yaml").write_text("apiVersion: v1\nkind: [")
    await until(lambda: bool(rec.reports) and rec.last == ["E8002"])
    assert names(ad) == ["a", "b"]
    (root / "svc" / "a.yaml").write_text(service("a", port=70))
    await until(lambda: rec.last == [] and names(ad) == ["a"])
    assert port(ad, "a") == 70


async def test_a_burst_of_edits_ends_in_the_final_state(
    root: Path, watching: tuple[DirectoryAdapter, Recorder]
) -> None:
    ad, _ = watching
    changes: list[Change] = []
    ad.store.subscribe(changes.append)
    f = root / "svc" / "burst.yaml"
    for i in range(40):
        f.write_text(service("burst", port=1000 + i))  # same size every time
        if i % 10 == 5:
            (root / "svc" / f"tmp{i}.yaml").write_text(service(f"tmp{i}"))
        if i % 10 == 9:
            (root / "svc" / f"tmp{i - 4}.yaml").unlink()
    await until(lambda: "burst" in names(ad) and port(ad, "burst") == 1039)
    await asyncio.sleep(0.2)  # let any straggling batch land
    assert names(ad) == ["a", "b", "burst"]
    assert port(ad, "burst") == 1039
    assert len(changes) < 40  # coalesced: far fewer store changes than writes


def test_an_unexpected_error_is_reported_and_the_next_sync_starts_over(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import controller.local.directory as directory

    rec = Recorder()
    ad = adapter(root, rec)
    ad.load_initial()
    real = directory.load_file  # type: ignore[attr-defined]

    def failing(path: Path, **_options: Any) -> Any:
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(directory, "load_file", failing)  # fault injection: no real fault exists
    rewrite(root / "svc" / "a.yaml", service("a"))  # b removed while reading fails
    assert not ad.sync()
    assert rec.last == ["F0001"] and "disk on fire" in rec.reports[-1][0].message
    monkeypatch.setattr(directory, "load_file", real)
    ad.sync()
    assert rec.last == [] and names(ad) == ["a"]
