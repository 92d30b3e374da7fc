"""``htc local``: a directory of manifests, served by a real HAProxy, no cluster needed.

The wiring, and nothing else (no pipeline logic lives here)::

    directory adapter → store → reconcile trigger → Pipeline → MasterSocketTarget → HAProxy
                                                  ↘ publisher → console, status board, /status
    HTTP sources (spec.httpSources) ↗ (accepted content; a refresh is a proposal)

HTTP sources are wired as in ``htc run`` (:meth:`HttpSources.for_trigger`): fetched before the
first render, which waits for critical ones; a refresh is validated before it is used. The
sources are the startup spec's (a later spec change does not refetch), and ``secretRef`` is
read from files (``--secrets-dir``, laid out as a mounted Secret) instead of the API.

Config changes take a detour. The adapter asks :meth:`LocalApp._on_config` synchronously,
but adopting a spec means rendering and validating it, which is asynchronous. So:

* a spec that does not parse is rejected on the spot;
* a spec with the same watched collections is accepted by the adapter (its store does not
  change) and proposed to the trigger, which swaps renderer and pipeline only if the spec
  renders and validates;
* a spec whose collections differ is *refused* by the live adapter, so the live store stays
  as the running spec expects. A second adapter loads the directory into a fresh store for
  the new collections; the trigger tries the spec on that store and, if it is adopted,
  the second adapter (and its store) replace the first.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import shutil
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from controller.deploy import HAProxySupervisor, MasterSocketTarget, find_haproxy
from controller.diagnostics import Diagnostic, Location, TemplateLocation
from controller.local.console import ConsoleSink
from controller.local.directory import DirectoryAdapter
from controller.observability import METRICS, Metrics, get_logger
from controller.publish import Event, EventKind, Publisher, StatusBoard, StatusServer
from controller.resources import Store
from controller.spec import (
    KIND,
    HAProxyTemplateConfigSpec,
    SecretKeyRef,
    WatchedResource,
    parse_config,
    read_documents,
)
from controller.triggers import (
    Engine,
    FetchError,
    HttpSources,
    ReconcileTrigger,
    SpecDecision,
    default_engine,
    spec_rejection,
    with_listen,
)
from controller.validation import (
    Origin,
    config_origin,
    fix_mmap_threshold,
    spec_locator,
    trim_heap,
)

__all__ = ["LocalApp", "LocalOptions"]

_log = get_logger("controller.local")

MMAP_THRESHOLD = 64 * 1024
"""glibc's mmap threshold as ``htc local`` fixes it when it starts (see
:func:`controller.validation.heap.fix_mmap_threshold`, whose default is 256 KiB). Lower here:
a render's and a judgement's lists and tables with one slot per object (10,000 slots are
80 kB) then get pages of their own and go back when freed, instead of leaving holes in the
heap that later small blocks pin. ``bench/reconcile.py --objects 10000``, alternating:
settled 324-325 -> 319-320 MB, peak 350-354 -> 341-343 MB. The cost is fresh pages: per
change 2,600 more minor page faults and 9 ms more system CPU (57 against 48; user time
equal)."""


def settle_heap() -> None:
    """Once the first deploy is confirmed: collect the whole heap, then give free pages back.

    Starting leaves cyclic garbage that reference counting cannot free (the renderer the spec
    lint compiled and dropped: a compiled template holds itself through its code, 1.6 MB for
    the quickstart), and the interpreter's free lists (tuples, dicts, lists kept for reuse),
    which only a collection of the whole heap empties, pin memory pages that are otherwise
    free. Left alone, both wait for the first whole-heap collection, which at this size may
    not come for hours. ``bench/reconcile.py --objects 10000``, alternating: start 297.6-297.8
    -> 292.6-293.7 MB, settled after twelve changes 302.4-303.5 -> 298.2-299.4 MB. The cost is
    one such collection when starting (0.5-0.75 s CPU at 10,000 objects of each kind), as
    ``htc run`` makes after its first listing."""
    gc.collect()
    trim_heap()


@dataclass
class LocalOptions:
    directory: Path
    haproxy: str | None = None
    """Binary to run and to validate with; found automatically when None."""
    listen: str | None = None
    """Overrides ``extraContext.listen`` (the quickstart's frontend address)."""
    status_addr: str | None = "127.0.0.1:9180"
    """Address of /metrics, /healthz, /readyz, /status; None disables the endpoint."""
    work_dir: Path | None = None
    """Deploy directory and master socket live here; a temporary directory when None."""
    status_file: Path | None = None
    config_file: Path | None = None
    """The HAProxyTemplateConfig file, when it is not inside ``directory``."""
    drift_interval: float = 5.0
    retry_initial: float = 1.0
    """Seconds before a failed deploy is first tried again; doubles per failure."""
    retry_max: float = 30.0
    out: TextIO | None = None
    """Where the console report goes (stdout by default)."""
    secrets_dir: Path | None = None
    """Where ``httpSources[].secretRef`` is read from: ``DIR/<secret name>/<key>``, the layout
    of a Secret mounted as a volume (None: no credentials are sent)."""
    adapter_options: dict[str, Any] = field(default_factory=dict)
    """Extra DirectoryAdapter arguments (watch debounce, polling) — for tests and benchmarks."""


class LocalApp:
    def __init__(
        self,
        options: LocalOptions,
        *,
        metrics: Metrics | None = None,
        engine_factory: Callable[[HAProxyTemplateConfigSpec], Engine] | None = None,
    ) -> None:
        self.options = options
        self.metrics = metrics or METRICS
        self.binary = find_haproxy(options.haproxy)
        self.console = ConsoleSink(options.out)
        self.board = StatusBoard(options.status_file)
        self.publisher = Publisher(metrics=self.metrics, sinks=[self.board, self.console])
        # Ready means a validated set was confirmed *and* the HAProxy running it is still up.
        self.server = (
            StatusServer(self.board, self.metrics, options.status_addr, alive=self._haproxy_running)
            if options.status_addr
            else None
        )
        self._own_work_dir = options.work_dir is None
        self.work_dir = (
            Path(tempfile.mkdtemp(prefix="htc-local-"))
            if options.work_dir is None
            else Path(options.work_dir)
        )
        self.deploy_dir = self.work_dir / "config"
        self.master_socket = self.work_dir / "master.sock"
        self.supervisor = HAProxySupervisor(
            self.binary,
            self.deploy_dir,
            self.master_socket,
            metrics=self.metrics,
            on_event=self._haproxy_event,
        )
        self.target = MasterSocketTarget(
            self.deploy_dir,
            self.master_socket,
            process=self.supervisor,
            metrics=self.metrics,
        )
        self.engine_factory = engine_factory or default_engine(self.binary)
        self.store = Store({})
        self.adapter = self._adapter(self.store)
        self.trigger = ReconcileTrigger(
            self.store,
            [self.target],
            self.publisher,
            self.engine_factory,
            metrics=self.metrics,
            drift_interval=options.drift_interval,
            retry_initial=options.retry_initial,
            retry_max=options.retry_max,
        )
        self.http_sources: HttpSources | None = None
        self._unsubscribe: Callable[[], None] | None = None
        self._startup_spec: HAProxyTemplateConfigSpec | None = None
        self._running_watched: dict[str, WatchedResource] | None = None
        self._stop = asyncio.Event()
        self._adapter_stop = asyncio.Event()
        self._adapter_task: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._started = False
        self._stopped = False

    # --- lifecycle ------------------------------------------------------------------------

    async def start(self) -> None:
        """Load the directory, deploy the first validated config, then follow the directory."""
        fix_mmap_threshold(MMAP_THRESHOLD)  # rendered configurations are megabytes (see there)
        if self.server is not None:
            await self.server.start()
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self.adapter.load_initial()  # on_config runs inside and records the startup spec
        self._unsubscribe = self.store.subscribe(self.trigger)
        spec = self._startup_spec
        self._startup_spec = None
        if spec is not None and spec.http_sources and not await self._start_http_sources(spec):
            return  # stopped while a critical source was awaited
        await self.trigger.start(spec)
        if self.http_sources is not None:
            self.http_sources.start_refresh()
        if self.trigger.engine is not None and self.trigger.engine.spec is not None:
            self._running_watched = dict(self.trigger.engine.spec.watched_resources)
        self._adapter_task = asyncio.create_task(self.adapter.run(self._adapter_stop))
        self._started = True
        settle_heap()

    async def stop(self) -> None:
        """Stop watching, stop the loop, stop HAProxy (no process is left behind)."""
        if self._stopped:
            return
        self._stopped = True
        self._adapter_stop.set()
        if self._adapter_task is not None:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await asyncio.wait_for(self._adapter_task, 5.0)
        for task in list(self._tasks):
            task.cancel()
        await self.trigger.stop()
        if self.http_sources is not None:
            await self.http_sources.stop()
        await self.supervisor.stop()
        if self.server is not None:
            await self.server.stop()
        if self._unsubscribe is not None:
            self._unsubscribe()
        if self._own_work_dir:
            shutil.rmtree(self.work_dir, ignore_errors=True)

    async def run(self) -> None:
        """Start, then serve until :meth:`request_stop`; always stops cleanly."""
        try:
            await self.start()
            await self._stop.wait()
        finally:
            await self.stop()

    def request_stop(self) -> None:
        self._stop.set()

    async def wait_stopped(self) -> None:
        await self._stop.wait()

    @property
    def status_url(self) -> str | None:
        return self.server.url if self.server is not None else None

    # --- HTTP sources -----------------------------------------------------------------------

    async def _start_http_sources(self, spec: HAProxyTemplateConfigSpec) -> bool:
        """First fetch of every source, then wait for the critical ones (nothing renders
        before); False when a stop was asked for meanwhile."""
        sources = self._new_http_sources(spec)
        await sources.start_initial()
        waiting = asyncio.ensure_future(sources.wait_critical())
        stopping = asyncio.ensure_future(self._stop.wait())
        await asyncio.wait({waiting, stopping}, return_when=asyncio.FIRST_COMPLETED)
        for task in (waiting, stopping):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        return not self._stop.is_set()

    def _new_http_sources(self, spec: HAProxyTemplateConfigSpec) -> HttpSources:
        sources = HttpSources.for_trigger(
            spec.http_sources,
            self.trigger,
            view=lambda: self.store.snapshot(),
            publisher=self.publisher,
            metrics=self.metrics,
            secret_headers=self._secret_headers if self.options.secrets_dir else None,
        )
        self.http_sources = sources
        self.board.http_sources = sources.status
        return sources

    def _follow_http(self, spec: HAProxyTemplateConfigSpec) -> None:
        """An adopted spec's ``httpSources`` take effect at once (:meth:`HttpSources.reconfigure`)."""
        if self.http_sources is None:
            if not spec.http_sources:
                return
            self._new_http_sources(spec.model_copy(update={"http_sources": {}}))
        assert self.http_sources is not None
        self._spawn(self.http_sources.reconfigure(spec.http_sources))

    async def _secret_headers(self, ref: SecretKeyRef) -> dict[str, str]:
        """As ``htc run`` reads a Secret: ``key`` becomes ``Authorization``; without a key,
        every file of the Secret's directory is a header. A missing file fails the fetch."""
        assert self.options.secrets_dir is not None
        folder = self.options.secrets_dir / ref.name
        try:
            if ref.key is not None:
                return {"Authorization": (folder / ref.key).read_text(encoding="utf-8").strip()}
            return {
                path.name: path.read_text(encoding="utf-8").strip()
                for path in sorted(folder.iterdir())
                if path.is_file() and not path.name.startswith(".")
            }
        except (OSError, UnicodeDecodeError) as exc:
            raise FetchError(f"secretRef {ref.name}: {exc}", retry=False) from None

    # --- the directory adapter ------------------------------------------------------------

    def _adapter(self, store: Store) -> DirectoryAdapter:
        holder: list[DirectoryAdapter] = []

        def on_config(
            doc: Mapping[str, Any], file: Path, line: int
        ) -> Mapping[str, WatchedResource] | None:
            return self._on_config(holder[0], doc, file, line)

        adapter = DirectoryAdapter(
            self.options.directory,
            on_config=on_config,
            on_diagnostics=self.console.inputs,
            store=store,
            config_file=self.options.config_file,
            **self.options.adapter_options,
        )
        holder.append(adapter)
        return adapter

    def _on_config(
        self, adapter: DirectoryAdapter, doc: Mapping[str, Any], file: Path, line: int
    ) -> Mapping[str, WatchedResource] | None:
        config, diags = parse_config(doc, file=str(file))
        if config is None:
            located = [
                d
                if d.location
                else d.model_copy(update={"location": Location(file=str(file), line=line)})
                for d in diags
            ]
            self._publish_spec_rejection(located)
            return None
        spec = self._override(config.spec)
        self.console.origin = config_file_origin(spec, file)
        watched = dict(spec.watched_resources)
        if not self._started and adapter is self.adapter:
            self._startup_spec = spec  # adopted by trigger.start() after the initial load
            return watched
        if adapter is not self.adapter:
            return watched  # a candidate adapter loading for a proposal already made
        running = self.trigger.engine.spec if self.trigger.engine else None
        if running == spec:
            return watched
        if self._running_watched is None or watched == self._running_watched:
            self._spawn(self._propose(spec))
            return watched
        self._spawn(self._propose_with_new_collections(spec))
        return None

    def _override(self, spec: HAProxyTemplateConfigSpec) -> HAProxyTemplateConfigSpec:
        return with_listen(spec, self.options.listen)

    async def _propose(self, spec: HAProxyTemplateConfigSpec) -> SpecDecision:
        decision = await self.trigger.propose_spec(spec)
        if decision.accepted:
            self._running_watched = dict(spec.watched_resources)
            self._follow_http(spec)
        return decision

    async def _propose_with_new_collections(self, spec: HAProxyTemplateConfigSpec) -> None:
        store = Store({})
        candidate = self._adapter(store)
        candidate.load_initial()

        def swap() -> None:
            old_stop, old_task = self._adapter_stop, self._adapter_task
            if self._unsubscribe is not None:
                self._unsubscribe()
            self.adapter, self.store = candidate, store
            self.trigger.source = store
            # Subscribed first: the catch-up below applies edits made while the candidate was
            # checked, and each must reach the trigger as a change, or the next run would not
            # happen until some later edit.
            self._unsubscribe = store.subscribe(self.trigger)
            candidate.sync()
            self._adapter_stop = asyncio.Event()
            self._adapter_task = asyncio.create_task(candidate.run(self._adapter_stop))
            old_stop.set()
            if old_task is not None:
                self._spawn(_quietly(old_task))

        decision = await self.trigger.propose_spec(spec, view=store.snapshot(), on_accept=swap)
        if decision.accepted:
            self._running_watched = dict(spec.watched_resources)
            self._follow_http(spec)

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _publish_spec_rejection(self, diags: list[Diagnostic]) -> None:
        self.metrics.spec_changes.labels("rejected").inc()
        self.publisher.publish(spec_rejection(diags, running=self.trigger.engine is not None))

    def _haproxy_running(self) -> bool:
        return self.supervisor.running()

    def _haproxy_event(self, diag: Diagnostic) -> None:
        self.publisher.publish(
            Event(EventKind.RUNTIME, "haproxy", diagnostics=(diag,), message=diag.message)
        )


def config_file_origin(spec: HAProxyTemplateConfigSpec, file: Path) -> Origin | None:
    """Template locations → the config file's lines (``config.yaml:150``), from a fresh read
    of the file; None when the file cannot be read back. Its line index is built when a
    finding first needs it (see :class:`_FileOrigin`)."""
    try:
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    shown = file
    with contextlib.suppress(ValueError):
        shown = file.resolve().relative_to(Path.cwd())
    return _FileOrigin(spec, str(shown), text)


class _FileOrigin:
    """:func:`config_file_origin`'s answer: the file's text as read, indexed on first use.

    Most runs never show a finding about a template, while the index (every YAML path of
    the config document with its line, and the file's lines) is about 1.2 MB for the
    quickstart's config: kept from the start, it was held for nothing. The text read when
    the spec was accepted is what is indexed, so a later edit of the file does not move the
    lines shown for this spec. A file that does not hold exactly one config locates
    nothing."""

    __slots__ = ("_origin", "_shown", "_spec", "_text")

    def __init__(self, spec: HAProxyTemplateConfigSpec, shown: str, text: str) -> None:
        self._spec = spec
        self._shown = shown
        self._text: str | None = text
        self._origin: Origin | None = None

    @property
    def indexed(self) -> bool:
        return self._text is None

    def __call__(self, location: TemplateLocation) -> TemplateLocation:
        text = self._text
        if text is not None:
            docs, _ = read_documents(text, self._shown)
            ours = [
                lines for doc, lines in docs if isinstance(doc, Mapping) and doc.get("kind") == KIND
            ]
            if len(ours) == 1:
                locate = spec_locator(self._shown, ours[0])
                self._origin = config_origin(self._spec, locate, text.split("\n"))
            self._text = None
        return location if self._origin is None else self._origin(location)


async def _quietly(task: asyncio.Task[None]) -> None:
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await asyncio.wait_for(task, 5.0)
