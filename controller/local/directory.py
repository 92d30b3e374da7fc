"""The directory adapter: a folder of manifests feeds the store, and keeps feeding it.

It is the local counterpart of the kopf handlers and, like them, only writes to the store and
reports; rendering, validation and deploys happen downstream of the store's change feed.

Why it is built the way it is:

* **Disk is the truth, events are hints.** Every batch of filesystem events triggers a rescan
  of the tree (a ``stat`` per file) and a re-read of each file whose identity, size or
  mtime changed, plus every file an event named (mtime ticks are coarse: two same-size writes
  can share one). Whatever order a burst of edits arrives in, the last batch re-reads the last
  state, so the final state is never lost. A timeout batch every ``rescan_interval`` also
  catches what no event reported (the gap before the watcher started, filesystems without
  inotify, a ConfigMap's ``..data`` symlink swap).
* **A broken file keeps its last good objects.** A half-saved file that does not parse (E8002)
  or holds an object without identity (E8003) is reported, and its previously loaded objects
  stay in the store until the file parses again. A file that parses but no longer lists an
  object is an intentional removal: that object is deleted.
* **Definitions are claims.** The same object in two files is reported (W8013) and the first
  in (file, line) order is stored; removing it from one file falls back to the other.
* **The configuration is the caller's.** The one HAProxyTemplateConfig document found is
  handed to ``on_config(doc, file, line)``, which validates it (``controller.spec.loader``) and
  returns its ``watchedResources`` to accept it or None to reject it. Only an accepted config
  whose collections changed reconfigures the store and re-routes every object. A document
  whose index paths or field selectors the store cannot use (E8010, E8012) is refused before
  ``on_config`` sees it, so the caller never adopts a config the store cannot follow.
* ``on_diagnostics`` receives the *complete* current list whenever it changes, so a fixed file
  makes its problems disappear; an empty list means all is well.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import watchfiles

from controller.diagnostics import Diagnostic, Location, Phase, make
from controller.local.claims import ClaimKey, Claims
from controller.observability import get_logger
from controller.resources import (
    Manifest,
    Store,
    check_raw_watched,
    check_watched,
    collections_for,
    iter_manifest_files,
    load_file,
    object_key,
    object_ref,
    thaw,
    unwatched_note,
)
from controller.spec import API_GROUP, KIND, WatchedResource, no_config_kind

_log = get_logger("controller.local")

ConfigCallback = Callable[[Mapping[str, Any], Path, int], Mapping[str, WatchedResource] | None]
"""Gets a HAProxyTemplateConfig document and where it is; returns its watchedResources to
accept it, None to reject it (the previous configuration then stays in effect)."""

DiagnosticsCallback = Callable[[list[Diagnostic]], None]

Signature = tuple[int, int, int]
"""(inode, size, mtime_ns) of a file; a change in any of them means "read it again"."""


def is_config(obj: Mapping[str, Any]) -> bool:
    api_version = obj.get("apiVersion")
    return (
        obj.get("kind") == KIND
        and isinstance(api_version, str)
        and api_version.partition("/")[0] == API_GROUP
    )


def _unreadable(path: Path, reason: str) -> Diagnostic:
    return make("E8002", Phase.SPEC, reason, location=Location(file=str(path)))


@dataclass
class _FileState:
    sig: Signature
    objects: list[Manifest] = field(default_factory=list)
    """The last good read's resources (kept while the file is broken)."""
    configs: list[Manifest] = field(default_factory=list)
    problems: list[Diagnostic] = field(default_factory=list)
    """Problems of the latest read; non-empty means the file is broken."""
    unrouted: list[Manifest] = field(default_factory=list)


