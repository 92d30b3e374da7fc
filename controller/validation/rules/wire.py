"""How a batch travels to an evaluation worker and back (``pool.py``, ``worker.py``).

A batch is a :class:`Job`: a module-level function and its arguments, pickled. Its rule set
is sent to a worker once and named by a token afterwards; a rule of it, by its position; a
judgement without a diagnostic, by its state (known judgements are most of a deferred
batch). Frames are length-prefixed on pipes. The size of a batch is capped while it is
pickled, so deciding that one is too large to send costs at most the cap.
"""

from __future__ import annotations

import io
import os
import pickle
import struct
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from controller.validation.rules.compiled import CompiledRule, RuleSet
from controller.validation.rules.judge import Judgement, plain

__all__ = [
    "MAX_RULESETS",
    "MAX_SHIPPED",
    "MAX_SHIPPED_TEXT",
    "Frames",
    "Job",
    "TooLarge",
    "Unshipped",
    "dump",
    "receive",
    "resolve",
    "write_frame",
]

T = TypeVar("T")

MAX_SHIPPED = 512 << 10
"""Bytes of pickled objects a batch may send to a worker (512 KiB); a larger one forks.
Pickling objects holds the interpreter (about 14 µs per stored Ingress), and a large batch
may run beside a render; the fork costs that thread little and the child pays the rest."""

MAX_SHIPPED_TEXT = 16 << 20
"""Bytes of large strings a batch may send besides (16 MiB): an output's content. The pickler
writes a string of :data:`_DIRECT` bytes or more straight to the sink, a copy at memory speed
(840 KB of ``haproxy.cfg`` and maps at 1,000 Ingresses: 1 ms), where the fork it spares costs
this process 4-9 ms and its child 20 ms more (at 400 MB resident)."""

_DIRECT = 64 << 10
"""The pickler's frame size: a string at least this long is written unframed."""

_FRAME = pickle.FRAME[0]
_PROTO = pickle.PROTO[0]

MAX_RULESETS = 4
"""Rule sets a worker keeps (one per spec in use: the running one, a proposed one)."""

_HEADER = struct.Struct("!Q")


class Unshipped(Exception):
    """A batch read an input that was not sent to the worker (see ``stage.py``); the batch
    runs in a fork instead. Not a LookupError, so no mapping protocol can swallow it."""


@dataclass(frozen=True)
class Job(Generic[T]):
    """``fn(*args)`` for a worker: a module-level function and picklable arguments.

    ``ruleset`` (also among the arguments, usually) is sent to a worker once and named by
    its token afterwards, and so are its rules; a judgement with no diagnostic is sent by
    its state. Everything else is pickled with the batch."""

    fn: Callable[..., T]
    args: tuple[Any, ...]
    ruleset: RuleSet | None = None

    def __call__(self) -> T:
        return self.fn(*self.args)


def write_frame(fd: int, data: bytes) -> None:
    view = memoryview(_HEADER.pack(len(data)) + data)
    while view:
        view = view[os.write(fd, view) :]


class Frames:
    """Length-prefixed frames read from a pipe."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._buf = bytearray()

    def take(self) -> bytes | None:
        """A complete frame already read, or None."""
        if len(self._buf) < _HEADER.size:
            return None
        (size,) = _HEADER.unpack_from(self._buf)
        end = _HEADER.size + size
        if len(self._buf) < end:
            return None
        frame = bytes(self._buf[_HEADER.size : end])
        del self._buf[:end]
        return frame

    def fill(self) -> bool:
        """Read what the pipe has (it must be readable); False at end of file."""
        chunk = os.read(self.fd, 1 << 16)
        self._buf += chunk
        return bool(chunk)


class _Pickler(pickle.Pickler):
    """Pickles a batch; its rule set and rules as references to the copies the worker holds
    (:func:`resolve`), a judgement without a diagnostic as its state. ``reducer_override``
    rather than ``persistent_id``: it is not called for plain dicts, lists, tuples, strings
    and numbers, which are nearly all of a batch's objects."""

    def __init__(self, file: Any, ruleset: RuleSet | None) -> None:
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self._ruleset = ruleset
        self._positions = _positions(ruleset) if ruleset is not None else {}

    def reducer_override(self, obj: Any) -> Any:
        tp = type(obj)
        if tp is Judgement:
            if obj.diagnostic is None:
                return (resolve, ("judgement", obj.state.value))
            return NotImplemented
        if tp is CompiledRule:
            pos = self._positions.get(id(obj))
            return (resolve, ("rule", pos)) if pos is not None else NotImplemented
        if obj is self._ruleset and obj is not None:
            return (resolve, ("ruleset", 0))
        return NotImplemented


