"""The pipeline's ``rules`` stage: deferred rules, after ``haproxy -c``, before external.

It judges the candidate against the inputs the render read (``RenderResult.inputs``): the
store view and the merged extraContext. Because those inputs are not part of the file set,
:meth:`RulesStage.input_key` gives the pipeline a digest of whatever the deferred rules read
besides outputs, so a cached verdict is reused only when those inputs are unchanged too.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hashlib
import json
from collections import OrderedDict
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from itertools import compress, count, islice
from operator import is_, is_not
from typing import Any, overload

from controller.diagnostics import Phase
from controller.render import FileEntry, RenderResult
from controller.resources import StoreView, object_ref
from controller.validation.report import RuleCounters
from controller.validation.rules.budget import (
    DEFAULT_TIME_BUDGET,
    CancelSignal,
    Isolation,
    RunBudget,
    WorkerCancelled,
    execute,
    is_cheap,
)
from controller.validation.rules.cel import to_cel
from controller.validation.rules.compiled import CompiledRule, OwnerKind, RuleSet
from controller.validation.rules.deferred import (
    OUTPUT_SELF,
    DeferredInputs,
    DeferredResult,
    Known,
    evaluate_deferred,
    has_value,
    memo_name,
    plan,
    zeros,
)
from controller.validation.rules.inline import budget_diagnostic, content_key, subject_of
from controller.validation.rules.judge import Judgement, output_value, reads_lines
from controller.validation.rules.refs import ANY, EXTRA
from controller.validation.rules.sent import sent_inputs
from controller.validation.rules.wire import Job
from controller.validation.stage import Stage, StageContext, StageOutcome

__all__ = ["RulesStage", "deferred_inputs", "reads_lines"]


def _collection_names(ruleset: RuleSet) -> list[str]:
    names: set[str] = set()
    for r in ruleset.deferred:
        if r.owner.kind is OwnerKind.COLLECTION:
            names.add(r.owner.name)
        for n in r.refs.collections:
            names.update(ruleset.collections if n == ANY else (n,))
    return sorted(names)


_FEW_CHANGED = 8
"""At most one place in this many differing from the last list: patch the last keys."""

_MAX_DIGESTS = 16
"""Output digests remembered by identity (strong references, so an id is not reused while
remembered: the bound keeps old outputs from being held); past it, forgotten all at once."""

_OUTPUT_JUDGEMENTS = 256
"""Output rules' judgements kept from earlier runs, least recently used out first (each is
keyed by a digest of everything the rule read; as many as the inline verdicts of outputs,
``inline.OutputMemo``). Candidates alternate: admission judges proposals beside the live
configuration, so after proposals that changed ``haproxy.cfg`` the next one that leaves it as
it is finds the judgement of the live output instead of judging it again (at 1,000 Ingresses
that was about 100 ms: converting ``haproxy.cfg`` and four maps, and a fork, as they are too
large to send to the evaluation worker)."""

_STALE = 256
"""Judgements of objects no longer listed that a memo key may keep (see ``_remember``)."""

_Keyed = tuple[list[Any], list[bytes | None]]
"""A collection's objects and their content keys (None: no JSON spelling)."""


def _objects(view: StoreView | None, name: str) -> list[Any]:
    if view is None or name not in view.names():
        return []
    return list(view.collection(name).list())


class _Selves(Sequence[tuple[Any, str, Any]]):
    """(CEL value, subject, reference) of each object, converted when first asked for:
    an object whose judgements are all known is never converted."""

    def __init__(self, objs: Sequence[Any]) -> None:
        self._objs = objs
        self._done: dict[int, tuple[Any, str, Any]] = {}

    def __len__(self) -> int:
        return len(self._objs)

    @overload
    def __getitem__(self, i: int) -> tuple[Any, str, Any]: ...

    @overload
    def __getitem__(self, i: slice) -> Sequence[tuple[Any, str, Any]]: ...

    def __getitem__(self, i: int | slice) -> Any:
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        if i < 0:
            i += len(self._objs)
        found = self._done.get(i)
        if found is None:
            o = self._objs[i]
            found = self._done[i] = (to_cel(o), subject_of(o), _safe_ref(o))
        return found

    @property
    def converted(self) -> Mapping[int, tuple[Any, str, Any]]:
        return self._done


