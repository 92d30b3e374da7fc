"""Compiled template code, shared by every Renderer of a process and kept on disk for commands.

Building a :class:`~controller.render.Renderer` compiles every template, snippet and ``when``
of a spec: Jinja2 parses it, the render graph collects its references, Jinja2 generates
Python source and Python compiles that. For the quickstart (266 templates and 256 ``when``
expressions, one per certificate slot) that is over a second of CPU, paid again by every
``htc validate``, by every property-test step, and by every Renderer a long-running process
builds for a changed spec — although nearly every source is one compiled before.

What compiling yields depends on nothing but:

* what is compiled: the kind (output template, snippet, ``when``), the template name (the
  code carries it: source locations, tracebacks, error messages) and the source text;
* the environment: its class, code generator, lexer and output options, policies, the
  names of its globals (a snippet's free names are the others), and its filters and tests —
  Jinja2's optimizer calls them on constant arguments at compile time, and how a filter
  wants to be called decides the code emitted around it;
* the code that compiles: Jinja2, MarkupSafe, and the packages of ours the environment and
  its filters run on.

So a result is reused only under a key made of all of that.

**In memory** (:class:`CodeCache`, one per process) the key holds the environment's
classes, filters and tests themselves: the same objects compile the same way, and a held
object cannot be replaced by another at the same address. The cache is bounded (entries
and source characters, least recently used out first).

**On disk** (:class:`DiskStore`, only while a command enables it with :func:`disk_cache`),
objects cannot be compared, so they are described by module and qualified name; the key
also has a digest of the source files of every package above, and the interpreter's exact
version, bytecode magic and optimization level. An environment with anything the
description cannot name (a filter from another module, a policy of an unknown type) is
never cached on disk. Loading code means running it later, so only code that this user
wrote may load:

* the folder is the user's own (``$HTC_CACHE_DIR/templates``, else
  ``$XDG_CACHE_HOME/htc/templates``, else ``~/.cache/htc/templates``), created ``0700``, and
  used only while it is owned by this user with no access for group or others — it is
  opened once without following a symlink, checked through that descriptor, and every
  file is then opened relative to it, so a swapped path cannot redirect a read;
* an entry is read only when it is a regular file of this user's, writable by nobody else,
  with one link; it is written to a fresh private file and renamed into place;
* the file names its key and carries a digest of its content, so a truncated or misnamed
  entry is a miss (and is compiled again), never a wrong template.

``HTC_TEMPLATE_CACHE=off`` turns the disk cache off, ``HTC_TEMPLATE_CACHE=/a/folder`` moves
it. Compile errors are never cached: a broken template is compiled again and reports as it
always did.
"""

from __future__ import annotations

import hashlib
import importlib.util
import marshal
import os
import stat
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from types import CodeType
from typing import Any, Literal

from jinja2 import Environment

from controller.render.graph import Reference, TemplateRefs

__all__ = [
    "CodeCache",
    "Compiled",
    "DiskStore",
    "Kind",
    "default_folder",
    "disk_cache",
    "shared",
]

Kind = Literal["template", "snippet", "when"]

FORMAT = 7
"""Version of the disk entries' layout; part of every key."""

_MAGIC = b"HTCJ"
_DIGEST = 32

MAX_ENTRIES = 2048
MAX_SOURCE_CHARS = 32 * 1024 * 1024
"""Bounds of the in-memory cache (entries, and characters of the sources they hold)."""

_MAX_ENVIRONMENTS = 64

MAX_FILES = 4096
"""Entries kept on disk; beyond that the least recently used are removed."""

_FINGERPRINTED = (
    "jinja2",
    "markupsafe",
    "controller.render",
    "controller.resources",
    "controller.spec",
    "controller.diagnostics",
)
"""Packages whose source decides compiled code (parser, code generator, optimizer, the
filters and tests it may call, the environment's attribute rules and what they read)."""

_BUILTIN_MODULES = frozenset({"builtins", "_operator", "operator"})
"""Modules of functions that are part of the interpreter (its version is in the key)."""


@dataclass(frozen=True, slots=True)
class Compiled:
    """One compiled source: its code, what it refers to, and (snippets) its free names and
    the names it uses only to look keys up (:func:`controller.render.keyed.keyed_names`)."""

    code: CodeType
    refs: TemplateRefs
    free: frozenset[str] | None = None
    lookups: frozenset[str] | None = None


