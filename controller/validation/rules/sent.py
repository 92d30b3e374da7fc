"""Deferred inputs as an evaluation worker receives them (``pool.py``): what a batch reads.

The rules stage converts, before a batch, everything its evaluation will read and nothing
else (``RulesStage._convert_needed``); the judgements it already knows stand for the rest.
A worker is sent exactly that: the converted objects and outputs, which outputs have a
value at all, and the known judgements packed one byte per object. Pickling the known
judgements as a dictionary took longer than the evaluation it spares (3,000 entries at
1,000 Ingresses: 3 ms each way, the evaluation itself about 1 ms).

Reading anything that was not sent raises :class:`Unshipped`: the batch is then run in a
fork, as before, with everything at hand, so a gap here costs time, never a verdict.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any, overload

from controller.validation.rules.compiled import OwnerKind
from controller.validation.rules.deferred import (
    CODE_NONE,
    CODE_PASSED,
    CODE_SKIPPED,
    OUTPUT_SELF,
    DeferredInputs,
    Known,
    Plan,
    Row,
    code_of,
    has_value,
    memo_name,
)
from controller.validation.rules.judge import Judgement, State, output_value, plain
from controller.validation.rules.wire import Unshipped

__all__ = ["sent_inputs"]

_Self = tuple[Any, str, Any]
_Key = tuple[str, Any]


class _Sparse(Sequence[_Self]):
    """A collection's objects: only those converted before the batch."""

    def __init__(self, size: int, done: Mapping[int, _Self]) -> None:
        self._size, self._done = size, dict(done)

    def __len__(self) -> int:
        return self._size

    @overload
    def __getitem__(self, i: int) -> _Self: ...

    @overload
    def __getitem__(self, i: slice) -> Sequence[_Self]: ...

    def __getitem__(self, i: int | slice) -> Any:
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(self._size))]
        if i < 0:
            i += self._size
        if not 0 <= i < self._size:
            raise IndexError(i)
        found = self._done.get(i)
        if found is None:
            raise Unshipped(f"object {i} of a collection was not sent")
        return found


class _Outputs(Mapping[str, dict[str, Any] | None]):
    """Every output, whether it has a value, and the values converted before the batch.

    A value travels as its path and content: its ``lines`` are made again from the content
    as the batch is unpickled (``output_value`` is all a converted output is). Pickling the
    content is a copy; pickling ``haproxy.cfg``'s lines at 1,000 Ingresses was 12,000 strings,
    a third of the batch, and pushed it past what a worker is sent (``wire.MAX_SHIPPED``)."""

    def __init__(self, present: Mapping[str, bool], done: Mapping[str, dict[str, Any]]) -> None:
        self._present, self._done = dict(present), dict(done)

    def __reduce__(self) -> tuple[Any, ...]:
        texts = {n: (v["path"], v["content"], "lines" in v) for n, v in self._done.items()}
        return (_received_outputs, (self._present, texts))

    def has_value(self, name: str) -> bool:
        return self._present.get(name, False)

    def __getitem__(self, name: str) -> dict[str, Any] | None:
        if not self._present[name]:
            return None
        found = self._done.get(name)
        if found is None:
            raise Unshipped(f"output {name} was not sent")
        return found

    def __iter__(self) -> Iterator[str]:
        return iter(self._present)

    def __len__(self) -> int:
        return len(self._present)


def _received_outputs(
    present: Mapping[str, bool], texts: Mapping[str, tuple[str, str, bool]]
) -> _Outputs:
    """In a worker: :class:`_Outputs` from what its ``__reduce__`` sent (with ``lines``
    exactly when the caller converted them)."""
    done = {
        n: output_value(n, path, content, lines=lines)
        for n, (path, content, lines) in texts.items()
    }
    return _Outputs(present, done)


_BY_CODE = {CODE_PASSED: plain(State.PASSED), CODE_SKIPPED: plain(State.SKIPPED)}


