"""Incremental rendering: reuse what a render computed while nothing it read has changed.

A template's result is a function of what it reads: the store view (through ``resources``),
``http``, ``extraContext``, ``path_for`` (fixed per spec) and, for an output, the outputs it
depends on. Templates cannot observe anything else — the sandbox has no clock, no random
numbers, no I/O, and the nondeterministic built-ins are removed. So a result can be reused
as long as every one of those reads would give the same answer again.

**Reads through the store view are recorded.** Each render wraps its view in a
:class:`TracingView`; every call a template makes on a collection (``list``, ``fetch``,
``get_single``, ``get``, ``entry``, ``entries``, ``len``, iteration) is recorded with its
answer in the :class:`Recorder` of the output (or shared snippet module) being evaluated.
Stored objects are frozen and a snapshot shares every unchanged object with the one before,
so an answer is compared by the identity of the objects in it: :func:`unchanged` asks the
new view the same questions and accepts only the very same objects, in the same order.

**What is reused**, by the :class:`~controller.render.Renderer`:

* an output, when its own recorded reads are unchanged, ``http`` and ``extraContext`` are
  equal (the renderer keeps their previous objects when they are, so even an identity test
  in a template sees no difference), every output it depends on rendered the same text (and
  the same ones were skipped), and every shared module it imported is the very same module
  object in this render. Its text, bytes and source-map pieces are the earlier ones, so the
  source map stays exact;
* a shared snippet module (``import … with context`` of a snippet that reads only
  render-wide names, see :mod:`controller.render.snippets`) on the same conditions, minus
  outputs (it reads none). Its macros look up ``resources`` when called, and that lookup
  goes to the render that calls them (:data:`current_resources`), never to the view of the
  render that built the module. A module whose reads changed is evaluated again; when that
  evaluation exports exactly what the old one did (:mod:`controller.render.sameness`: no
  template could tell them apart), the old module object stays, so the outputs that import
  it are kept too. A shared module that imports another depends on the imported module
  object, not on its reads: the quickstart's routing imports ``our-ingresses`` (the class
  filter), so an Ingress of another class costs one evaluation of that filter, not of the
  routing table, and no output renders again.

* one item's fragment (``fragments()``, see :mod:`controller.render.fragments`): a
  snippet evaluated per object in a context of its own, kept while the object is the same
  object, the call's arguments are equal, and its reads, imports and namespaces are as
  above. Its reads count as the caller's, so outputs and modules are kept or not exactly as
  if they had done the work.

A collection whose content token (a snapshot's shared state) is the very object it was when
the reads were made gets none of its questions asked again (:func:`unchanged`).

Failures are never reused: an output or module that raised is evaluated again next time.
The size budget is charged for reused work as if it had been done again, so a render that
would run out of it still does. The time budget only charges work actually done.

``tests/render/test_render_incremental.py`` proves the outcome byte for byte: random
sequences of creates, updates and deletes over the quickstart and over a library that uses
every template feature, each render compared with a full render by a fresh renderer.
"""

from __future__ import annotations

import builtins
import json
import weakref
from collections.abc import Iterator, Mapping, Sequence
from contextvars import ContextVar
from typing import Any

from jinja2.utils import Namespace

from controller.resources import CollectionView, StoreView

__all__ = [
    "Read",
    "Recorder",
    "Tokens",
    "TracingView",
    "current_recorder",
    "same_value",
    "tracked_namespace",
    "unchanged",
]

Read = tuple[str, str, tuple[Any, ...], Any]
"""(collection, operation, arguments, answer); an answer that was an exception is stored as
``_Raised``."""


class _Raised:
    __slots__ = ("text", "type")

    def __init__(self, exc: BaseException) -> None:
        self.type = type(exc)
        self.text = str(exc)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Raised) and (self.type, self.text) == (other.type, other.text)

    def __hash__(self) -> int:
        return hash((self.type, self.text))


class Recorder:
    """The reads of one output or shared module, in the order they were made; for an
    output also the shared modules it obtained (name → what evaluating one charged the size
    budget) and how much of its own charge was for evaluating modules; for a shared module
    the namespaces created while it was evaluated (``created``, see
    :func:`tracked_namespace`)."""

    __slots__ = ("created", "fresh", "module_chars", "modules", "reads", "tokens", "used")

    def __init__(self, *, track_namespaces: bool = False) -> None:
        self.reads: list[Read] = []
        self.tokens: dict[str, object | None] = {}
        """Each collection read → its content token when first read (see :func:`unchanged`)."""
        self.modules: dict[str, int] = {}
        self.used: dict[str, Any] = {}
        """For an output: the shared modules it imported (name → module object)."""
        self.module_chars = 0
        self.fresh = 0
        """Fragments evaluated (not kept) while recording (see :mod:`.fragments`)."""
        self.created: list[weakref.ref[Namespace]] | None = [] if track_namespaces else None

    def namespaces(self) -> list[Namespace]:
        """The namespaces created while recording that are still alive."""
        alive = (ref() for ref in self.created or ())
        return [ns for ns in alive if ns is not None]