class _Undescribable(Exception):
    """The environment has something the disk key cannot name."""


def _named(obj: Any) -> str:
    module = getattr(obj, "__module__", None)
    qualname = getattr(obj, "__qualname__", None)
    if not isinstance(module, str) or not isinstance(qualname, str) or "<" in qualname:
        raise _Undescribable(repr(obj))
    if module not in _BUILTIN_MODULES and not any(
        module == p or module.startswith(p + ".") for p in _FINGERPRINTED
    ):
        raise _Undescribable(f"{module}.{qualname}")
    return f"{module}:{qualname}"


def _describe(value: Any) -> Any:
    """``value`` as JSON-like data that names it across processes, or _Undescribable."""
    if value is None or isinstance(value, bool | int | float | str):
        return repr(value)
    if isinstance(value, list | tuple):
        return [_describe(v) for v in value]
    if isinstance(value, frozenset | set):
        return sorted(repr(_describe(v)) for v in value)
    if isinstance(value, dict):
        return sorted((repr(k), _describe(v)) for k, v in value.items())
    if isinstance(value, type) or callable(value):
        return _named(value)
    raise _Undescribable(repr(value))


def _options(env: Environment) -> tuple[Any, ...]:
    """Everything of an environment the lexer, parser, optimizer and code generator read."""
    return (
        type(env),
        env.code_generator_class,
        env.context_class,
        env.block_start_string,
        env.block_end_string,
        env.variable_start_string,
        env.variable_end_string,
        env.comment_start_string,
        env.comment_end_string,
        env.line_statement_prefix,
        env.line_comment_prefix,
        env.trim_blocks,
        env.lstrip_blocks,
        env.newline_sequence,
        env.keep_trailing_newline,
        env.optimized,
        env.undefined,
        env.finalize,
        env.autoescape,
        env.is_async,
        env.sandboxed,
        getattr(env, "intercepted_binops", None),  # the sandbox's: operators never folded
        getattr(env, "intercepted_unops", None),
        tuple(sorted(env.extensions)),
        tuple(sorted(env.globals)),  # a snippet's free names are the names that are not these
        getattr(env, "htc_mapping_attrs", None),
    )


def memory_key(env: Environment) -> tuple[Any, ...] | None:
    """What of ``env`` a compiled result depends on, as objects (None: not cacheable)."""
    key = (
        *_options(env),
        tuple(sorted(env.filters.items())),
        tuple(sorted(env.tests.items())),
        repr(sorted(env.policies.items())),
    )
    try:
        hash(key)
    except TypeError:
        return None
    return key


def disk_description(env: Environment) -> str | None:
    """``env`` as text that names every part of it across processes (None: it cannot)."""
    try:
        return repr(
            _describe(
                [
                    [_named(c) for c in type(env).__mro__],
                    [_named(c) for c in env.code_generator_class.__mro__],
                    list(_options(env)),
                    dict(env.filters),
                    dict(env.tests),
                    dict(env.policies),
                ]
            )
        )
    except _Undescribable:
        return None


_FINGERPRINTS: dict[tuple[str, ...], str] = {}
_FINGERPRINT_LOCK = threading.Lock()


def _package_dirs(packages: tuple[str, ...]) -> list[Path] | None:
    dirs: list[Path] = []
    for name in packages:
        spec = importlib.util.find_spec(name)
        if spec is None or not spec.submodule_search_locations:
            return None
        dirs.extend(Path(p) for p in spec.submodule_search_locations)
    return dirs


def source_fingerprint(packages: tuple[str, ...] = _FINGERPRINTED) -> str | None:
    """Digest of the source of every package that decides compiled code (once per process
    and list; None when a package cannot be read, which turns the disk cache off)."""
    with _FINGERPRINT_LOCK:
        found = _FINGERPRINTS.get(packages)
        if found is None:
            dirs = _package_dirs(packages)
            if dirs is None:
                return None
            digest = hashlib.sha256()
            try:
                for folder in dirs:
                    digest.update(str(folder.name).encode() + b"\0")
                    for path in sorted(folder.rglob("*")):
                        if "__pycache__" in path.parts or path.suffix not in (".py", ".so", ".pyd"):
                            continue
                        data = path.read_bytes()
                        rel = path.relative_to(folder).as_posix().encode()
                        digest.update(b"%s\0%d\0" % (rel, len(data)))
                        digest.update(data)
            except OSError:
                return None
            found = _FINGERPRINTS[packages] = digest.hexdigest()
        return found


