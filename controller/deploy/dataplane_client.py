"""A small client for the parts of HAProxy's Data Plane API (v3) that deploying needs.

Only what the :class:`~controller.deploy.dataplane.DataplaneTarget` uses is here: the raw
configuration and its version, the reload status, and the three storage areas (maps, SSL
certificates, general files). Each call is one HTTP request with a deadline; the answers
are plain data so that the target's sequence reads like the API's documentation.

Facts about dataplaneapi v3.2.5 this relies on (checked against the real binary):

* ``POST /services/haproxy/configuration/raw?version=N`` answers 409 when ``N`` is not the
  stored version, 400 with HAProxy's own messages when its ``haproxy -c`` refuses the text,
  201 with ``skip_reload=true`` and 202 with a ``Reload-Id`` header otherwise. The body is
  the configuration *as stored*: the API parses it and writes its own serialization.
* ``GET /services/haproxy/reloads/{id}`` says ``in_progress``, ``succeeded`` or ``failed``,
  with HAProxy's output in ``response``. After a failed reload the API has already put its
  last known good configuration file back.
* Map and general-file uploads (POST) and deletes never reload; replacing (PUT) and the
  certificate calls take ``skip_reload=true``. A certificate is never read back: the API
  returns its metadata (size, serial), not the key material.
"""

from __future__ import annotations

import asyncio
import base64
import json
import ssl
from dataclasses import dataclass
from enum import StrEnum
from types import TracebackType
from typing import Any

import aiohttp

__all__ = [
    "DataplaneClient",
    "DataplaneError",
    "PushAnswer",
    "ReloadStatus",
    "StorageKind",
    "VersionConflict",
]

_PREFIX = "/v3/services/haproxy"


class StorageKind(StrEnum):
    """The API's storage areas, named as in its URLs."""

    MAPS = "maps"
    CERTS = "ssl_certificates"
    GENERAL = "general"


class DataplaneError(Exception):
    """The API could not be reached, or answered with an error."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class VersionConflict(DataplaneError):
    """409: someone else wrote the configuration since its version was read."""


@dataclass(frozen=True, slots=True)
class PushAnswer:
    version: int | None
    """The configuration's version after the push, when the API said."""
    reload_id: str | None
    """Set when a reload was requested (202)."""
    stored: str
    """The configuration as the API stored it (its own serialization)."""


@dataclass(frozen=True, slots=True)
class ReloadStatus:
    id: str
    status: str
    """``in_progress``, ``succeeded`` or ``failed``."""
    response: str = ""
    """HAProxy's output for this reload."""