def output_paths(ruleset: RuleSet, *, read_only: bool = False) -> dict[str, str]:
    """Each output's path in a file set. The quickstart has 332 outputs: spelling every path
    for every candidate was a third of converting its inputs.

    ``read_only``: only the outputs a deferred rule owns or names, unless one of them reads
    an output chosen at evaluation time (then all). No deferred rule can see the others:
    the quickstart's rules read five of the 332, and listing the rest, sending them to the
    worker and reading them there were a fifth of the stage's time."""
    names: Iterable[str] = ruleset.outputs
    if read_only:
        read: set[str] = set()
        for r in ruleset.deferred:
            if ANY in r.refs.outputs:
                break
            read.update(r.refs.outputs)
            if r.owner.kind is OwnerKind.OUTPUT:
                read.add(r.owner.name)
        else:
            names = [n for n in ruleset.outputs if n in read]
    return {name: str(ruleset.outputs[name].path) for name in names}


def deferred_inputs(
    ruleset: RuleSet,
    render: RenderResult,
    *,
    lazy: bool = False,
    lines: bool = True,
    objects: Mapping[str, Sequence[Any]] | None = None,
    paths: Mapping[str, str] | None = None,
) -> DeferredInputs:
    """Convert what the deferred rules of ``ruleset`` read from ``render`` for CEL
    (``lazy``: each object when first read; ``lines=False`` only when
    :func:`reads_lines` is false for every rule that will read them; ``objects``: each
    collection's objects as listed from the render's view already; ``paths``:
    :func:`output_paths` of ``ruleset``, made once)."""
    entries: dict[str, FileEntry | None] = {}
    states: dict[str, str] = {}
    files, statuses = render.files.files, render.outputs
    for name, path in (paths if paths is not None else output_paths(ruleset)).items():
        status = statuses.get(name)
        entry = files.get(path)
        if entry is not None and (status is None or status.state == "rendered"):
            entries[name] = entry
        else:
            entries[name] = None
            states[name] = status.state if status is not None else "not rendered"
    outputs = _Outputs(entries, lines=lines)
    if not lazy:
        for name in outputs:
            outputs[name]
    view = render.inputs.view if render.inputs is not None else None
    listed = objects or {}
    collections: dict[str, Sequence[tuple[Any, str, Any]]] = {}
    for name in _collection_names(ruleset):
        objs = listed.get(name)
        if objs is None:
            objs = _objects(view, name)
        collections[name] = (
            _Selves(objs) if lazy else [(to_cel(o), subject_of(o), _safe_ref(o)) for o in objs]
        )
    extra: Mapping[str, Any] = (
        render.inputs.extra_context if render.inputs is not None else ruleset.extra_context
    )
    return DeferredInputs(outputs, states, collections, to_cel(extra))


class _Outputs(Mapping[str, dict[str, Any] | None]):
    """Output → its CEL value (None: it produced none), converted when first read: a run
    whose judgements are all known converts no output (``haproxy.cfg`` is the largest input
    of all)."""

    def __init__(self, entries: Mapping[str, FileEntry | None], *, lines: bool = True) -> None:
        self.entries = entries
        self._lines = lines
        self._done: dict[str, dict[str, Any]] = {}

    def has_value(self, name: str) -> bool:
        return self.entries.get(name) is not None

    def __getitem__(self, name: str) -> dict[str, Any] | None:
        entry = self.entries[name]
        if entry is None:
            return None
        found = self._done.get(name)
        if found is None:
            content = entry.content.decode("utf-8", errors="replace")
            found = self._done[name] = output_value(name, entry.path, content, lines=self._lines)
        return found

    @property
    def converted(self) -> Mapping[str, dict[str, Any]]:
        return self._done

    def __iter__(self) -> Iterator[str]:
        return iter(self.entries)

    def __len__(self) -> int:
        return len(self.entries)