class DirectoryAdapter:
    """Loads ``root`` into ``store`` (``load_initial``), then follows it (``run``)."""

    def __init__(
        self,
        root: Path,
        *,
        on_config: ConfigCallback,
        on_diagnostics: DiagnosticsCallback | None = None,
        store: Store | None = None,
        config_file: Path | None = None,
        debounce_ms: int = 200,
        step_ms: int = 30,
        rescan_interval: float = 2.0,
        force_polling: bool | None = None,
    ) -> None:
        self.root = Path(root)
        self.config_file = Path(config_file) if config_file is not None else None
        self.store = store if store is not None else Store({})
        self.ready = asyncio.Event()
        """Set once the watcher runs and has rescanned: edits from then on are seen."""
        self.stats = {"event_batches": 0, "timeout_rescans": 0, "files_read": 0}
        self._on_config = on_config
        self._on_diagnostics = on_diagnostics
        self._debounce_ms = debounce_ms
        self._step_ms = step_ms
        self._rescan_interval = rescan_interval
        self._force_polling = force_polling
        self._files: dict[Path, _FileState] = {}
        self._claims = Claims()
        self._watched: dict[str, WatchedResource] = self.store.watched()
        self._accepted = False
        self._config_doc: Mapping[str, Any] | None = None
        self._config_problems: list[Diagnostic] = []
        """About the last config document handed to on_config."""
        self._config_count_problems: list[Diagnostic] = []
        self._root_problems: list[Diagnostic] = []
        self._ns_labels: dict[str, dict[str, str]] | None = None
        self._reported: list[Diagnostic] | None = None
        self._needs_rebuild = False

    # --- public -------------------------------------------------------------------------

    def load_initial(self) -> list[Diagnostic]:
        """Read everything once, before anyone renders; returns (and reports) the diagnostics."""
        self.sync()  # the first sync always reports, even an empty list
        return self.diagnostics()

    def sync(self, hinted: Iterable[str | Path] = ()) -> bool:
        """Bring the store in line with the disk; ``hinted`` files are re-read regardless.

        Returns whether any file was (re)read or removed. Never raises: an unexpected error
        is logged and reported as F0001, and the next sync starts over from the disk.
        """
        try:
            return self._sync({Path(p) for p in hinted})
        except Exception as exc:
            _log.exception("directory sync failed", root=str(self.root))
            self._files.clear()  # forget everything: the next sync re-reads and rebuilds
            self._claims.clear()
            self._needs_rebuild = True
            self._root_problems = [
                make("F0001", Phase.SPEC, f"reading {self.root} failed unexpectedly: {exc!r}")
            ]
            self._report()
            return False

    def diagnostics(self) -> list[Diagnostic]:
        """Everything currently wrong with the directory's content."""
        out = list(self._root_problems)
        for path in sorted(self._files):
            out += self._files[path].problems
        out += self._config_count_problems
        out += self._config_problems
        out += self._duplicate_problems()
        out += self._unwatched_notes()
        out += self._object_problems()
        return out

    async def run(self, stop: asyncio.Event) -> None:
        """Follow the directory until ``stop`` is set. Call :meth:`load_initial` first."""
        while not stop.is_set():
            if not self.root.is_dir():
                self.sync()  # reports the missing directory; retried until it appears
                await self._wait(stop, self._rescan_interval)
                continue
            try:
                await self._watch(stop)
            except OSError as exc:
                _log.warning(
                    "watching the directory failed; retrying", root=str(self.root), error=str(exc)
                )
                await self._wait(stop, self._rescan_interval)

    # --- watching -------------------------------------------------------------------------

    async def _watch(self, stop: asyncio.Event) -> None:
        paths: list[Path] = [self.root]
        config = self.config_file
        if config is not None and config.exists() and not self._inside_root(config):
            paths.append(config)
        watch_stop = asyncio.Event()  # awatch sets it when cancelled; the caller's stays theirs
        batches = watchfiles.awatch(
            *paths,
            watch_filter=None,  # every event is a hint; the rescan decides what matters
            debounce=self._debounce_ms,
            step=self._step_ms,
            stop_event=watch_stop,
            rust_timeout=max(1, int(self._rescan_interval * 1000)),
            yield_on_timeout=True,
            force_polling=self._force_polling,
            ignore_permission_denied=True,
        )
        # awatch creates its watcher synchronously in its first step, before it first waits.
        # Let that step run, then rescan: whatever changed since load_initial() and before the
        # watcher existed is picked up now, and everything later arrives as events.
        relay = asyncio.create_task(self._relay(stop, watch_stop))
        pending = asyncio.ensure_future(anext(batches))
        try:
            await asyncio.sleep(0)
            self.sync()
            self.ready.set()
            while True:
                try:
                    batch = await pending
                except StopAsyncIteration:
                    return
                if batch:
                    self.stats["event_batches"] += 1
                else:
                    self.stats["timeout_rescans"] += 1
                self.sync(p for _, p in batch)
                if stop.is_set() or not self.root.is_dir():
                    return
                pending = asyncio.ensure_future(anext(batches))
        finally:
            watch_stop.set()
            relay.cancel()
            if not pending.done():
                with contextlib.suppress(StopAsyncIteration, asyncio.CancelledError):
                    await pending
            await batches.aclose()

    @staticmethod
    async def _relay(stop: asyncio.Event, watch_stop: asyncio.Event) -> None:
        await stop.wait()
        watch_stop.set()

    @staticmethod
    async def _wait(stop: asyncio.Event, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), seconds)

    def _inside_root(self, path: Path) -> bool:
        try:
            path.resolve().relative_to(self.root.resolve())
        except ValueError:
            return False
        return True

    # --- syncing --------------------------------------------------------------------------

    def _scan(self) -> dict[Path, Signature]:
        files: list[Path] = []
        self._root_problems = []
        if self.root.is_dir():
            files = list(iter_manifest_files(self.root))
        else:
            self._root_problems.append(_unreadable(self.root, "not a readable directory"))
        if self.config_file is not None and self.config_file not in files:
            files.append(self.config_file)
        out: dict[Path, Signature] = {}
        for path in files:
            try:
                st = os.stat(path)
            except OSError as exc:
                if path == self.config_file:
                    self._root_problems.append(
                        _unreadable(path, f"cannot read: {exc.strerror or exc}")
                    )
                continue
            out[path] = (st.st_ino, st.st_size, st.st_mtime_ns)
        return out

    def _sync(self, hinted: set[Path]) -> bool:
        scan = self._scan()
        removed = [p for p in self._files if p not in scan]
        changed = [
            p
            for p, sig in scan.items()
            if p in hinted or p not in self._files or self._files[p].sig != sig
        ]
        if not removed and not changed:
            # Nothing to read, but the config count still has to be judged: an empty (or
            # config-less) directory never reaches the code below, and must still say E8015.
            # With the files unchanged the config document is unchanged too, so this only
            # recomputes the count problem and never hands a config over twice.
            if self._update_config():
                self._rebuild()
            self._report()
            return False
        for path in removed:
            del self._files[path]
        for path in changed:
            self._read(path, scan[path])
        rebuild = self._update_config() or self._needs_rebuild
        self._needs_rebuild = False
        labels = self._namespace_labels()
        if labels != self._ns_labels:
            self._ns_labels = labels
            rebuild = rebuild or self._uses_namespace_selectors()
        if rebuild:
            self._rebuild()
        else:
            for path in sorted({*removed, *changed}):
                self._reroute(path)
        self._report()
        return True

    def _read(self, path: Path, sig: Signature) -> None:
        # Frozen as the store keeps them: the store then holds these very objects, and the
        # copy kept here (for a broken file, and for claims that fall back) costs nothing.
        manifests, problems = load_file(path, frozen=True)
        self.stats["files_read"] += 1
        old = self._files.get(path)
        if problems:
            state = old or _FileState(sig)
            state.sig, state.problems = sig, problems
            self._files[path] = state
            return
        objects, configs = [], []
        for m in manifests:
            if not is_config(m.obj):
                objects.append(m)
            elif self.config_file is None or path == self.config_file:
                configs.append(m)
        self._files[path] = _FileState(sig, objects, configs)

    def _update_config(self) -> bool:
        """Hand a new config document to the caller; True when the collections changed."""
        found = [m for p in sorted(self._files) for m in self._files[p].configs]
        if len(found) != 1:
            self._config_count_problems = [self._not_one_config(found)]
            return False
        self._config_count_problems = []
        doc = found[0]
        if self._config_doc is not None and doc.obj == self._config_doc:
            return False
        self._config_doc = doc.obj
        here = Location(file=str(doc.file), line=doc.line)
        self._config_problems = [
            p.model_copy(update={"location": here}) for p in check_raw_watched(doc.obj)
        ]
        if self._config_problems:
            return False  # the store could not index as asked: refuse before anyone adopts it
        try:
            watched = self._on_config(thaw(doc.obj), doc.file, doc.line)
        except Exception as exc:
            _log.exception("on_config failed", file=doc.file, line=doc.line)
            self._config_problems = [
                make(
                    "F0001",
                    Phase.SPEC,
                    f"handling the configuration failed unexpectedly: {exc!r}",
                    location=here,
                )
            ]
            return False
        if watched is None:
            return False
        watched = dict(watched)
        problems = check_watched(watched)
        self._config_problems = [p.model_copy(update={"location": here}) for p in problems]
        if any(p.rule_id == "E8010" for p in problems):
            return False  # the store cannot index as asked; keep the previous collections
        if self._accepted and watched == self._watched:
            return False
        self.store.reconfigure(watched)
        self._watched = watched
        self._accepted = True
        return True

    def _not_one_config(self, found: list[Manifest]) -> Diagnostic:
        where = self.config_file or self.root
        if not found:
            kinds = [
                str(m.obj.get("kind"))
                for state in self._files.values()
                for m in state.objects
                if m.obj.get("kind") != "Namespace"
            ]
            return make(
                "E8015",
                Phase.SPEC,
                f"{no_config_kind(kinds)}; the previous configuration stays in effect",
                location=Location(file=str(where)),
            )
        spots = ", ".join(f"{m.file}:{m.line}" for m in found)
        return make(
            "E8015",
            Phase.SPEC,
            f"{len(found)} {KIND} documents ({spots}); keep exactly one",
            location=Location(file=str(found[1].file), line=found[1].line),
        )

    def _uses_namespace_selectors(self) -> bool:
        return any(w.namespace_selector is not None for w in self._watched.values())

    def _namespace_labels(self) -> dict[str, dict[str, str]] | None:
        """Labels of the Namespace manifests; None when there are none (selectors unjudged)."""
        labels: dict[str, dict[str, str]] = {}
        for state in self._files.values():
            for m in state.objects:
                if m.obj.get("apiVersion") == "v1" and m.obj.get("kind") == "Namespace":
                    raw = m.obj["metadata"].get("labels") or {}
                    labels[m.obj["metadata"]["name"]] = {str(k): str(v) for k, v in raw.items()}
        return labels or None

    def _route(self, path: Path) -> set[ClaimKey]:
        state = self._files[path]
        state.unrouted = []
        namespaces = self._ns_labels if self._uses_namespace_selectors() else None
        keys: set[ClaimKey] = set()
        for m in state.objects:
            names = collections_for(m.obj, self._watched, namespaces)
            if not names:
                state.unrouted.append(m)
                continue
            okey = object_key(m.obj)
            for name in names:
                self._claims.add((name, okey), m)
                keys.add((name, okey))
        return keys

    def _reroute(self, path: Path) -> None:
        keys = self._claims.drop_file(path)
        if path in self._files:
            keys |= self._route(path)
        for collection, okey in sorted(keys):
            claim = self._claims.effective((collection, okey))
            if claim is not None:
                self.store.apply(collection, claim.obj)
            else:
                self.store.delete(collection, okey)

    def _rebuild(self) -> None:
        self._claims.clear()
        for path in sorted(self._files):
            self._route(path)
        for name in self.store.names():
            self.store.replace(name, [c.obj for c in self._claims.collection(name)])

    # --- reporting ------------------------------------------------------------------------

    def _duplicate_problems(self) -> list[Diagnostic]:
        out = []
        for (collection, (ns, name)), claims in self._claims.duplicates():
            spots = ", ".join(f"{c.file}:{c.line}" for c in claims)
            out.append(
                make(
                    "W8013",
                    Phase.SPEC,
                    f"collection {collection!r}: {ns + '/' if ns else ''}{name} is defined "
                    f"{len(claims)} times ({spots}); the first one is used",
                    location=Location(file=str(claims[1].file), line=claims[1].line),
                    object=object_ref(claims[1].obj),
                )
            )
        return out

    def _unwatched_notes(self) -> list[Diagnostic]:
        if not self._accepted:
            return []  # before a config is accepted every object is unwatched; say nothing
        label_source = self._uses_namespace_selectors()
        out = []
        for path in sorted(self._files):
            for m in self._files[path].unrouted:
                if label_source and m.obj.get("kind") == "Namespace":
                    continue  # read for its labels
                out.append(unwatched_note(m, self.store.watched()))
        return out

    def _object_problems(self) -> list[Diagnostic]:
        out = []
        for key, diags in sorted(self.store.object_diagnostics().items()):
            claim = self._claims.effective(key)
            for d in diags:
                if claim is not None:
                    where = Location(file=str(claim.file), line=claim.line)
                    d = d.model_copy(update={"location": where})
                out.append(d)
        return out

    def _report(self) -> None:
        if self._on_diagnostics is None:
            return
        current = self.diagnostics()
        if current != self._reported:
            self._reported = current
            try:
                self._on_diagnostics(current)
            except Exception:
                _log.exception("on_diagnostics failed")
