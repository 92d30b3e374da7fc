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
first render: until it is, nothing renders and an E7016 event says why (retried, each attempt
bounded by the source's ``timeout``). A non-critical one that fails renders with empty content
and a W7015 warning. A refresh that cannot be fetched (unreachable, timed out, an HTTP error,
larger than ``maxBytes``) keeps the accepted content and is reported once per distinct error
(W7015), and in the source's ``lastError``.

Adapters (``htc run``, ``htc local``) wire this the same way, through :meth:`HttpSources.for_trigger`.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import random
import ssl
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from controller.diagnostics import Phase, make
from controller.observability import Metrics, get_logger
from controller.publish import Event, EventKind, Publisher, now_rfc3339
from controller.resources import StoreView
from controller.spec import HttpSource, SecretKeyRef
from controller.triggers.engine import Engine, evaluate
from controller.triggers.reconcile import ReconcileTrigger

__all__ = ["FetchError", "HttpSources", "SourceState"]

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
    proposed: str | None = None
    """Checksum of the content pending or under validation: fetched again meanwhile, it is
    not proposed a second time (a validation can outlast a refresh interval)."""
    reported: str | None = None
    """The fetch error last published, so that a failing source is reported once per error."""
    tls: ssl.SSLContext | None = None
    """Trusts only ``caBundle`` (built on first use); None: the default trust store."""

    def status(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "acceptedChecksum": self.accepted_checksum,
            "lastFetch": self.last_fetch,
            "lastError": self.last_error,
            "pendingRejected": self.pending_rejected,
        }


class FetchError(Exception):
    """A fetch that brought no content; ``retry`` is False when another attempt cannot help
    (too large, a 4xx answer, a certificate that does not verify)."""

    def __init__(self, message: str, *, retry: bool = True) -> None:
        super().__init__(message)
        self.retry = retry


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

    @classmethod
    def for_trigger(
        cls,
        sources: Mapping[str, HttpSource],
        trigger: ReconcileTrigger,
        *,
        view: Callable[[], StoreView | None],
        publisher: Publisher,
        metrics: Metrics,
        secret_headers: Callable[[SecretKeyRef], Awaitable[dict[str, str]]] | None = None,
    ) -> HttpSources:
        """Sources feeding ``trigger``: it renders with their accepted content, a promotion
        is a change it reconciles, and proposals use its running engine."""
        created = cls(
            sources,
            engine=lambda: trigger.engine,
            view=view,
            on_promote=lambda names: trigger.notify(trigger="http"),
            publisher=publisher,
            metrics=metrics,
            secret_headers=secret_headers,
        )
        trigger.http = created.content
        return created

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
            elif not state.spec.critical:
                self._report_fetch(state, "templates read empty content until it is fetched")

    async def wait_critical(self, retry: float = 2.0) -> None:
        """Until every critical source has content: nothing renders before. Each attempt is
        bounded by the source's timeout; the wait is reported (E7016) whenever its reason
        changes, so the status says why nothing is rendered yet."""
        told: tuple[tuple[str, str | None], ...] | None = None
        while missing := self.missing_critical():
            why = tuple((name, self.states[name].last_error) for name in missing)
            if why != told:
                told = why
                self._report_waiting(missing)
            await asyncio.sleep(retry)
            for name in missing:
                state = self.states[name]
                with contextlib.suppress(FetchError):
                    self._accept(state, await self._fetch(state))
        if told is not None:
            _log.info("critical HTTP sources fetched; rendering", sources=sorted(self.states))

    def start_refresh(self) -> None:
        for state in self.states.values():
            self._tasks.append(asyncio.create_task(self._refresh(state), name=f"http-{state.name}"))
        self._tasks.append(asyncio.create_task(self._validator(), name="http-validate"))

    async def reconfigure(self, sources: Mapping[str, HttpSource]) -> None:
        """Follow an adopted spec whose ``httpSources`` changed, without a restart.

        The spec was tried with the content accepted so far (a source it adds read as empty,
        as at any time before its first fetch). Sources whose definition is unchanged keep
        their state; a removed one is dropped; an added or changed one is fetched at once and
        its content is a proposal like any refresh: validated with the adopted spec before
        the templates read it, the way a user's edit would be."""
        if {n: s.spec for n, s in self.states.items()} == dict(sources):
            return
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks.clear()
        kept = {n: s for n, s in self.states.items() if sources.get(n) == s.spec}
        fresh = {n: SourceState(n, spec) for n, spec in sources.items() if n not in kept}
        self.states = dict(sorted({**kept, **fresh}.items()))
        self._pending = {n: text for n, text in self._pending.items() if n in kept}
        if self._session is None:
            self._session = aiohttp.ClientSession()
        _log.info("HTTP sources follow the adopted spec", kept=sorted(kept), fetched=sorted(fresh))
        results = await asyncio.gather(
            *(self._fetch(s) for s in fresh.values()), return_exceptions=True
        )
        for state, result in zip(fresh.values(), results, strict=True):
            if isinstance(result, str):
                state.proposed = _checksum(result)
                self._pending[state.name] = result
            else:
                self._report_fetch(state, "templates read empty content until it is fetched")
        self.start_refresh()
        if self._pending:
            self._wake.set()

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
        for attempt in range(ATTEMPTS):
            try:
                text = await self._fetch_once(state)
                state.last_error = None
                self.metrics.http_fetches.labels(
                    state.name, "unchanged" if text is None else "ok"
                ).inc()
                state.last_fetch = now_rfc3339()
                return text if text is not None else (state.accepted or "")
            except FetchError as exc:
                state.last_error = str(exc)[:300]
                if not exc.retry:
                    break
            except TimeoutError:
                state.last_error = (
                    f"no complete answer within the timeout ({state.spec.timeout:g} s)"
                )
            except aiohttp.ClientSSLError as exc:
                state.last_error = f"TLS: {exc}"[:300]
                break
            except aiohttp.ClientError as exc:
                state.last_error = f"{type(exc).__name__}: {exc}"[:300]
            if attempt + 1 < ATTEMPTS:
                await asyncio.sleep(0.5 * 2**attempt * random.uniform(0.5, 1.5))
        self.metrics.http_fetches.labels(state.name, "error").inc()
        state.last_fetch = now_rfc3339()
        raise FetchError(state.last_error or "fetch failed")

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
            spec.url,
            headers=headers,
            timeout=timeout,
            allow_redirects=False,
            ssl=self._tls(state),
        ) as resp:
            if resp.status == 304:
                return None
            if resp.status != 200:
                raise FetchError(f"HTTP {resp.status} from {spec.url}", retry=resp.status >= 500)
            body = bytearray()
            async for chunk in resp.content.iter_chunked(1 << 16):
                body += chunk
                if len(body) > spec.max_bytes:
                    raise FetchError(
                        f"larger than maxBytes ({spec.max_bytes} bytes); stopped reading",
                        retry=False,
                    )
            try:
                text = body.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise FetchError(f"not UTF-8 text: {exc}", retry=False) from None
            state.etag = resp.headers.get("ETag")
            state.last_modified = resp.headers.get("Last-Modified")
            return text

    @staticmethod
    def _tls(state: SourceState) -> ssl.SSLContext | bool:
        """The source's own trust (its ``caBundle``) or aiohttp's default verification."""
        bundle = state.spec.ca_bundle
        if bundle is None:
            return True
        if state.tls is None:
            try:
                state.tls = ssl.create_default_context(cadata=bundle)
            except (ssl.SSLError, ValueError) as exc:
                raise FetchError(f"caBundle is not usable PEM: {exc}", retry=False) from None
        return state.tls

    async def _refresh(self, state: SourceState) -> None:
        while True:
            await asyncio.sleep(state.spec.refresh_interval)
            try:
                text = await self._fetch(state)
            except FetchError:
                self._report_fetch(state, "the accepted content stays")
                continue
            state.reported = None
            digest = _checksum(text)
            if digest == state.accepted_checksum:
                continue
            if digest in state.rejected:
                self.metrics.http_rejections.labels(state.name, "known").inc()
                continue
            if digest == state.proposed:
                continue
            state.proposed = digest
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
        for name in names:  # judged now (newer content fetched meanwhile stays proposed)
            if self.states[name].proposed == _checksum(pending[name]):
                self.states[name].proposed = None
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
        state.reported = None

    # --- reporting ------------------------------------------------------------------------

    def _report_fetch(self, state: SourceState, consequence: str) -> None:
        """W7015 for a failed fetch, once per distinct error of a source."""
        error = state.last_error or "fetch failed"
        _log.warning("HTTP source not fetched", source=state.name, error=error,
                     consequence=consequence)  # fmt: skip
        if state.reported == error:
            return
        state.reported = error
        diag = make(
            "W7015",
            Phase.SPEC,
            f"HTTP source {state.name} ({state.spec.url}) not fetched: {error}; {consequence}",
        )
        self.publisher.publish(
            Event(EventKind.RUNTIME, f"http-fetch:{state.name}", diagnostics=(diag,),
                  message=diag.message)
        )  # fmt: skip

    def _report_waiting(self, missing: list[str]) -> None:
        """E7016: nothing renders until these critical sources are fetched."""
        reasons = "; ".join(
            f"{name}: {self.states[name].last_error or 'not fetched yet'}" for name in missing
        )
        diag = make(
            "E7016",
            Phase.SPEC,
            f"nothing renders until the critical HTTP source(s) {', '.join(missing)} are "
            f"fetched ({reasons})",
        )
        _log.warning("waiting for critical HTTP sources", sources=missing, reasons=reasons)
        self.publisher.publish(
            Event(EventKind.RUNTIME, "http-wait:" + ",".join(missing), diagnostics=(diag,),
                  message=diag.message)
        )  # fmt: skip
