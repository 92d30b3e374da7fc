"""Compiled and classified CEL sources, shared by every rule set of a process and kept on disk
for commands.

Building a :class:`~controller.validation.rules.compiled.RuleSet` compiles each source four
times (the full environment, then one probe environment per variable, see ``classify.py``)
and decodes its checked tree: about 3 ms a source, 70 ms for the quickstart's 23 sources. An
engine builds two rule sets of one spec (its renderer's and its rules stage's), and every
``htc`` command builds them again, from sources that rarely change.

What :func:`~controller.validation.rules.classify.analyse` yields depends only on the source
text, the environments (declared in ``cel.py`` with the extensions of ``natives.py`` and
``matching.py``), the code that classifies (this package) and the binding's build. So:

* **In memory**, an analysis is kept by source (bounded, least recently used out first).
  The environments are fixed for the life of the process, and a compiled expression is
  never changed by evaluating it.
* **On disk**, only while a command holds :func:`controller.render.disk_cache` (the same
  folder, the same ``HTC_TEMPLATE_CACHE`` switch, the same file checks as compiled
  templates: :class:`controller.render.codecache.DiskStore`), an entry holds the checked
  expression as the binding serializes it, its result type and what classification found.
  Its key is a digest of the source, the entry layout, the interpreter, the source of this
  package and the size and modification time of every file of the binding (its 14 MB
  library is not read: a reinstall changes both). Loading is the binding's
  ``Env.deserialize`` of those bytes, about a third of one compile.

Compile errors are never cached: a broken source is compiled again and reports as always.
"""

from __future__ import annotations

import hashlib
import importlib.util
import marshal
import sys
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any

from controller.render import codecache
from controller.validation.rules.cel import Program, full_env
from controller.validation.rules.classify import Analysis, analyse
from controller.validation.rules.refs import Refs

__all__ = ["analysed", "clear", "disk_key", "stats"]

FORMAT = 2
"""Version of the entries' layout; part of every key."""

_MAGIC = b"HTCR"
MAX_ENTRIES = 1024
MAX_SOURCE_CHARS = 4 * 1024 * 1024
"""Bounds of the in-memory cache (sources are at most 4,096 characters each)."""

_PACKAGE = ("controller.validation.rules",)
_BINDING = "cel_expr_python"

_memo: OrderedDict[str, Analysis] = OrderedDict()
_chars = 0
_lock = threading.Lock()
_prefix: Any = None
_prefix_done = False
_counts = {"hits": 0, "disk_hits": 0, "misses": 0}


def stats() -> dict[str, int]:
    """Memory hits, disk hits and compiles since the process started (for tests, benches)."""
    with _lock:
        return dict(_counts)


def clear() -> None:
    """Forget the in-memory entries (the disk is left as it is)."""
    global _chars
    with _lock:
        _memo.clear()
        _chars = 0


def _binding_identity() -> str | None:
    spec = importlib.util.find_spec(_BINDING)
    if spec is None or not spec.submodule_search_locations:
        return None
    parts: list[str] = []
    try:
        for folder in (Path(p) for p in spec.submodule_search_locations):
            for path in sorted(folder.rglob("*")):
                if "__pycache__" in path.parts or not path.is_file():
                    continue
                st = path.stat()
                parts.append(
                    f"{path.relative_to(folder).as_posix()}\0{st.st_size}\0{st.st_mtime_ns}"
                )
    except OSError:
        return None
    return "\n".join(parts)


def _key_prefix() -> Any:
    """The digest of everything but the source (once per process; None: no disk cache)."""
    global _prefix, _prefix_done
    with _lock:
        if _prefix_done:
            return _prefix
    fingerprint = codecache.source_fingerprint(_PACKAGE)
    binding = _binding_identity()
    prefix = None
    if fingerprint is not None and binding is not None:
        prefix = hashlib.sha256()
        for part in (str(FORMAT), sys.version, fingerprint, binding):
            prefix.update(part.encode() + b"\0")
    with _lock:
        _prefix, _prefix_done = prefix, True
    return prefix


def disk_key(source: str) -> str | None:
    """The file name of ``source``'s entry (None when the disk cache cannot be keyed)."""
    prefix = _key_prefix()
    if prefix is None:
        return None
    h = prefix.copy()
    h.update(source.encode("utf-8", "surrogatepass"))
    return str(h.hexdigest())


def _encode(key: str, a: Analysis) -> bytes:
    r = a.refs
    payload = marshal.dumps(
        (
            key,
            a.program.expression.serialize(),
            a.program.result_type,
            tuple(sorted(r.variables)),
            tuple(sorted(r.outputs)),
            tuple(sorted(r.collections)),
            r.iterates,
            r.size,
            tuple(sorted(r.output_fields)),
            tuple(sorted(r.self_fields)),
            a.decoded,
        )
    )
    return codecache.seal(_MAGIC, FORMAT, payload)


def _strings(value: Any) -> frozenset[str]:
    if type(value) is not tuple or any(type(v) is not str for v in value):
        raise ValueError("names")
    return frozenset(value)


def _decode(key: str, source: str, data: bytes) -> Analysis | None:
    payload = codecache.unseal(_MAGIC, FORMAT, data)
    if payload is None:
        return None
    try:
        value = marshal.loads(payload)
        if type(value) is not tuple or len(value) != 11 or value[0] != key:
            return None
        _, checked, result_type, variables, outputs, collections, iterates, size = value[:8]
        output_fields, self_fields, decoded = value[8:]
        if (
            type(checked) is not bytes
            or type(result_type) is not str
            or type(iterates) is not bool
            or type(size) is not int
            or type(decoded) is not bool
        ):
            return None
        refs = Refs(
            _strings(variables),
            _strings(outputs),
            _strings(collections),
            iterates,
            size,
            _strings(output_fields),
            _strings(self_fields),
        )
        expression = full_env().deserialize(checked)
    except Exception:  # a damaged entry is a miss, whatever the binding says about it
        return None
    return Analysis(Program(source, expression, result_type), refs, decoded)


def _remember(source: str, a: Analysis) -> None:
    global _chars
    if len(source) > MAX_SOURCE_CHARS:
        return
    with _lock:
        if source not in _memo:
            _chars += len(source)
        _memo[source] = a
        _memo.move_to_end(source)
        while _memo and (len(_memo) > MAX_ENTRIES or _chars > MAX_SOURCE_CHARS):
            old, _ = _memo.popitem(last=False)
            _chars -= len(old)


def analysed(source: str) -> Analysis:
    """:func:`~controller.validation.rules.classify.analyse` of ``source``, compiled now only
    when no cache has it. Raises ``CompileError`` as it does (never cached)."""
    with _lock:
        found = _memo.get(source)
        if found is not None:
            _memo.move_to_end(source)
            _counts["hits"] += 1
            return found
    disk = codecache.shared().disk
    key = disk_key(source) if disk is not None else None
    if disk is not None and key is not None:
        data = disk.load_bytes(key)
        found = _decode(key, source, data) if data is not None else None
        if found is not None:
            with _lock:
                _counts["disk_hits"] += 1
            _remember(source, found)
            return found
    with _lock:
        _counts["misses"] += 1
    found = analyse(source)
    _remember(source, found)
    if disk is not None and key is not None:
        disk.store_bytes(key, _encode(key, found))
    return found