_RECORDER: ContextVar[Recorder | None] = ContextVar("htc_render_recorder", default=None)


def current_recorder() -> ContextVar[Recorder | None]:
    return _RECORDER


def tracked_namespace(*args: Any, **kwargs: Any) -> Namespace:
    """The ``namespace()`` templates call: Jinja2's, remembered (weakly) by the recorder of
    a shared module being evaluated.

    A shared module is reused only while no output has assigned to one of its namespaces
    (:class:`~controller.render.snippets.SharedModule`). Such a namespace was created while
    the module was evaluated: a shared snippet reads only render-wide names, and no stored
    object, ``http`` or ``extraContext`` value is a namespace. So the namespaces still alive
    once the evaluation is over are all that can need checking, found without walking every
    value the module exports (a walk that cost a tenth of a render at 10,000 Ingresses).
    Held weakly: a namespace made per loop iteration and dropped costs nothing later."""
    ns = Namespace(*args, **kwargs)
    rec = _RECORDER.get()
    if rec is not None and rec.created is not None:
        rec.created.append(weakref.ref(ns))
    return ns


def _record(
    collection: str, token: object | None, op: str, args: tuple[Any, ...], answer: Any
) -> None:
    rec = _RECORDER.get()
    if rec is not None:
        rec.reads.append((collection, op, args, answer))
        if collection not in rec.tokens:
            rec.tokens[collection] = token


def _ask(view: CollectionView, op: str, args: tuple[Any, ...]) -> Any:
    """The answer ``view`` gives to one recorded question (the wrapper's own semantics)."""
    if op == "len":
        return len(view)
    fn = getattr(view, op)
    return fn(*args)


def _same_answer(old: Any, new: Any) -> bool:
    if old is new:
        return True
    if isinstance(old, list) and isinstance(new, list):
        return len(old) == len(new) and all(a is b for a, b in zip(old, new, strict=True))
    if isinstance(old, _Raised) or type(old) is int:
        return bool(old == new)
    return False


Tokens = Mapping[str, object | None]
"""Collection → the content token it had when the reads were made (:attr:`Recorder.tokens`)."""


def unchanged(view: StoreView, reads: Sequence[Read], tokens: Tokens | None = None) -> bool:
    """Would every recorded question get the very same answer from ``view``?

    A collection whose content token (``content_token``: a snapshot's state, shared and never
    written again) is the very object it was when the reads were made holds the very same
    objects, so its questions are not asked again: at 10,000 Ingresses a render after one
    changed Ingress would otherwise ask the EndpointSlices their 10,000 questions again.
    When every collection read kept its token, not even the list of reads is walked (the
    recorder notes a token for every collection it records a read of)."""
    if tokens:
        try:
            if all(t is not None and _token(view.collection(c)) is t for c, t in tokens.items()):
                return True
        except Exception:
            return False
    collections: dict[str, CollectionView | None] = {}
    for collection, op, args, answer in reads:
        coll = collections.get(collection, _UNSEEN)
        if coll is _UNSEEN:
            try:
                coll = view.collection(collection)
            except Exception:
                return False
            if tokens is not None:
                token = tokens.get(collection)
                if token is not None and _token(coll) is token:
                    coll = None  # the same content: every answer is the same
            collections[collection] = coll
        if coll is None:
            continue
        try:
            now: Any = _ask(coll, op, args)
        except Exception as exc:
            now = _Raised(exc)
        if not _same_answer(answer, now):
            return False
    return True


_UNSEEN: Any = object()
_GENERAL: Any = object()
"""A lookup :meth:`TracingCollection._direct` leaves to the view's own methods."""


def _token(view: Any) -> object | None:
    get = getattr(view, "content_token", None)
    return get() if get is not None else None


def same_value(a: Any, b: Any) -> bool:
    """Equal as templates can tell: the same JSON spelling (``1``, ``1.0`` and ``True`` are
    equal in Python but print differently), keys in the same order."""
    if a is b:
        return True
    try:
        return json.dumps(a) == json.dumps(b)
    except (TypeError, ValueError):
        return False