class DataplaneClient:
    """One Data Plane API endpoint (``http(s)://host:port``), with basic auth.

    ``ca`` is a CA bundle (PEM text, or a path to one) that the API's serving certificate
    must chain to; without it, HTTPS uses the system's trust store.
    """

    def __init__(
        self,
        url: str,
        username: str,
        password: str,
        *,
        ca: str | None = None,
        timeout: float = 10.0,
    ) -> None:
        self.url = url.rstrip("/")
        self.timeout = timeout
        token = base64.b64encode(f"{username}:{password}".encode()).decode()
        self._headers = {"Authorization": f"Basic {token}"}
        self._ssl: ssl.SSLContext | bool = True
        if ca:
            ctx = ssl.create_default_context()
            if "-----BEGIN" in ca:
                ctx.load_verify_locations(cadata=ca)
            else:
                ctx.load_verify_locations(cafile=ca)
            self._ssl = ctx
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> DataplaneClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    def _client(self) -> aiohttp.ClientSession:
        # Created lazily: a session belongs to the event loop it was made in.
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                headers=self._headers,
                timeout=aiohttp.ClientTimeout(total=self.timeout),
                connector=aiohttp.TCPConnector(ssl=self._ssl, limit=8),
            )
        return self._session

    async def _call(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, str] | None = None,
        data: Any = None,
        headers: dict[str, str] | None = None,
        ok: tuple[int, ...] = (200,),
    ) -> tuple[int, dict[str, str], bytes]:
        url = f"{self.url}{_PREFIX}{path}"
        try:
            async with self._client().request(
                method, url, params=params, data=data, headers=headers
            ) as resp:
                body = await resp.read()
                status, hdrs = resp.status, dict(resp.headers)
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            raise DataplaneError(f"{method} {url}: {exc or type(exc).__name__}") from exc
        if status in ok:
            return status, hdrs, body
        message = _message(body)
        if status == 409:
            raise VersionConflict(f"{method} {path}: {message}", status)
        raise DataplaneError(f"{method} {path} answered {status}: {message}", status)

    # --- configuration --------------------------------------------------------------------

    async def version(self) -> int:
        _, _, body = await self._call("GET", "/configuration/version")
        try:
            return int(body.decode().strip())
        except ValueError as exc:
            raise DataplaneError(f"configuration version is not a number: {body[:80]!r}") from exc

    async def raw(self) -> tuple[int | None, str]:
        """The stored configuration and its version."""
        _, hdrs, body = await self._call("GET", "/configuration/raw")
        return _int(hdrs.get("Configuration-Version")), body.decode(errors="replace")

    async def push_raw(self, text: bytes, version: int, *, skip_reload: bool) -> PushAnswer:
        params = {"version": str(version)}
        if skip_reload:
            params["skip_reload"] = "true"
        status, hdrs, body = await self._call(
            "POST",
            "/configuration/raw",
            params=params,
            data=text,
            headers={"Content-Type": "text/plain"},
            ok=(201, 202),
        )
        return PushAnswer(
            version=_int(hdrs.get("Configuration-Version")),
            reload_id=hdrs.get("Reload-Id") if status == 202 else None,
            stored=body.decode(errors="replace"),
        )

    async def reload(self, reload_id: str) -> ReloadStatus:
        _, _, body = await self._call("GET", f"/reloads/{reload_id}")
        data = _json(body)
        return ReloadStatus(
            id=str(data.get("id", reload_id)),
            status=str(data.get("status", "")),
            response=str(data.get("response", "") or ""),
        )

    # --- storage --------------------------------------------------------------------------

    async def list_storage(self, kind: StorageKind) -> dict[str, int | None]:
        """storage name → size (when the listing says) of every file in one area."""
        _, _, body = await self._call("GET", f"/storage/{kind.value}")
        items = json.loads(body or b"[]") or []
        return {str(i["storage_name"]): _int(i.get("size")) for i in items}

    async def read_file(self, kind: StorageKind, name: str) -> bytes:
        """A map's or general file's bytes."""
        _, _, body = await self._call("GET", f"/storage/{kind.value}/{name}")
        return body

    async def cert_size(self, name: str) -> int | None:
        _, _, body = await self._call("GET", f"/storage/{StorageKind.CERTS.value}/{name}")
        return _int(_json(body).get("size"))

    async def create_file(self, kind: StorageKind, name: str, content: bytes) -> None:
        form = aiohttp.FormData()
        form.add_field("file_upload", content, filename=name)
        params = {"skip_reload": "true"} if kind is StorageKind.CERTS else None
        await self._call("POST", f"/storage/{kind.value}", params=params, data=form, ok=(201, 202))

    async def replace_file(self, kind: StorageKind, name: str, content: bytes) -> None:
        path = f"/storage/{kind.value}/{name}"
        params = {"skip_reload": "true"}
        if kind is StorageKind.GENERAL:
            form = aiohttp.FormData()
            form.add_field("file_upload", content, filename=name)
            await self._call("PUT", path, params=params, data=form, ok=(200, 202, 204))
        else:
            await self._call(
                "PUT",
                path,
                params=params,
                data=content,
                headers={"Content-Type": "text/plain"},
                ok=(200, 202, 204),
            )

    async def delete_file(self, kind: StorageKind, name: str) -> None:
        params = {"skip_reload": "true"} if kind is StorageKind.CERTS else None
        await self._call(
            "DELETE", f"/storage/{kind.value}/{name}", params=params, ok=(202, 204, 404)
        )

    async def reachable(self, timeout: float = 2.0) -> bool:
        try:
            await asyncio.wait_for(self.version(), timeout)
        except (DataplaneError, TimeoutError):
            return False
        return True


def _int(value: object) -> int | None:
    try:
        return int(str(value))
    except (TypeError, ValueError):
        return None


def _json(body: bytes) -> dict[str, Any]:
    try:
        data = json.loads(body)
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def _message(body: bytes) -> str:
    """The API's error text: JSON ``message`` when it sent one, else the body itself."""
    text = body.decode(errors="replace").strip()
    data = _json(body)
    if "message" in data:
        return str(data["message"])
    # The raw endpoint sends its JSON error as a text/plain string.
    try:
        inner = json.loads(json.loads(text)) if text.startswith('"') else None
    except (ValueError, TypeError):
        inner = None
    if isinstance(inner, dict) and "message" in inner:
        return str(inner["message"])
    return text[:2000]