_RECEIVING: list[RuleSet | None] = [None]
"""In a worker: the rule set of the batch being unpickled (one batch at a time)."""


def resolve(tag: str, arg: Any) -> Any:
    """In a worker: what :class:`_Pickler` sent as a reference."""
    if tag == "judgement":
        return plain(arg)
    ruleset = _RECEIVING[0]
    if ruleset is None:
        raise pickle.UnpicklingError("the batch names a rule set it was not sent")
    return ruleset if tag == "ruleset" else ruleset.rules[arg]


def receive(data: bytes, ruleset: RuleSet | None) -> Any:
    """In a worker: a batch pickled by :class:`_Pickler` for ``ruleset``."""
    _RECEIVING[0] = ruleset
    try:
        return pickle.loads(data)
    finally:
        _RECEIVING[0] = None


_POSITIONS: OrderedDict[int, tuple[RuleSet, dict[int, int]]] = OrderedDict()
_POSITIONS_LOCK = threading.Lock()


def _positions(ruleset: RuleSet) -> dict[int, int]:
    """id(rule) → its index in ``ruleset.rules`` (the rule set is kept with it, so the ids
    stay its rules')."""
    with _POSITIONS_LOCK:
        found = _POSITIONS.get(ruleset.token)
        if found is not None:
            _POSITIONS.move_to_end(ruleset.token)
            return found[1]
        positions = {id(r): i for i, r in enumerate(ruleset.rules)}
        _POSITIONS[ruleset.token] = (ruleset, positions)
        while len(_POSITIONS) > 2 * MAX_RULESETS:
            _POSITIONS.popitem(last=False)
        return positions


class TooLarge(Exception):
    """The batch is larger than :data:`MAX_SHIPPED` or cannot be pickled."""


class _Capped(io.RawIOBase):
    """A sink that gives up once more than ``cap`` bytes of pickled objects, or ``text_cap``
    bytes of large strings, were written: deciding that a batch is too large costs at most
    that much pickling.

    The pickler (protocol 4 and later) writes framed opcodes in frames, each starting with
    the FRAME opcode (the first after PROTO), and a string or bytes of :data:`_DIRECT` bytes
    or more unframed, alone. So an unframed write that long is one string's content: copied,
    not traversed. A string that happens to start like a frame header counts as objects,
    which only sends its batch to a fork sooner."""

    def __init__(self, cap: int, text_cap: int) -> None:
        self.parts: list[bytes] = []
        self.size = 0
        self.text = 0
        self.cap = cap
        self.text_cap = text_cap

    def writable(self) -> bool:
        return True

    def write(self, b: Any) -> int:
        data = bytes(b)
        n = len(data)
        if n >= _DIRECT and not _framed(data):
            self.text += n
            if self.text > self.text_cap:
                raise TooLarge("its texts are too large to send")
        else:
            self.size += n
            if self.size > self.cap:
                raise TooLarge("its objects are too large to send")
        self.parts.append(data)
        return n


def _framed(data: bytes) -> bool:
    start = 2 if data[0] == _PROTO else 0
    return len(data) > start and data[start] == _FRAME


def dump(job: Job[Any]) -> bytes:
    sink = _Capped(MAX_SHIPPED, MAX_SHIPPED_TEXT)
    try:
        _Pickler(sink, job.ruleset).dump(job)
    except (pickle.PicklingError, TypeError, AttributeError) as exc:
        raise TooLarge(f"inputs cannot be sent: {exc}") from None
    return b"".join(sink.parts)