class TracingCollection:
    """One collection of a render's view; every read is recorded (see module docs)."""

    __slots__ = ("_exact", "_token", "_view", "_width", "name")

    def __init__(self, view: CollectionView) -> None:
        self._view = view
        self.name = view.name
        self._token = _token(view)
        whole = getattr(view, "whole_keys", None)
        found = whole() if whole is not None else None
        self._exact: dict[Any, Any] | None = found[0] if found is not None else None
        """The view's entries by whole index key, when it offers them (a snapshot's
        collection): ``get_single`` and ``fetch`` by a whole key of strings read it
        directly (see :meth:`_direct`)."""
        self._width = found[1] if found is not None else 0

    def _call(self, op: str, args: tuple[Any, ...]) -> Any:
        try:
            answer = _ask(self._view, op, args)
        except Exception as exc:
            _record(self.name, self._token, op, args, _Raised(exc))
            raise
        _record(self.name, self._token, op, args, answer)
        return answer

    @property
    def index_by(self) -> tuple[str, ...]:
        return tuple(getattr(self._view, "index_by", ()))

    def list(self) -> builtins.list[Any]:
        return list(self._read("list", self._view.list, ()))

    def _read(self, op: str, method: Any, keys: tuple[Any, ...]) -> Any:
        """:meth:`_call` for an operation whose method is given (no lookup by name, no
        ``_ask``): ``fetch`` and ``get_single``, made once or twice per object per render,
        and ``list``.
        The same read, recorded the same way."""
        try:
            answer = method(*keys)
        except Exception as exc:
            _record(self.name, self._token, op, keys, _Raised(exc))
            raise
        rec = _RECORDER.get()
        if rec is not None:
            rec.reads.append((self.name, op, keys, answer))
            if self.name not in rec.tokens:
                rec.tokens[self.name] = self._token
        return answer

    def _direct(self, op: str, keys: tuple[Any, ...]) -> Any:
        """The answer of ``fetch`` (``op``) or ``get_single``, read and recorded as
        :meth:`_read` does, when ``keys`` are a whole index key of strings and the view
        offers its table (:meth:`StateView.whole_keys`); else ``_GENERAL``, and the caller
        asks the view. The answers are the view's own (``StateView._whole`` reads the same
        table), without the four calls down to it: a backend makes one of each, 20,000 per
        full render at 10,000 Ingresses. An ambiguous ``get_single`` is left to the view,
        which says so."""
        exact = self._exact
        if exact is None or len(keys) != self._width:
            return _GENERAL
        for k in keys:
            if type(k) is not str:
                return _GENERAL
        found = exact.get(keys)
        answer: Any
        if op == "fetch":
            if found is None:
                answer = []
            elif type(found) is list:
                answer = [e.obj for e in found]
            else:
                answer = [found.obj]
        elif type(found) is list:
            return _GENERAL
        else:
            answer = None if found is None else found.obj
        rec = _RECORDER.get()
        if rec is not None:
            rec.reads.append((self.name, op, keys, answer))
            if self.name not in rec.tokens:
                rec.tokens[self.name] = self._token
        return answer

    def fetch(self, *keys: Any) -> builtins.list[Any]:
        answer = self._direct("fetch", keys)
        if answer is _GENERAL:
            answer = self._read("fetch", self._view.fetch, keys)
        return list(answer)

    def get_single(self, *keys: Any) -> Any:
        answer = self._direct("get_single", keys)
        if answer is _GENERAL:
            return self._read("get_single", self._view.get_single, keys)
        return answer

    def get(self, key: Any) -> Any:
        return self._call("get", (key,))

    def entry(self, key: Any) -> Any:
        return self._call("entry", (key,))

    def entries(self, *keys: Any) -> builtins.list[Any]:
        return list(self._call("entries", keys))

    def prepare(self, obj: Mapping[str, Any]) -> Any:
        # A function of the collection's configuration and ``obj`` only.
        return self._view.prepare(obj)  # type: ignore[attr-defined]

    def __iter__(self) -> Iterator[Any]:
        return iter(self.list())

    def __len__(self) -> int:
        return int(self._call("len", ()))

    def __bool__(self) -> bool:
        return len(self) > 0

    def __repr__(self) -> str:
        return f"<{type(self._view).__name__} {self.name!r} ({len(self)} objects)>"


class TracingView:
    """A store view whose collections record what is read from them."""

    __slots__ = ("raw",)

    def __init__(self, raw: StoreView) -> None:
        self.raw = raw

    def collection(self, name: str) -> TracingCollection:
        return TracingCollection(self.raw.collection(name))

    def names(self) -> list[str]:
        return list(self.raw.names())

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())
