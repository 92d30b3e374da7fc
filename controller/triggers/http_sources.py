"""The HTTP source trigger: remote content is a proposal, validated before anything uses it.

Templates read ``http['<name>']``, the **accepted** content of each ``spec.httpSources`` entry.
A refresh that brings different content makes it *pending*; the running engine renders the live
store with the pending content overlaid and runs ``Pipeline.check`` — the one pipeline, as for
every other trigger path:

* pass: the pending content is promoted to accepted, and a normal reconcile deploys it;
* fail: it is rejected, the accepted content stays, and the rejection is published (a Warning
  Event naming the source and the rule ids). Its checksum is remembered, so the same bad content
  is not validated again at every refresh; new content is.

Sources whose new content arrives together are validated together. Fetching is aiohttp with
``ETag``/``If-Modified-Since`` (a 304 is "unchanged"), ``maxBytes`` enforced while streaming,
the source's ``timeout`` per attempt, and up to three attempts with jittered back-off.

At startup the first fetch of each source is taken as accepted content (the startup reconcile
validates it with everything else). A ``critical`` source must have been fetched before the
first render; a non-critical one that fails renders with empty content and a warning.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import random
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from controller.diagnostics import Phase, make
from controller.observability.logging import get_logger
from controller.observability.metrics import Metrics
from controller.publish.events import Event, EventKind, now_rfc3339
from controller.publish.publisher import Publisher
from controller.resources.api import StoreView
from controller.spec.models import HttpSource, SecretKeyRef
from controller.triggers.engine import Engine, evaluate

__all__ = ["HttpSources", "SourceState"]

_log = get_logger("controller.http_sources")

ATTEMPTS = 3


@dataclass
class SourceState:
    name: str
    spec: HttpSource
    accepted: str | None = None
    accepted_checksum: str | None = None
    etag: str | None = None
    last_modified: str | None = None
    last_fetch: str | None = None
    last_error: str | None = None
    pending_rejected: str | None = None
    """Checksum of the latest content that failed validation."""
    rejected: set[str] = field(default_factory=set)

    def status(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "acceptedChecksum": self.accepted_checksum,
            "lastFetch": self.last_fetch,
            "lastError": self.last_error,
            "pendingRejected": self.pending_rejected,
        }


class FetchError(Exception):
    pass


def _checksum(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


class HttpSources:
    """Fetches, validates and promotes the content of a spec's HTTP sources."""

    def __init__(
        self,
        sources: Mapping[str, HttpSource],
        *,
        engine: Callable[[], Engine | None],
        view: Callable[[], StoreView | None],
        on_promote: Callable[[list[str]], None],
        publisher: Publisher,
        metrics: Metrics,
        secret_headers: Callable[[SecretKeyRef], Awaitable[dict[str, str]]] | None = None,
        settle: float = 0.2,
    ) -> None:
        self.states = {name: SourceState(name, spec) for name, spec in sorted(sources.items())}
        self.engine = engine
        self.view = view
        self.on_promote = on_promote
        self.publisher = publisher
        self.metrics = metrics
        self.secret_headers = secret_headers
        self.settle = settle
        self._pending: dict[str, str] = {}
        self._wake = asyncio.Event()
        self._session: aiohttp.ClientSession | None = None
        self._tasks: list[asyncio.Task[None]] = []

    # --- what templates read --------------------------------------------------------------

    def content(self) -> dict[str, str]:
        """Accepted content per source; a source never fetched reads as empty."""
        return {name: s.accepted or "" for name, s in self.states.items()}

    def missing_critical(self) -> list[str]:
        return [n for n, s in self.states.items() if s.spec.critical and s.accepted is None]

    def status(self) -> list[dict[str, Any]]:
        return [s.status() for s in self.states.values()]

    # --- lifecycle ------------------------------------------------------------------------

    async def start_initial(self) -> None:
        """The first fetch of every source, taken as accepted (the startup run judges it)."""
        self._session = aiohttp.ClientSession()
        results = await asyncio.gather(
            *(self._fetch(s) for s in self.states.values()), return_exceptions=True
        )
        for state, result in zip(self.states.values(), results, strict=True):
            if isinstance(result, str):
                self._accept(state, result)
            elif state.spec.critical:
                _log.warning("critical HTTP source not fetched yet", source=state.name,
                             error=state.last_error)  # fmt: skip

    async def wait_critical(self, retry: float = 2.0) -> None:
        """Until every critical source has content (retrying its fetch)."""
        while missing := self.missing_critical():
            _log.warning(
                "nothing renders until these critical HTTP sources are fetched",
                sources=missing,
                retry_in=retry,
            )
            await asyncio.sleep(retry)
            for name in missing:
                state = self.states[name]
                with contextlib.suppress(FetchError):
                    self._accept(state, await self._fetch(state))

    def start_refresh(self) -> None:
        for state in self.states.values():
            self._tasks.append(asyncio.create_task(self._refresh(state), name=f"http-{state.name}"))
        self._tasks.append(asyncio.create_task(self._validator(), name="http-validate"))

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self._session is not None:
            await self._session.close()

    # --- fetching -------------------------------------------------------------------------

    async def _fetch(self, state: SourceState) -> str:
        """The new content; raises FetchError, or returns the accepted text when unchanged."""
        last: Exception | None = None
        for attempt in range(ATTEMPTS):
            try:
                text = await self._fetch_once(state)
                state.last_error = None
                self.metrics.http_fetches.labels(
                    state.name, "unchanged" if text is None else "ok"
                ).inc()
                state.last_fetch = now_rfc3339()
                return text if text is not None else (state.accepted or "")
            except (aiohttp.ClientError, TimeoutError, FetchError, UnicodeDecodeError) as exc:
                last = exc
                state.last_error = f"{type(exc).__name__}: {exc}"[:300]
                if attempt + 1 < ATTEMPTS:
                    await asyncio.sleep(0.5 * 2**attempt * random.uniform(0.5, 1.5))
        self.metrics.http_fetches.labels(state.name, "error").inc()
        state.last_fetch = now_rfc3339()
        raise FetchError(state.last_error or repr(last))

    async def _fetch_once(self, state: SourceState) -> str | None:
        assert self._session is not None
        spec = state.spec
        headers = dict(spec.headers)
        if spec.secret_ref is not None and self.secret_headers is not None:
            headers.update(await self.secret_headers(spec.secret_ref))
        if state.etag and state.accepted is not None:
            headers["If-None-Match"] = state.etag
        if state.last_modified and state.accepted is not None:
            headers["If-Modified-Since"] = state.last_modified
        timeout = aiohttp.ClientTimeout(total=spec.timeout)
        async with self._session.get(
            spec.url, headers=headers, timeout=timeout, allow_redirects=False
        ) as resp:
            if resp.status == 304:
                return None
            if resp.status != 200:
                raise FetchError(f"HTTP {resp.status} from {spec.url}")
            body = bytearray()
            async for chunk in resp.content.iter_chunked(1 << 16):
                body += chunk
                if len(body) > spec.max_bytes:
                    raise FetchError(f"larger than maxBytes ({spec.max_bytes})")
            state.etag = resp.headers.get("ETag")
            state.last_modified = resp.headers.get("Last-Modified")
            return body.decode("utf-8")

    async def _refresh(self, state: SourceState) -> None:
        while True:
            await asyncio.sleep(state.spec.refresh_interval)
            try:
                text = await self._fetch(state)
            except FetchError as exc:
                _log.warning("HTTP source fetch failed; the accepted content stays",
                             source=state.name, error=str(exc))  # fmt: skip
                continue
            digest = _checksum(text)
            if digest == state.accepted_checksum:
                continue
            if digest in state.rejected:
                self.metrics.http_rejections.labels(state.name, "known").inc()
                continue
            self._pending[state.name] = text
            self._wake.set()

    # --- validating -----------------------------------------------------------------------

    async def _validator(self) -> None:
        while True:
            await self._wake.wait()
            await asyncio.sleep(self.settle)  # sources changing together: one validation
            self._wake.clear()
            pending, self._pending = self._pending, {}
            if pending:
                await self.propose(pending)

    async def propose(self, pending: Mapping[str, str]) -> bool:
        """Validate ``pending`` over the accepted content; promote it or reject it."""
        engine, view = self.engine(), self.view()
        if engine is None or view is None:
            self._pending.update(pending)  # nothing runs yet: try again later
            return False
        http = {**self.content(), **pending}
        render, verdict = await evaluate(engine, view, http)
        names = sorted(pending)
        if verdict.validated is not None:
            for name in names:
                self._accept(self.states[name], pending[name])
                self.metrics.http_promotions.labels(name).inc()
            _log.info("HTTP source content promoted", sources=names,
                      checksum=verdict.report.metadata.checksum)  # fmt: skip
            self.on_promote(names)
            return True
        report = verdict.report
        for name in names:
            state = self.states[name]
            digest = _checksum(pending[name])
            state.rejected.add(digest)
            state.pending_rejected = digest
            self.metrics.http_rejections.labels(name, "invalid").inc()
        ids = sorted({d.rule_id for d in report.diagnostics})
        head = make(
            "E7010",
            Phase.SPEC,
            f"new content of HTTP source(s) {', '.join(names)} rejected ({', '.join(ids)}); "
            "the accepted content stays",
        )
        self.publisher.publish(
            Event(
                EventKind.RUNTIME,
                "http:" + ",".join(names),
                report=report,
                render=render,
                diagnostics=(head, *report.diagnostics),
                message=head.message,
            )
        )
        return False

    def _accept(self, state: SourceState, text: str) -> None:
        state.accepted = text
        state.accepted_checksum = _checksum(text)
        state.pending_rejected = None