def _splice(objs: Sequence[Any], prev: Sequence[Any]) -> int | None:
    """The place where ``objs`` has one object more or fewer than ``prev`` when every other
    object is the very same, in the same order (compared in C); None otherwise."""
    if abs(len(objs) - len(prev)) != 1:
        return None
    at = next(compress(count(), map(is_not, objs, prev)), min(len(objs), len(prev)))
    longer, shorter = (objs, prev) if len(objs) > len(prev) else (prev, objs)
    return at if all(map(is_, islice(longer, at + 1, None), islice(shorter, at, None))) else None


def _from_base(
    objs: list[Any], base: list[Any], base_keys: list[bytes | None]
) -> list[bytes | None] | None:
    """The keys of ``objs`` from a snapshot's keys, when ``objs`` is that snapshot with a
    few places replaced or one spliced (an overlay); None otherwise. The snapshot's keys
    are not changed, nor is the identity table: it is kept to the last list."""
    if len(base) == len(objs):
        changed = list(compress(range(len(objs)), map(is_not, objs, base)))
        if len(changed) * _FEW_CHANGED > len(objs):
            return None
        keys = list(base_keys)
        for i in changed:
            keys[i] = content_key(objs[i])
        return keys
    at = _splice(objs, base)
    if at is None:
        return None
    if len(objs) < len(base):
        return base_keys[:at] + base_keys[at + 1 :]
    return [*base_keys[:at], content_key(objs[at]), *base_keys[at:]]


def _safe_ref(obj: Any) -> Any:
    try:
        return object_ref(obj)
    except Exception:
        return None