class _Known(Mapping[_Key, Judgement]):
    """Known judgements: per memo key of a collection rule, one byte per object of its
    collection (none, passed or skipped, without a diagnostic); every other judgement as
    it is. Looked up by (memo key, content key) as :class:`DeferredInputs` says."""

    def __init__(
        self,
        codes: Mapping[str, tuple[str, bytes]],
        others: Mapping[_Key, Judgement],
        object_keys: Mapping[str, Sequence[Any]],
    ) -> None:
        self._codes, self._others = dict(codes), dict(others)
        self._object_keys = object_keys
        self._index: dict[str, dict[Any, int]] = {}

    def get(self, key: _Key, default: Any = None) -> Any:
        """Without an exception for a miss: evaluation asks once per object and rule."""
        found = self._others.get(key)
        if found is not None:
            return found
        memo, object_key = key
        entry = self._codes.get(memo)
        if entry is None:
            return default
        name, codes = entry
        index = self._index.get(name)
        if index is None:
            keys = self._object_keys.get(name, ())
            index = self._index[name] = {k: i for i, k in enumerate(keys) if k is not None}
        i = index.get(object_key)
        code = codes[i] if i is not None else CODE_NONE
        return _BY_CODE[code] if code != CODE_NONE else default

    def row(self, memo: str, keys: Sequence[Any]) -> Row | None:
        """The codes sent for ``memo``, when ``keys`` are the objects they were sent for
        (``deferred.known_row``): evaluation then looks up only the objects without one."""
        entry = self._codes.get(memo)
        if entry is None or keys is not self._object_keys.get(entry[0]):
            return None
        others = self._others

        def rest(object_key: Any) -> Judgement | None:
            return others.get((memo, object_key))

        return entry[1], rest

    def __getitem__(self, key: _Key) -> Judgement:
        found = self.get(key)
        if found is None:
            raise KeyError(key)
        return found  # type: ignore[no-any-return]

    def __iter__(self) -> Iterator[_Key]:
        yield from self._others
        for memo, (name, codes) in self._codes.items():
            keys = self._object_keys.get(name, ())
            for k, code in zip(keys, codes, strict=False):
                if code != CODE_NONE and k is not None:
                    yield (memo, k)

    def __len__(self) -> int:
        return sum(1 for _ in self)


def _packed(inputs: DeferredInputs, p: Plan) -> _Known:
    codes: dict[str, tuple[str, bytes]] = {}
    others: dict[_Key, Judgement] = {}
    known = inputs.known
    for r in p.order:
        memo = inputs.memo_keys.get(memo_name(r))
        if memo is None:
            continue
        if r.owner.kind is not OwnerKind.COLLECTION:
            j = known.get((memo, OUTPUT_SELF))
            if j is not None:
                others[(memo, OUTPUT_SELF)] = j
            continue
        keys = inputs.object_keys.get(r.owner.name, ())
        if isinstance(known, Known):
            # One pass in C; the judgements no code stands for (failures, mostly: few) are
            # sent as they are, those of objects no longer listed too (they are still true).
            row, _ = known.row(memo, keys)
            others.update(((memo, k), j) for k, j in known.coded(memo)[1].items())
            codes[memo] = (r.owner.name, row)
            continue
        packed = bytearray()
        for k in keys:
            j = None if k is None else known.get((memo, k))
            code = code_of(j) if j is not None else CODE_NONE
            if j is not None and code == CODE_NONE:
                others[(memo, k)] = j
            packed.append(code)
        codes[memo] = (r.owner.name, bytes(packed))
    return _Known(codes, others, inputs.object_keys)


def sent_inputs(inputs: DeferredInputs, p: Plan) -> DeferredInputs:
    """``inputs`` as a worker receives them, for a run of plan ``p``."""
    outputs: Mapping[str, Any] = inputs.outputs
    done = getattr(outputs, "converted", None)
    if done is not None:
        entries = getattr(outputs, "entries", None)  # the stage's lazy outputs: no calls
        present = (
            {n: e is not None for n, e in entries.items()}
            if isinstance(entries, Mapping)
            else {n: has_value(inputs.outputs, n) for n in outputs}
        )
        outputs = _Outputs(present, done)
    collections: dict[str, Sequence[_Self]] = {}
    for name, selves in inputs.collections.items():
        converted = getattr(selves, "converted", None)
        collections[name] = _Sparse(len(selves), converted) if converted is not None else selves
    return DeferredInputs(
        outputs=outputs,
        states=inputs.states,
        collections=collections,
        extra_context=inputs.extra_context,
        known=_packed(inputs, p),
        memo_keys=inputs.memo_keys,
        object_keys=inputs.object_keys,
    )
