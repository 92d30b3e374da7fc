"""What a template sees: ``resources``, ``outputs``, ``http``, ``extraContext``, ``path_for``.

Everything here is read-only. The sandbox already refuses to mutate lists and dicts; these
views add no mutating methods of their own, so a template cannot change what the next output
(or the next render) sees.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from jinja2 import StrictUndefined

from controller.render.fileset import FileKind, path_for
from controller.resources import CollectionView, StoreView


@dataclass(frozen=True, slots=True)
class RenderedOutput:
    """One rendered output, as later outputs (``outputs['hosts.map']``) and hooks see it."""

    name: str
    """The output's name: ``haproxy.cfg`` or the key under maps/files/certificates."""
    kind: FileKind
    path: str
    """Deploy path, relative to the deploy directory (``maps/hosts.map``)."""
    content: str


class Resources(Mapping[str, CollectionView]):
    """``resources.<collection>`` over any :class:`StoreView` (store, snapshot or overlay).

    One is made per render, so it also carries that render's shared context (``_base``) and
    its cache of snippet modules (``_modules``, see :class:`SnippetTemplate`). Templates
    cannot reach either: the sandbox hides names starting with ``_``.
    """

    __slots__ = ("_base", "_cache", "_charged", "_modules", "_names", "_tainted", "_view")

    def __init__(self, view: StoreView) -> None:
        self._view = view
        self._names = tuple(view.names())
        self._cache: dict[str, CollectionView] = {}
        self._base: Mapping[str, Any] = {}
        self._modules: dict[str, Any] = {}
        self._charged: dict[str, int] = {}
        """Shared modules whose evaluation this render's size budget was charged for."""
        self._tainted: set[str] = set()
        """Shared modules an output changed (assigned to a namespace of) in this render."""

    def release(self) -> None:
        """Its render is over: keep only what a module kept from that render reads through
        it later, its collections' names (every lookup goes to the render running then, see
        :meth:`current`). Otherwise a module kept for many renders (the quickstart's
        service-ports reads nothing and is built once) would keep the render that built it
        alive: that render's snapshot and every module it obtained, the routing table among
        them. This also breaks the cycle between this object and its ``_base``."""
        self._view = _Finished(self._names)
        self._base = {}
        self._cache = {}
        self._modules = {}
        self._charged = {}
        self._tainted = set()

    def current(self) -> Resources:
        """The ``resources`` of the render running now (:data:`CURRENT`), else this one.

        A shared snippet module can outlive the render that built it (see
        :mod:`controller.render.incremental`); its macros hold that render's ``resources``,
        and must read the store of the render that calls them."""
        cur = CURRENT.get()
        return cur if cur is not None else self

    def __getitem__(self, name: str) -> CollectionView:
        cur = CURRENT.get()
        if cur is not None and cur is not self:
            return cur[name]
        found = self._cache.get(name)
        if found is None:
            if name not in self._names:
                raise KeyError(name)
            found = self._cache[name] = self._view.collection(name)
        return found

    def __getattr__(self, name: str) -> Any:
        # Only reached for names that are neither slots nor methods: ``resources.nothere``
        # (and ``resources['nothere']``, which Jinja2 retries as an attribute). Without this
        # the template author would read "'...Resources object' has no attribute" instead
        # of what is defined.
        if name.startswith("_"):
            raise AttributeError(name)
        if name in self._names:
            return self[name]
        defined = ", ".join(self._names) or "none"
        return StrictUndefined(hint=f"no watched collection named {name!r} (defined: {defined})")

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)

    def __repr__(self) -> str:
        return f"resources({', '.join(self._names)})"


class _Finished:
    """The store view of a :class:`Resources` whose render is over. A template reads it only
    while some render runs, through that render's; reading it otherwise is a bug of ours."""

    __slots__ = ("_names",)

    def __init__(self, names: tuple[str, ...]) -> None:
        self._names = names

    def collection(self, name: str) -> CollectionView:
        raise RuntimeError(f"resources.{name} read after its render was over")

    def names(self) -> list[str]:
        return list(self._names)

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)


CURRENT: ContextVar[Resources | None] = ContextVar("htc_render_resources", default=None)
"""The ``resources`` of the render running in this context, set by the renderer."""


class Outputs(Mapping[str, RenderedOutput]):
    """``outputs[name]``: the outputs this one depends on, each rendered before it.

    Only dependencies are visible (the render graph guarantees they are rendered first), so
    what a template sees never depends on the order unrelated outputs happen to render in.
    A dependency that its ``when`` skipped is absent (``'x' in outputs`` is false); reading it
    anyway explains why.
    """

    __slots__ = ("_items", "_skipped")

    def __init__(self, items: Mapping[str, RenderedOutput], skipped: frozenset[str]) -> None:
        self._items = dict(items)
        self._skipped = skipped

    def __getitem__(self, name: str) -> RenderedOutput:
        found = self._items.get(name)
        if found is None:
            if name in self._skipped:
                return StrictUndefined(  # type: ignore[return-value]
                    hint=f"output {name!r} was skipped: its `when` condition is false "
                    f"(test with `'{name}' in outputs`)",
                )
            raise KeyError(name)
        return found

    def __contains__(self, name: object) -> bool:
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __repr__(self) -> str:
        return f"outputs({', '.join(self._items)})"


_KIND_ALIASES: Mapping[str, FileKind] = {
    "map": FileKind.MAP,
    "maps": FileKind.MAP,
    "file": FileKind.FILE,
    "files": FileKind.FILE,
    "cert": FileKind.CERT,
    "certs": FileKind.CERT,
    "certificate": FileKind.CERT,
    "certificates": FileKind.CERT,
    "config": FileKind.CONFIG,
}


class PathFor:
    """``path_for(kind, name)``: where an auxiliary output is deployed, relative to ``-C``.

    It refuses names that no output of that kind defines, so a typo fails the render here
    instead of as a missing file in ``haproxy -c``. Unlike ``outputs[...]`` it adds no render
    graph edge: the path is known before anything renders.
    """

    __slots__ = ("_known",)

    def __init__(self, known: Mapping[FileKind, frozenset[str]]) -> None:
        self._known = known

    def __call__(self, kind: Any, name: Any) -> str:
        k = _KIND_ALIASES.get(kind) if isinstance(kind, str) else None
        if k is None:
            raise ValueError(
                f"path_for: unknown kind {kind!r}; use 'map', 'file' or 'cert' (or the spec "
                "keys maps, files, certificates)"
            )
        if k is FileKind.CONFIG:
            return path_for(k, "")
        if not isinstance(name, str) or name not in self._known.get(k, frozenset()):
            defined = ", ".join(sorted(self._known.get(k, ()))) or "none"
            raise UnknownOutputError(
                f"path_for({kind!r}, {name!r}): no {k.value} output named {name!r} "
                f"(defined: {defined})"
            )
        return path_for(k, name)


class UnknownOutputError(LookupError):
    """A reference to an output name that the spec does not define."""