class RulesStage(Stage):
    """Deferred rules of one spec. Built once per spec, like the renderer."""

    phase = Phase.RULES

    def __init__(
        self,
        ruleset: RuleSet,
        *,
        time_budget: float = DEFAULT_TIME_BUDGET,
        isolation: Isolation = Isolation.AUTO,
    ) -> None:
        self.ruleset = ruleset
        self.time_budget = time_budget
        self.isolation = isolation
        self.plan = plan(ruleset)
        self._lines = reads_lines(self.plan.order)
        self._paths = output_paths(ruleset, read_only=True)
        self._memo: tuple[RenderResult, DeferredInputs] | None = None
        self._objects_memo: tuple[RenderResult, dict[str, _Keyed]] | None = None
        self._by_token: dict[str, tuple[object, _Keyed]] = {}
        """Per collection: the last content token seen, and its objects and keys."""
        self._keys: dict[str, dict[int, tuple[Any, bytes | None]]] = {}
        self._last_keys: dict[str, tuple[list[Any], list[bytes | None]]] = {}
        self._known = Known()
        self._recent_outputs: OrderedDict[tuple[str, Any], Judgement] = OrderedDict()
        self._digests: dict[int, tuple[bytes, str]] = {}
        self.evaluations_pending = 0
        """How many judgements the last run had to make afresh (an upper bound: known
        judgements are reused; rules skipped or suppressed are counted)."""

    def _inputs(self, render: RenderResult) -> DeferredInputs:
        """Converted once per candidate: the pipeline asks for the cache key, then runs."""
        memo = self._memo
        if memo is not None and memo[0] is render:
            return memo[1]
        keyed = self._keyed_objects(render)
        objects = {name: objs for name, (objs, _) in keyed.items()}
        inputs = deferred_inputs(
            self.ruleset, render, lazy=True, lines=self._lines, objects=objects, paths=self._paths
        )
        object_keys = {name: keyed[name][1] for name in inputs.collections}
        memo_keys = self._memo_keys(render, inputs, object_keys)
        inputs = dataclasses.replace(
            inputs, known=self._known, memo_keys=memo_keys, object_keys=object_keys
        )
        self._memo = (render, inputs)
        return inputs

    def _pending(self, inputs: DeferredInputs) -> list[tuple[CompiledRule, Sequence[int]]]:
        """Each rule of the plan with what it would judge afresh: the indexes of the objects
        (the one output, index 0) whose judgement with the same inputs is not known. Rules
        the run then skips or suppresses are counted too: this is an upper bound."""
        out: list[tuple[CompiledRule, Sequence[int]]] = []
        for r in self.plan.order:
            memo = inputs.memo_keys.get(memo_name(r))
            if r.owner.kind is OwnerKind.OUTPUT:
                if not has_value(inputs.outputs, r.owner.name):
                    out.append((r, ()))
                elif memo is None or (memo, OUTPUT_SELF) not in inputs.known:
                    out.append((r, (0,)))
                else:
                    out.append((r, ()))
                continue
            keys = inputs.object_keys.get(r.owner.name, [])
            count = len(inputs.collections.get(r.owner.name, ()))
            if memo is None or len(keys) != count:
                out.append((r, range(count)))
            elif isinstance(inputs.known, Known):
                # The rule's codes, in order, in one pass in C (``Known.row``): one new object
                # among 1,000 is one place to look at, not a look-up per object.
                row, rest = inputs.known.row(memo, keys)
                out.append((r, [i for i in zeros(row) if keys[i] is None or rest(keys[i]) is None]))
            else:
                out.append(
                    (
                        r,
                        [
                            i
                            for i, k in enumerate(keys)
                            if k is None or (memo, k) not in inputs.known
                        ],
                    )
                )
        return out

    def _convert_needed(
        self, inputs: DeferredInputs, pending: Sequence[tuple[CompiledRule, Sequence[int]]]
    ) -> None:
        """Convert here, not in the evaluation worker, everything an evaluation will read:
        conversion is not rule evaluation and must not eat the rules' time budget. What
        only known judgements would read is not converted at all. An evaluation worker is
        sent exactly what was converted here (``sent.py``)."""
        readers: dict[int, CompiledRule] = {}
        for r, todo in pending:
            if not todo:
                continue
            if r.owner.kind is OwnerKind.COLLECTION:
                selves = inputs.collections.get(r.owner.name, ())
                for i in todo:
                    selves[i]
                # The collection's rules are evaluated together on each object first
                # (``deferred._Quick``), so that evaluation reads what any of them reads.
                readers.update((id(g), g) for g in self.plan.order if g.owner == r.owner)
            else:
                inputs.outputs[r.owner.name]
            readers[id(r)] = r
        for r in readers.values():
            names = self.ruleset.collections if ANY in r.refs.collections else r.refs.collections
            for n in names:
                for i in range(len(inputs.collections.get(n, ()))):
                    inputs.collections[n][i]
            outs = self.ruleset.outputs if ANY in r.refs.outputs else r.refs.outputs
            for n in outs:
                if n in inputs.outputs:
                    inputs.outputs[n]

    def _keyed_objects(self, render: RenderResult) -> dict[str, _Keyed]:
        """The objects of each collection the deferred rules read, with their content keys;
        once per candidate, as both the cache key and the run need them."""
        memo = self._objects_memo
        if memo is not None and memo[0] is render:
            return memo[1]
        view = render.inputs.view if render.inputs is not None else None
        keyed: dict[str, _Keyed] = {}
        for name in _collection_names(self.ruleset):
            token = None
            if view is not None and name in view.names():
                # A snapshot's collection vouches for unchanged content (see content_token).
                token = getattr(view.collection(name), "content_token", lambda: None)()
            last = self._by_token.get(name)
            if token is not None and last is not None and last[0] is token:
                keyed[name] = last[1]
                continue
            objs = _objects(view, name)
            # The last snapshot's keys stay beside the last list's: see _content_keys.
            keyed[name] = (objs, self._content_keys(name, objs, last[1] if last else None))
            if token is not None:
                self._by_token[name] = (token, keyed[name])
        self._objects_memo = (render, keyed)
        return keyed

    def _content_keys(
        self, name: str, objs: list[Any], base: _Keyed | None = None
    ) -> list[bytes | None]:
        """Each object's content digest, found by identity while the store holds it.

        A snapshot after one change lists the same objects in the same places but one:
        compared by identity with the last list (in C), only the places that differ are
        looked up. That was 7-10 ms per candidate at 10,000 Ingresses, before ``haproxy -c``
        may start (the verdict cache's key needs it). A list with one object more or less
        (a create or a delete) is the last one with one place spliced, also found in C.

        ``base``: the keys of the snapshot an overlay was made on (``_keyed_objects``). An
        admission proposal is that snapshot with one change; the last list may be another
        proposal's, which placed its new object elsewhere (everything between the two
        places moved by one), so the proposal is compared with the snapshot as well."""
        last = self._last_keys.get(name)
        if last is not None:
            found = self._from_last(name, objs, *last)
            if found is not None:
                return found
        if base is not None and (last is None or base[0] is not last[0]):
            found = _from_base(objs, *base)
            if found is not None:
                return found
        seen = self._keys.get(name, {})
        now: dict[int, tuple[Any, bytes | None]] = {}
        out: list[bytes | None] = []
        for o in objs:
            hit = seen.get(id(o))
            key = hit[1] if hit is not None and hit[0] is o else content_key(o)
            now[id(o)] = (o, key)
            out.append(key)
        self._keys[name] = now
        self._last_keys[name] = (objs, out)
        return out

    def _from_last(
        self, name: str, objs: list[Any], prev: list[Any], prev_keys: list[bytes | None]
    ) -> list[bytes | None] | None:
        """The keys after a few replaced places or one spliced place since the last list,
        the identity table kept to what the list holds; None: more changed than that."""
        if len(prev) == len(objs):
            changed = list(compress(range(len(objs)), map(is_not, objs, prev)))
            if len(changed) * _FEW_CHANGED <= len(objs):
                return self._patched_keys(name, objs, prev, prev_keys, changed)
            return None
        at = _splice(objs, prev)
        if at is None:
            return None
        seen = self._keys.setdefault(name, {})
        keys = list(prev_keys)
        if len(objs) < len(prev):
            gone = seen.get(id(prev[at]))
            if gone is not None and gone[0] is prev[at]:
                del seen[id(prev[at])]
            del keys[at]
        else:
            o = objs[at]
            hit = seen.get(id(o))
            key = hit[1] if hit is not None and hit[0] is o else content_key(o)
            seen[id(o)] = (o, key)
            keys.insert(at, key)
        self._last_keys[name] = (objs, keys)
        return keys

    def _patched_keys(
        self,
        name: str,
        objs: list[Any],
        prev: list[Any],
        prev_keys: list[bytes | None],
        changed: list[int],
    ) -> list[bytes | None]:
        """The last keys with the ``changed`` places looked up again; the identity table
        drops the objects that left those places and takes the ones that came (looked up
        first: an object that moved from one changed place to another keeps its key)."""
        seen = self._keys.setdefault(name, {})
        keys = list(prev_keys)
        came: list[tuple[Any, bytes | None]] = []
        for i in changed:
            o = objs[i]
            hit = seen.get(id(o))
            key = hit[1] if hit is not None and hit[0] is o else content_key(o)
            came.append((o, key))
            keys[i] = key
        for i in changed:
            gone = seen.get(id(prev[i]))
            if gone is not None and gone[0] is prev[i]:
                del seen[id(prev[i])]
        for o, key in came:
            seen[id(o)] = (o, key)
        self._last_keys[name] = (objs, keys)
        return keys

    def _memo_keys(
        self,
        render: RenderResult,
        inputs: DeferredInputs,
        object_keys: Mapping[str, list[bytes | None]],
    ) -> dict[str, str]:
        """Per rule: a digest of everything it reads besides the object it judges — the
        extraContext it reads, the contents of the collections and outputs it names (an
        output rule's own output among them) — so that a judgement made with the same
        digest on an object with the same content is the same judgement (an output rule
        has one, under :data:`OUTPUT_SELF`). An object with no content key among what the
        rule reads: no key, judged afresh."""
        out: dict[str, str] = {}
        extra: str | None = None
        contents: dict[str, str | None] = {}

        def content(name: str) -> str | None:
            """A collection's content as a rule's key reads it: the digest of its objects'
            content keys in order (each 20 bytes, so the joined keys are unambiguous), once
            per candidate for every rule that reads it; None: an object has no key."""
            if name not in contents:
                keys = object_keys.get(name, [])
                contents[name] = (
                    None
                    if None in keys
                    else f"{len(keys)}:"
                    + hashlib.blake2b(b"".join(keys), digest_size=20).hexdigest()  # type: ignore[arg-type]
                )
            return contents[name]

        for r in self.ruleset.deferred:
            parts: list[Any] = [r.owner.key, r.index]
            if EXTRA in r.refs.variables:
                if extra is None:
                    try:
                        extra = json.dumps(inputs.extra_context, sort_keys=True)
                    except (TypeError, ValueError):
                        continue
                parts.append(extra)
            names = self.ruleset.collections if ANY in r.refs.collections else r.refs.collections
            for n in sorted(names):
                digest = content(n)
                if digest is None:
                    break
                parts.append([n, digest])
            else:
                outs = set(self.ruleset.outputs if ANY in r.refs.outputs else r.refs.outputs)
                if r.owner.kind is OwnerKind.OUTPUT:
                    outs.add(r.owner.name)
                for n in sorted(outs):
                    path = self._paths.get(n)
                    entry = render.files.get(path) if path is not None else None
                    if has_value(inputs.outputs, n) and entry is not None:
                        parts.append([n, self._digest(entry.content)])
                    else:
                        parts.append([n, None, inputs.states.get(n)])
                text = json.dumps(parts)
                out[memo_name(r)] = hashlib.blake2b(text.encode(), digest_size=20).hexdigest()
        return out

    def _digest(self, content: bytes) -> str:
        """An output's content digest, found by identity while the renderer keeps the output
        (an unchanged output is the same bytes object from one render to the next)."""
        hit = self._digests.get(id(content))
        if hit is not None and hit[0] is content:
            return hit[1]
        # sha256, not blake2b: processors with SHA extensions hash it twice as fast
        # (haproxy.cfg at 1,000 Ingresses, 427 KB: 0.47 -> 0.25 ms per changed output).
        digest = hashlib.sha256(content).hexdigest()
        if len(self._digests) >= _MAX_DIGESTS:
            self._digests.clear()
        self._digests[id(content)] = (content, digest)
        return digest

    def fingerprint(self) -> str:
        return hashlib.sha256(
            json.dumps([self.ruleset.fingerprint, self.time_budget]).encode()
        ).hexdigest()

    def input_key(self, render: RenderResult) -> str | None:
        """Digest of the non-output inputs deferred rules read; None when they read none."""
        if not self.ruleset.reads_inputs():
            return None
        # Only what identifies the inputs: a cache hit must not pay for converting them.
        keyed = self._keyed_objects(render)
        reads_extra = any(EXTRA in r.refs.variables for r in self.ruleset.deferred)
        digest = hashlib.sha256()

        def part(data: bytes) -> None:
            digest.update(len(data).to_bytes(8, "big") + data)  # length-prefixed: unambiguous

        for name in sorted(keyed):
            objs, keys = keyed[name]
            part(name.encode())
            part(len(objs).to_bytes(8, "big"))
            if None not in keys:  # the usual case, in one call: digests are all 20 bytes
                part(b"".join(keys))  # type: ignore[arg-type]
                continue
            for o, k in zip(objs, keys, strict=True):
                # An object with no JSON spelling (see content_key): its text form stands in.
                part(k if k is not None else json.dumps(o, default=str).encode())
        if reads_extra:
            extra = (
                render.inputs.extra_context
                if render.inputs is not None
                else self.ruleset.extra_context
            )
            part(json.dumps(extra, sort_keys=True, default=str).encode())
        return digest.hexdigest()

    async def _in_worker(
        self, work: Callable[[], DeferredResult], job: Job[DeferredResult], budget: RunBudget
    ) -> DeferredResult | None:
        """The forked evaluation, waited for in a thread so the event loop keeps running.

        The pipeline cancels this stage when an earlier one fails while it runs ahead. The
        thread cannot be interrupted, so cancellation sets a signal its wait also watches:
        the worker is killed and reaped before the cancellation goes on, and no evaluation
        outlives the run that wanted it.
        """
        cancel = CancelSignal()
        waiting = asyncio.ensure_future(
            asyncio.to_thread(
                execute,
                work,
                cheap=False,
                budget=budget,
                isolation=self.isolation,
                cancel=cancel,
                job=job,
            )
        )
        # Closed only when the thread is done with it, however this coroutine ends.
        waiting.add_done_callback(lambda _: cancel.close())
        try:
            return await asyncio.shield(waiting)
        except asyncio.CancelledError:
            cancel.set()
            with contextlib.suppress(WorkerCancelled, Exception):
                await waiting
            raise

    async def run(self, ctx: StageContext) -> StageOutcome:
        diagnostics = list(self.ruleset.diagnostics)
        if not self.plan.order and not diagnostics:
            return StageOutcome(rules=RuleCounters())
        inputs = self._inputs(ctx.render)
        self._memo = None  # do not keep the candidate alive after its run
        pending = self._pending(inputs)
        # Converted here, in the stage's own time and before a worker forks; not when the
        # pipeline only asks for the cache key (a cache hit needs no conversion at all).
        self._convert_needed(inputs, pending)
        # Only what is judged afresh counts: with every judgement known (the same objects
        # and the same outputs as before), nothing is evaluated and the lookups need no
        # worker; one new object is one evaluation per rule, judged as the rules require.
        evaluations = sum(len(todo) for _, todo in pending)
        budget = RunBudget(self.time_budget)
        cheap = is_cheap([r for r, todo in pending if todo], evaluations)
        self.evaluations_pending = evaluations

        def work() -> DeferredResult:
            return evaluate_deferred(self.ruleset, self.plan, inputs)

        if cheap or self.isolation is Isolation.NEVER:
            result = execute(work, cheap=cheap, budget=budget, isolation=self.isolation)
        else:
            sent = sent_inputs(inputs, self.plan)
            job = Job(evaluate_deferred, (self.ruleset, self.plan, sent), self.ruleset)
            result = await self._in_worker(work, job, budget)
        if result is None:
            assert budget.exhausted is not None
            diagnostics.append(
                budget_diagnostic("deferred rules", budget.exhausted, starved=budget.starved)
            )
            return StageOutcome(diagnostics, budget=budget.exhausted)
        diagnostics.extend(result.diagnostics)
        self._remember(inputs, result.fresh)
        return StageOutcome(diagnostics, budget=result.exhausted, rules=result.counters)

    def _remember(self, inputs: DeferredInputs, fresh: Mapping[tuple[str, Any], Judgement]) -> None:
        """Keep the judgements of this run's inputs (known and fresh), and the output rules'
        judgements of the last few runs besides (:data:`_OUTPUT_JUDGEMENTS`).

        A memo key's mapping is copied only when something leaves or joins it, in C (a
        copy, then the few removals and additions), and the next ``Known`` is told what
        changed, so it carries its codes over instead of making them again."""
        present: set[Any] = set().union(*inputs.object_keys.values())
        present.discard(None)
        present.add(OUTPUT_SELF)
        old = self._known
        kept: dict[str, dict[Any, Judgement]] = {}
        removed: dict[str, Collection[Any]] = {}
        for memo in set(inputs.memo_keys.values()):
            judged = old.by_memo.get(memo)
            if judged:
                # Judgements of objects no longer listed are dropped only once they are
                # many: they stay true, and finding them is a pass over all (admission's
                # proposals each leave one: its new object).
                gone = judged.keys() - present if len(judged) > len(present) + _STALE else ()
                if gone:
                    judged = dict(judged)  # a mapping a Known holds is never changed
                    for k in gone:
                        del judged[k]
                    removed[memo] = gone
                kept[memo] = judged
        added: dict[str, dict[Any, Judgement]] = {}
        for (memo, k), j in fresh.items():
            added.setdefault(memo, {})[k] = j
        recent = self._recent_outputs
        for memo in {*kept, *added}:
            own = added.get(memo, {}).get(OUTPUT_SELF)
            if own is None:
                own = kept.get(memo, {}).get(OUTPUT_SELF)
            if own is not None:
                recent[(memo, OUTPUT_SELF)] = own
                recent.move_to_end((memo, OUTPUT_SELF))
        while len(recent) > _OUTPUT_JUDGEMENTS:
            recent.popitem(last=False)
        for (memo, k), j in recent.items():
            if k not in kept.get(memo, ()) and k not in added.get(memo, ()):
                added.setdefault(memo, {})[k] = j
        for memo, new in added.items():
            judged = kept.get(memo)
            if judged is None or memo not in removed:  # not copied yet
                judged = dict(judged) if judged else {}
            judged.update(new)
            kept[memo] = judged
        edits = {m: (removed.get(m, ()), added.get(m, {})) for m in {*removed, *added}}
        self._known = old.changed(kept, edits)