# -- disk ------------------------------------------------------------------------------------


def default_folder() -> Path | None:
    """Where commands keep compiled templates: ``HTC_TEMPLATE_CACHE`` when it is an absolute
    path; none when it is ``off``; else ``templates`` under the user's htc cache."""
    setting = os.environ.get("HTC_TEMPLATE_CACHE", "").strip()
    if setting.lower() in ("off", "0", "no", "false"):
        return None
    if setting and Path(setting).is_absolute():
        return Path(setting)
    base = os.environ.get("HTC_CACHE_DIR")
    if base and Path(base).is_absolute():
        return Path(base) / "templates"
    xdg = os.environ.get("XDG_CACHE_HOME")
    if xdg and Path(xdg).is_absolute():
        return Path(xdg) / "htc" / "templates"
    home = os.environ.get("HOME")
    if not home or not Path(home).is_absolute():
        return None
    return Path(home) / ".cache" / "htc" / "templates"


def _encode_refs(refs: TemplateRefs) -> tuple[Any, ...]:
    def each(rs: tuple[Reference, ...]) -> tuple[tuple[str, str, int], ...]:
        return tuple((r.name, r.template, r.line) for r in rs)

    return (each(refs.outputs), each(refs.snippets), each(refs.fragments))


def _decode_refs(data: Any) -> TemplateRefs:
    def each(rs: Any) -> tuple[Reference, ...]:
        if type(rs) is not tuple:
            raise ValueError("references")
        out: list[Reference] = []
        for r in rs:
            if not (
                type(r) is tuple
                and len(r) == 3
                and type(r[0]) is str
                and type(r[1]) is str
                and type(r[2]) is int
            ):
                raise ValueError("reference")
            out.append(Reference(r[0], r[1], r[2]))
        return tuple(out)

    if type(data) is not tuple or len(data) != 3:
        raise ValueError("references")
    return TemplateRefs(each(data[0]), each(data[1]), each(data[2]))


def seal(magic: bytes, version: int, payload: bytes) -> bytes:
    """A disk entry: magic (what kind of entry), layout version, digest of the payload, the
    payload. Shared by every cache kept in the folder (templates here, CEL rules in
    ``controller.validation.rules.rulecache``), each with its own magic."""
    return magic + bytes([version]) + hashlib.sha256(payload).digest() + payload


def unseal(magic: bytes, version: int, data: bytes) -> bytes | None:
    """The payload of an entry :func:`seal` wrote with this magic and version, or None."""
    head = len(magic) + 1
    if len(data) < head + _DIGEST or data[: len(magic)] != magic or data[len(magic)] != version:
        return None
    digest, payload = data[head : head + _DIGEST], data[head + _DIGEST :]
    if hashlib.sha256(payload).digest() != digest:
        return None
    return payload


def encode(key: str, compiled: Compiled) -> bytes:
    """A template entry: :func:`seal` of the key, code, references, free names and lookup
    names (marshal)."""
    free = None if compiled.free is None else tuple(sorted(compiled.free))
    lookups = None if compiled.lookups is None else tuple(sorted(compiled.lookups))
    payload = marshal.dumps((key, compiled.code, _encode_refs(compiled.refs), free, lookups))
    return seal(_MAGIC, FORMAT, payload)


def decode(key: str, data: bytes) -> Compiled | None:
    """The entry ``data`` read for ``key``, or None when it is not exactly that."""
    payload = unseal(_MAGIC, FORMAT, data)
    if payload is None:
        return None
    try:
        value = marshal.loads(payload)
        if type(value) is not tuple or len(value) != 5 or value[0] != key:
            return None
        _, code, refs, free, lookups = value
        if type(code) is not CodeType or not (_names(free) and _names(lookups)):
            return None
        return Compiled(
            code,
            _decode_refs(refs),
            None if free is None else frozenset(free),
            None if lookups is None else frozenset(lookups),
        )
    except (ValueError, EOFError, TypeError):
        return None


def _names(value: Any) -> bool:
    """Is ``value`` None or a tuple of names, as :func:`encode` writes them?"""
    return value is None or (type(value) is tuple and all(type(f) is str for f in value))


def _read(fd: int, size: int) -> bytes:
    chunks: list[bytes] = []
    while True:
        chunk = os.read(fd, max(size, 4096))
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


class DiskStore:
    """Entries in a private folder of this user's (see the module docstring)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._fd: int | None = None
        self._usable = True
        self._lock = threading.Lock()
        self._writes = 0

    def _dir(self) -> int | None:
        with self._lock:
            if self._fd is None and self._usable:
                self._fd = self._open()
                self._usable = self._fd is not None
            return self._fd

    def _open(self) -> int | None:
        if not hasattr(os, "geteuid") or not hasattr(os, "O_NOFOLLOW"):
            return None
        try:
            self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
            fd = os.open(self.folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            return None
        st = os.fstat(fd)
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o077:
            os.close(fd)
            return None
        return fd

    def close(self) -> None:
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
            self._fd = None

    def load(self, key: str) -> Compiled | None:
        data = self.load_bytes(key)
        return None if data is None else decode(key, data)

    def store(self, key: str, compiled: Compiled) -> None:
        self.store_bytes(key, encode(key, compiled))

    def load_bytes(self, key: str) -> bytes | None:
        """The content of entry ``key`` when it passes the checks of the module docstring
        (the caller still checks what it holds)."""
        dfd = self._dir()
        if dfd is None:
            return None
        try:
            fd = os.open(key, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dfd)
        except OSError:
            return None
        try:
            st = os.fstat(fd)
            if (
                not stat.S_ISREG(st.st_mode)
                or st.st_uid != os.geteuid()
                or st.st_mode & 0o022
                or st.st_nlink != 1
            ):
                return None
            data = _read(fd, st.st_size)
            if time.time() - st.st_mtime > 86_400:  # least recently used goes first
                os.utime(fd)
        except OSError:
            return None
        finally:
            os.close(fd)
        return data

    def store_bytes(self, key: str, data: bytes) -> None:
        """``data`` as entry ``key``: written to a fresh private file, renamed into place."""
        dfd = self._dir()
        if dfd is None:
            return
        tmp = f".tmp-{os.getpid()}-{os.urandom(8).hex()}"
        try:
            fd = os.open(
                tmp,
                os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                0o600,
                dir_fd=dfd,
            )
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
            finally:
                os.close(fd)
            os.replace(tmp, key, src_dir_fd=dfd, dst_dir_fd=dfd)
        except OSError:
            with suppress(OSError):
                os.unlink(tmp, dir_fd=dfd)
            return
        with self._lock:
            self._writes += 1
            prune = self._writes % 256 == 1
        if prune:
            self.prune()

    def prune(self, keep: int = MAX_FILES) -> None:
        """Down to 3/4 of ``keep`` entries, least recently used first, when above ``keep``;
        leftovers of interrupted writes older than an hour go too."""
        dfd = self._dir()
        if dfd is None:
            return
        now = time.time()
        entries: list[tuple[float, str]] = []
        try:
            with os.scandir(dfd) as it:
                for e in it:
                    try:
                        mtime = e.stat(follow_symlinks=False).st_mtime
                    except OSError:
                        continue
                    if e.name.startswith(".tmp-"):
                        if now - mtime > 3600:
                            self._unlink(e.name, dfd)
                    else:
                        entries.append((mtime, e.name))
        except OSError:
            return
        if len(entries) <= keep:
            return
        entries.sort()
        for _, name in entries[: len(entries) - keep * 3 // 4]:
            self._unlink(name, dfd)

    @staticmethod
    def _unlink(name: str, dfd: int) -> None:
        with suppress(OSError):
            os.unlink(name, dir_fd=dfd)


# -- the cache -------------------------------------------------------------------------------


class CodeCache:
    """Compiled results by (environment, kind, name, source); memory first, then disk."""

    def __init__(
        self, max_entries: int = MAX_ENTRIES, max_source_chars: int = MAX_SOURCE_CHARS
    ) -> None:
        self.max_entries = max_entries
        self.max_source_chars = max_source_chars
        self.disk: DiskStore | None = None
        self._entries: OrderedDict[tuple[int, str, str, str], Compiled] = OrderedDict()
        self._environments: dict[tuple[Any, ...], int] = {}
        """Each environment key seen, by a small number that stands for it in entry keys
        (hashing the whole key on every lookup would cost more than the lookup)."""
        self._chars = 0
        self._generation = 0
        self._lock = threading.Lock()
        self.hits = self.disk_hits = self.misses = 0

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._chars = 0

    def bind(self, env: Environment) -> Binding:
        """The cache as one environment uses it (its keys are computed once, here)."""
        return Binding(self, env)

    def _token(self, env_key: tuple[Any, ...]) -> int:
        with self._lock:
            token = self._environments.get(env_key)
            if token is None:
                if len(self._environments) >= _MAX_ENVIRONMENTS:  # start over, never grow
                    self._environments.clear()
                    self._entries.clear()
                    self._chars = 0
                    self._generation += _MAX_ENVIRONMENTS
                token = self._environments[env_key] = self._generation + len(self._environments)
            return token

    def _get(self, key: tuple[int, str, str, str]) -> Compiled | None:
        with self._lock:
            found = self._entries.get(key)
            if found is not None:
                self._entries.move_to_end(key)
                self.hits += 1
            return found

    def _put(self, key: tuple[int, str, str, str], compiled: Compiled) -> None:
        size = len(key[-1])
        if size > self.max_source_chars:
            return
        with self._lock:
            if key not in self._entries:
                self._chars += size
            self._entries[key] = compiled
            self._entries.move_to_end(key)
            while self._entries and (
                len(self._entries) > self.max_entries or self._chars > self.max_source_chars
            ):
                old, _ = self._entries.popitem(last=False)
                self._chars -= len(old[-1])


class Binding:
    """A :class:`CodeCache` for one environment."""

    def __init__(self, cache: CodeCache, env: Environment) -> None:
        self.cache = cache
        env_key = memory_key(env)
        self._memory = None if env_key is None else cache._token(env_key)
        self._disk: DiskStore | None = None
        self._prefix: Any = None
        disk = cache.disk
        if disk is not None and self._memory is not None:
            described = disk_description(env)
            fingerprint = source_fingerprint() if described is not None else None
            if described is not None and fingerprint is not None:
                prefix = hashlib.sha256()
                for part in (
                    str(FORMAT),
                    sys.version,
                    importlib.util.MAGIC_NUMBER.hex(),
                    str(sys.flags.optimize),  # -O drops asserts from what compile() makes
                    fingerprint,
                    described,
                ):
                    prefix.update(part.encode() + b"\0")
                self._disk, self._prefix = disk, prefix

    def compiled(
        self, kind: Kind, name: str, source: str, build: Callable[[], Compiled]
    ) -> Compiled:
        """The result of ``build()`` for this source, compiled now only if no cache has it.
        Whatever ``build`` raises (a syntax error) propagates and nothing is cached."""
        if self._memory is None:
            return build()
        key = (self._memory, kind, name, source)
        found = self.cache._get(key)
        if found is not None:
            return found
        disk_key: str | None = None
        if self._disk is not None:
            h = self._prefix.copy()
            for part in (kind, name, source):
                encoded = part.encode("utf-8", "surrogatepass")
                h.update(b"%d\0" % len(encoded) + encoded)
            disk_key = h.hexdigest()
            found = self._disk.load(disk_key)
            if found is not None:
                self.cache.disk_hits += 1
                self.cache._put(key, found)
                return found
        self.cache.misses += 1
        found = build()
        self.cache._put(key, found)
        if self._disk is not None and disk_key is not None:
            self._disk.store(disk_key, found)
        return found


_SHARED = CodeCache()


def shared() -> CodeCache:
    """The process's cache, which every Renderer uses."""
    return _SHARED


@contextmanager
def disk_cache(folder: Path | None = None, *, cache: CodeCache | None = None) -> Iterator[None]:
    """Within the block, Renderers also read and write compiled code in ``folder`` (default:
    :func:`default_folder`; nothing when that is None). For commands: a library user or a
    long-running process keeps to the memory cache."""
    target = cache if cache is not None else _SHARED
    where = folder if folder is not None else default_folder()
    previous = target.disk
    store = DiskStore(where) if where is not None else None
    target.disk = store
    try:
        yield
    finally:
        target.disk = previous
        if store is not None:
            store.close()
