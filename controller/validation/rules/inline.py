"""Inline rules: those that read only ``self``, judged the moment their owner exists.

For an output that is right after it rendered, through the renderer's ``after_output`` hook:
an error there fails the output and the renderer skips everything that depends on it, naming
this failure as the root cause. For a watched object it is before any render: the render-calling code judges the loaded
objects first (:func:`check_objects`), and the admission webhook — a later issue — is to
judge a proposed object alone with the same function.
"""

from __future__ import annotations

import hashlib
import json
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import chain, compress, count, repeat
from operator import is_
from typing import Any, overload

from controller.diagnostics import Diagnostic, Location, ObjectRef, Phase, Severity, make
from controller.observability import escape_controls
from controller.render import RenderedOutput, same_ends, scattered
from controller.resources import object_ref
from controller.validation.report import BudgetExhaustion, RuleCounters
from controller.validation.rules.budget import (
    Isolation,
    RunBudget,
    execute,
    is_cheap,
    iteration_exhaustion,
)
from controller.validation.rules.cel import (
    BudgetExceeded,
    CompileError,
    EvalError,
    Program,
    compile_expression,
    evaluate,
    to_cel,
)
from controller.validation.rules.compiled import CompiledRule, RuleSet
from controller.validation.rules.judge import State, judge, output_value, reads_lines
from controller.validation.rules.wire import Job

__all__ = [
    "Batch",
    "InlineRules",
    "ObjectMemo",
    "OutputMemo",
    "all_pass_program",
    "budget_diagnostic",
    "check_objects",
    "content_key",
    "judge_many",
    "subject_of",
]


@dataclass
class Batch:
    """What one batch of judgements found (picklable: it may come from a worker)."""

    diagnostics: list[Diagnostic] = field(default_factory=list)
    counters: RuleCounters = field(default_factory=RuleCounters)
    exhausted: BudgetExhaustion | None = None
    by_self: list[list[Diagnostic]] = field(default_factory=list)
    """The same diagnostics per ``self``, in the order the selves were given."""
    by_collection: dict[str, list[Diagnostic]] = field(default_factory=dict)
    """The same diagnostics per collection (:func:`check_objects` only)."""


def subject_of(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata")
    if not isinstance(meta, Mapping):
        return "(unnamed)"
    ns, name = meta.get("namespace"), meta.get("name")
    return escape_controls(f"{ns}/{name}" if ns else str(name))


def _ref(obj: Mapping[str, Any]) -> ObjectRef | None:
    try:
        return object_ref(obj)
    except Exception:
        return None


def budget_diagnostic(
    where: str, exhausted: BudgetExhaustion, *, starved: float | None = None
) -> Diagnostic:
    """``starved``: the seconds of wall time after which the wall-time backstop killed the
    worker (``RunBudget.starved``). Then the CPU used is below the limit, and saying "ran out
    of the budget" alone would read as a contradiction."""
    used = f", used {exhausted.used:g}" if exhausted.used is not None else ""
    if starved is not None:
        return make(
            "E0002",
            Phase.RULES,
            f"{where} were stopped after {starved:g} s of wall time, having had "
            f"{exhausted.used or 0:g} s of CPU of the {exhausted.budget} budget "
            f"(limit {exhausted.limit:g}): the machine's other work starved the evaluation; "
            "not proven valid",
        )
    return make(
        "E0002",
        Phase.RULES,
        f"{where} ran out of the {exhausted.budget} budget (limit {exhausted.limit:g}{used}); "
        "not proven valid",
    )


Self = tuple[Any, str, ObjectRef | None]
"""One ``self`` to judge: its CEL value, its name in messages, its Kubernetes reference."""

_PASSED, _SKIPPED = 1, 0


def all_pass_program(rules: Sequence[CompiledRule]) -> Program | None:
    """One program that says, per rule, "passed" (1) or "skipped by a ``when``" (0).

    Nearly every object passes every rule, so most objects are judged by evaluating this
    once instead of each rule's programs in turn (the binding converts the whole activation
    on every evaluation). Any other outcome — an element that is neither 1 nor 0, an
    evaluation error, the iteration budget (shared by the rules here, one each in
    :func:`judge`) — sends that object through :func:`judge`, rule by rule, which alone
    decides failures and writes their messages. So this program can only confirm what the
    rules would find, never change it. None when the rules cannot be combined (the
    combination does not compile, e.g. past the parser's nesting limit).
    """
    if not rules:
        return None
    parts = []
    for r in rules:
        # Each source on lines of its own: a trailing `// comment` must not swallow the rest.
        element = f"((\n{r.expression.source}\n) == true ? {_PASSED} : 2)"
        for cond in (r.when, r.block_when):
            if cond is not None:
                element = f"((\n{cond.source}\n) ? {element} : {_SKIPPED})"
        parts.append(element)
    try:
        return compile_expression("[" + ",\n".join(parts) + "]", limit=None)
    except CompileError:
        return None


def judge_many(
    rules: Sequence[CompiledRule],
    selves: Sequence[Self],
    extra: Mapping[str, Any],
    location: Location | None,
    *,
    combined: Program | None = None,
    describe: Callable[[int], tuple[str, ObjectRef | None]] | None = None,
) -> Batch:
    """Every rule against every ``self``; one counter unit per rule.

    ``combined`` (:func:`all_pass_program` of ``rules``) settles the objects that pass or are
    skipped in one evaluation each. ``describe(i)`` gives the subject and reference of
    ``selves[i]`` when they are needed — only for an object that does not simply pass — so
    the caller need not build them for every object.
    """
    batch = Batch(by_self=[[] for _ in range(len(selves))])
    judged = [False] * len(rules)
    failed = [False] * len(rules)
    outcomes = (_PASSED, _SKIPPED)
    for i, (value, subject, ref) in enumerate(selves):
        data = {"self": value, **extra}
        if combined is not None:
            try:
                quick = evaluate(combined, data)
            except (EvalError, BudgetExceeded):
                quick = None
            if (
                isinstance(quick, list)
                and len(quick) == len(rules)
                and all(type(x) is int and x in outcomes for x in quick)
            ):
                for k, x in enumerate(quick):
                    judged[k] = judged[k] or x == _PASSED
                continue
        if describe is not None:
            subject, ref = describe(i)
        for k, rule in enumerate(rules):
            try:
                j = judge(rule, data, location=location, object=ref, subject=subject)
            except BudgetExceeded:
                judged[k] = True
                if batch.exhausted is None:
                    batch.exhausted = iteration_exhaustion()
                    where = rule.title + (f" on {subject}" if subject else "")
                    diag = budget_diagnostic(where, batch.exhausted)
                    batch.diagnostics.append(diag)
                    batch.by_self[i].append(diag)
                continue
            if j.state is State.SKIPPED:
                continue
            judged[k] = True
            if j.diagnostic is not None:
                failed[k] = True
                batch.diagnostics.append(j.diagnostic)
                batch.by_self[i].append(j.diagnostic)
    evaluated = sum(1 for k in range(len(rules)) if judged[k] or not selves)
    batch.counters = RuleCounters(
        evaluated=evaluated,
        failed=sum(failed),
        skipped=len(rules) - evaluated,
    )
    return batch


_OutputKey = tuple[str, str, bytes]
"""(output name, deploy path, digest of the content): everything ``self`` of an output is."""


def _judge_output(ruleset: RuleSet, name: str, path: str, content: str) -> Batch:
    """The inline rules of output ``name`` on its rendered ``content`` (a :class:`Job`)."""
    rules = ruleset.inline_for(ruleset.outputs[name])
    # Without ``lines`` unless a rule may read them: the runtime converts the whole value
    # when a rule first reads ``self``, and haproxy.cfg's 12,000 lines at 1,000 Ingresses
    # made its five rules cost 1.3-1.7 ms for every changed haproxy.cfg instead of 0.2.
    selves = [(output_value(name, path, content, lines=reads_lines(rules)), "", None)]
    combined = ruleset.all_pass(f"output:{name}", rules, all_pass_program)
    return judge_many(rules, selves, {}, Location(file=path), combined=combined)


class OutputMemo:
    """Inline verdicts of outputs by content, shared by the renders of one rule set.

    An inline output rule reads only ``self`` — the output's name, path and content — so its
    verdict is a function of the rule set (one memo per
    :class:`~controller.validation.rules.RuledRenderer`) and those: an output whose bytes did
    not change (an object the templates ignore, a resync, an admission proposal beside the
    live render) is not judged again, and no worker is forked for it. Kept: passes and
    warnings. A verdict with an error, or a batch that ran out of budget, is judged again
    next time, as the verdict cache never keeps a failure. Renders may run in several
    threads at once (admission), hence the lock.
    """

    MAX_ENTRIES = 256
    MAX_IDENTITIES = 16
    """Content digests found by the text's identity (a kept output is the same string from
    one render to the next); strong references, few, so old outputs are not held long."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._verdicts: OrderedDict[_OutputKey, tuple[Verdict, RuleCounters]] = OrderedDict()
        self._ids: dict[int, tuple[str, bytes]] = {}
        self.hits = 0

    def key(self, name: str, out: RenderedOutput) -> _OutputKey:
        text = out.content
        with self._lock:
            hit = self._ids.get(id(text))
        if hit is not None and hit[0] is text:
            return (name, out.path, hit[1])
        # sha256: with the processor's SHA extensions twice as fast as blake2b here (a
        # changed haproxy.cfg at 1,000 Ingresses, 253 KB: 0.36 -> 0.14 ms).
        digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()
        with self._lock:
            self._forget_unheld()
            if len(self._ids) >= self.MAX_IDENTITIES:
                self._ids.clear()
            self._ids[id(text)] = (text, digest)
        return (name, out.path, digest)

    def _forget_unheld(self) -> None:
        """Drop the texts no one but this memo holds: such a string can never be handed in
        again, so its entry finds nothing, and at 10,000 Ingresses each is a 2.6 MB
        haproxy.cfg of a past render (six of them were 15 MB of ``htc local``'s memory)."""
        for ident, (text, _) in list(self._ids.items()):
            # References: the entry's tuple, the name ``text``, getrefcount's argument.
            if sys.getrefcount(text) <= 3:
                del self._ids[ident]

    def get(self, key: _OutputKey) -> tuple[Verdict, RuleCounters] | None:
        with self._lock:
            found = self._verdicts.get(key)
            if found is not None:
                self._verdicts.move_to_end(key)
                self.hits += 1
            return found

    def put(self, key: _OutputKey, verdict: Verdict, counters: RuleCounters) -> None:
        if any(d.severity.rank <= Severity.ERROR.rank for d in verdict):
            return
        with self._lock:
            self._verdicts[key] = (verdict, counters)
            self._verdicts.move_to_end(key)
            while len(self._verdicts) > self.MAX_ENTRIES:
                self._verdicts.popitem(last=False)


class InlineRules:
    """The ``after_output`` hook of one render: a fresh budget per render."""

    def __init__(
        self,
        ruleset: RuleSet,
        *,
        budget: RunBudget | None = None,
        isolation: Isolation = Isolation.AUTO,
        memo: OutputMemo | None = None,
    ) -> None:
        self.ruleset = ruleset
        self.budget = budget or RunBudget()
        self.isolation = isolation
        self.memo = memo
        self.counters = RuleCounters()
        self.seconds = 0.0
        """Time spent judging, over every output of the render."""
        self.charged = 0.0
        """What that judging charged the budget (CPU seconds, see ``budget.py``)."""

    def __call__(self, name: str, out: RenderedOutput) -> list[Diagnostic]:
        owner = self.ruleset.outputs.get(name)
        rules = self.ruleset.inline_for(owner) if owner is not None else ()
        if not rules:
            return []
        started = time.perf_counter()
        before = self.budget.used
        try:
            return self._judge(name, out, rules)
        finally:
            self.seconds += time.perf_counter() - started
            self.charged += self.budget.used - before

    def _judge(
        self, name: str, out: RenderedOutput, rules: Sequence[CompiledRule]
    ) -> list[Diagnostic]:
        key = self.memo.key(name, out) if self.memo is not None else None
        known = self.memo.get(key) if self.memo is not None and key is not None else None
        if known is not None:
            # The same rules on the same name, path and content: the same verdict. Its rule
            # units count as they did when judged.
            self._count(Batch(counters=known[1]))
            return list(known[0])
        location = Location(file=out.path)
        job = Job(_judge_output, (self.ruleset, name, out.path, out.content), self.ruleset)
        batch = execute(
            job,
            cheap=is_cheap(rules, len(rules)),
            budget=self.budget,
            isolation=self.isolation,
            job=job,
        )
        if batch is None:
            assert self.budget.exhausted is not None
            diag = budget_diagnostic(
                f"inline rules of {name}", self.budget.exhausted, starved=self.budget.starved
            )
            return [diag.model_copy(update={"location": location})]
        self._count(batch)
        if batch.exhausted is not None and self.budget.exhausted is None:
            self.budget.exhausted = batch.exhausted
        if batch.exhausted is None and self.memo is not None and key is not None:
            self.memo.put(key, tuple(batch.diagnostics), batch.counters)
        return batch.diagnostics

    def _count(self, batch: Batch) -> None:
        c, b = self.counters, batch.counters
        self.counters = RuleCounters(
            evaluated=c.evaluated + b.evaluated,
            failed=c.failed + b.failed,
            skipped=c.skipped + b.skipped,
        )


ContentKey = bytes


def content_key(obj: Mapping[str, Any]) -> ContentKey | None:
    """A digest of everything an object holds, or None when it holds something JSON cannot
    spell (then only its identity can vouch for it).

    Equal digests mean equal JSON text, hence equal values as rules see them (:func:`to_cel`
    maps each JSON spelling to one value) and equal names and references in messages: a
    verdict may be reused for any object with the same digest. Key order counts, so two
    equal objects written in different key orders only miss the cache.
    """
    try:
        text = json.dumps(obj, ensure_ascii=False, allow_nan=True, separators=(",", ":"))
    except (TypeError, ValueError):
        return None
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=20).digest()


Verdict = tuple[Diagnostic, ...]

_FEW_CHANGED = 64
"""Verdicts of a common head or tail that may differ from those written last before
:meth:`ObjectMemo.replace` writes them all."""


class ObjectMemo:
    """Inline verdicts of watched objects, by content, for the objects of the latest call.

    An inline rule reads only ``self``, so its verdict is a function of the rule set (one
    memo per :class:`~controller.validation.rules.RuledRenderer`, which has one) and the
    object's content. Stored objects are frozen and a snapshot shares every unchanged object
    with the previous one, so the object's identity finds its digest without hashing again;
    a new object with known content (a resync, a rebuilt store, an update that changed
    nothing) is found by its digest. The memo keeps what the latest call saw (strong
    references, so an id cannot be reused) and forgets the rest once it is an eighth of
    that (or 64 objects); with one object changed, a render judges one object. A batch that
    ran out of budget is never remembered.

    A render asks about every object of a collection, 10,000 Ingresses say, with one
    changed. The list it asks about is the last one but for a run in the middle (a snapshot
    keeps the store's order), so the keys of the common head and tail are taken from the
    last answer, found by identity in C; only the run between is looked up one by one.
    Looking up and remembering are passes in C too.
    """

    def __init__(self) -> None:
        self._ids: dict[str, dict[int, tuple[Mapping[str, Any], ContentKey | int]]] = {}
        self._verdicts: dict[str, dict[ContentKey | int, Verdict | None]] = {}
        self._asked: dict[str, tuple[list[Mapping[str, Any]], list[ContentKey | int]]] = {}
        """Per collection: the objects of the latest :meth:`keys` call and their keys."""
        self._spliced: dict[str, tuple[list[ContentKey | int], int, int, list[Any]]] = {}
        """Per collection: the keys of the latest :meth:`keys` call that took its common
        head and tail from the call before, how long those are, and that call's keys."""
        self._judged: dict[str, tuple[list[ContentKey | int], list[Verdict | None]]] = {}
        """Per collection: the keys and verdicts of the latest :meth:`replace`. The next
        call's keys share all but a run with them: :meth:`lookup` takes the verdicts of the
        rest from here, and :meth:`replace` writes only that run's (a dictionary lookup and
        store per object, of keys spread over the heap, were 10,000 of each per render)."""

    def keys(self, name: str, objs: Sequence[Mapping[str, Any]]) -> list[ContentKey | int]:
        """Each object's memo key: its digest, or its identity when it has none. The
        caller must not change the list (a second call with the very same objects, as the
        render makes, gets the same one)."""
        last = self._asked.get(name)
        if last is not None and last[0] is objs:
            return last[1]
        objs = objs if type(objs) is list else list(objs)
        ids = self._ids.setdefault(name, {})
        head, tail = same_ends(last[0], objs) if last is not None else (0, 0)
        out: list[ContentKey | int] = last[1][:head] if last is not None else []
        for o in objs[head : len(objs) - tail]:
            hit = ids.get(id(o))
            if hit is not None and hit[0] is o:
                key = hit[1]
            else:
                # Kept until the next replace(), so that asking again (whether to judge
                # beside the render, then judging) does not hash the object again.
                found = content_key(o)
                key = found if found is not None else id(o)
                ids[id(o)] = (o, key)
            out.append(key)
        if tail and last is not None:
            out += last[1][len(last[1]) - tail :]
        self._asked[name] = (objs, out)
        if last is not None:
            self._spliced[name] = (out, head, tail, last[1])
        return out

    def _run(
        self, name: str, keys: Sequence[ContentKey | int]
    ) -> tuple[int, int, list[Verdict | None]] | None:
        """The common head and tail ``keys`` share with the latest :meth:`replace`'s keys,
        when they were spliced from those (:meth:`keys`), and that replace's verdicts."""
        spliced, judged = self._spliced.get(name), self._judged.get(name)
        if spliced is None or judged is None or spliced[0] is not keys:
            return None
        if spliced[3] is not judged[0]:
            return None
        return spliced[1], spliced[2], judged[1]

    def _written(
        self, name: str, keys: Sequence[ContentKey | int], verdicts: Sequence[Verdict | None]
    ) -> Iterable[int] | None:
        """The positions whose verdict :meth:`replace` must write, when only some: the run
        between the common head and tail, and those of the head and tail whose verdict is
        not the one written last (found by identity, in C)."""
        run = self._run(name, keys)
        if run is None or type(verdicts) is not list:
            return None
        head, tail, was = run
        stop, end = len(keys) - tail, len(was) - tail
        changed_head = scattered(was[:head], verdicts[:head], _FEW_CHANGED)
        changed_tail = scattered(was[end:], verdicts[stop:], _FEW_CHANGED)
        if changed_head is None or changed_tail is None:
            return None
        return chain(changed_head, range(head, stop), (stop + i for i in changed_tail))

    def lookup(
        self,
        name: str,
        objs: Sequence[Mapping[str, Any]],
        keys: Sequence[ContentKey | int] | None = None,
    ) -> list[Verdict | None]:
        keys = keys if keys is not None else self.keys(name, objs)
        verdicts = self._verdicts.get(name, {})
        run = self._run(name, keys)
        if run is None:
            return list(map(verdicts.get, keys))
        head, tail, was = run
        middle = list(map(verdicts.get, keys[head : len(keys) - tail]))
        return was[:head] + middle + (was[len(was) - tail :] if tail else [])

    def replace(
        self,
        name: str,
        objs: Sequence[Mapping[str, Any]],
        verdicts: Sequence[Verdict | None],
        keys: Sequence[ContentKey | int] | None = None,
    ) -> None:
        keys = keys if keys is not None else self.keys(name, objs)
        if len(keys) != len(verdicts):
            raise ValueError("one verdict per object")
        known = self._verdicts.setdefault(name, {})
        # None: not judged, as if missing. The keys of the common head and tail are those
        # the latest replace wrote: only the run between, and any of theirs whose verdict
        # is another object now, are written.
        written = self._written(name, keys, verdicts)
        if written is None:
            known.update(zip(keys, verdicts, strict=True))
        else:
            known.update((keys[i], verdicts[i]) for i in written)
        ids = self._ids.get(name)
        slack = max(64, len(keys) // 8)
        if ids is None or len(ids) > len(keys) + slack or len(known) > len(keys) + slack:
            # Forget what the latest call did not see (what keys() met since, and the
            # verdicts of contents gone), once there is enough of it to be worth a pass.
            self._ids[name] = dict(zip(map(id, objs), zip(objs, keys, strict=True), strict=True))
            self._verdicts[name] = dict(zip(keys, verdicts, strict=True))
        self._judged[name] = (list(keys) if type(keys) is not list else keys, list(verdicts))


class _Converted(Sequence[Self]):
    """Objects as rule values, each converted when it is judged and dropped right after.

    Converting all of them first held 10,000 converted Ingresses (170,000 dicts) alive at
    once, and the garbage collector walked them again and again while they were built:
    about 0.3 s of CPU in 1 s of judging. One at a time, each is freed by its reference
    count before the collector is due.
    """

    def __init__(self, objs: Sequence[Mapping[str, Any]]) -> None:
        self._objs = objs

    def __len__(self) -> int:
        return len(self._objs)

    @overload
    def __getitem__(self, i: int) -> Self: ...
    @overload
    def __getitem__(self, i: slice) -> Sequence[Self]: ...
    def __getitem__(self, i: int | slice) -> Self | Sequence[Self]:
        if isinstance(i, slice):
            return [(to_cel(o), "", None) for o in self._objs[i]]
        return (to_cel(self._objs[i]), "", None)


def _describe(obj: Mapping[str, Any]) -> tuple[str, ObjectRef | None]:
    return subject_of(obj), _ref(obj)


def _judge_objects(ruleset: RuleSet, name: str, todo: Sequence[Mapping[str, Any]]) -> Batch:
    """The inline rules of collection ``name`` on ``todo`` (a :class:`Job`). The objects
    are converted where they are judged: in a worker, the conversion is the worker's."""
    rules = ruleset.inline_for(ruleset.collections[name])
    combined = ruleset.all_pass(f"collection:{name}", rules, all_pass_program)
    return judge_many(
        rules,
        _Converted(todo),
        {},
        None,
        combined=combined,
        describe=lambda k: _describe(todo[k]),
    )


def check_objects(
    ruleset: RuleSet,
    objects: Mapping[str, Iterable[Mapping[str, Any]]],
    *,
    budget: RunBudget | None = None,
    isolation: Isolation = Isolation.AUTO,
    memo: ObjectMemo | None = None,
) -> Batch:
    """Inline rules of watched collections over ``objects`` (collection → objects).

    The render-calling code passes every stored object before it renders (with a ``memo``,
    so objects whose content was judged before are not judged again); admission passes the
    one proposed object. Collections without inline rules are not read at all. Diagnostics
    come per object, in the order given. The budget is charged for what is evaluated: the
    objects the memo did not know.
    """
    budget = budget or RunBudget()
    total = Batch()
    for name in sorted(objects):
        owner = ruleset.collections.get(name)
        rules = ruleset.inline_for(owner) if owner is not None else ()
        if not rules:
            continue
        given = objects[name]
        objs = given if type(given) is list else list(given)  # read only, never changed
        keys = memo.keys(name, objs) if memo is not None else None
        verdicts: list[Verdict | None] = (
            memo.lookup(name, objs, keys) if memo is not None else [None] * len(objs)
        )
        todo = list(compress(objs, map(is_, verdicts, repeat(None))))
        result: Batch | None = Batch()
        if todo:
            job = Job(_judge_objects, (ruleset, name, todo), ruleset)
            result = execute(
                job,
                cheap=is_cheap(rules, len(rules) * len(todo)),
                budget=budget,
                isolation=isolation,
                job=job,
            )
        if result is None:
            assert budget.exhausted is not None
            total.diagnostics.append(
                budget_diagnostic(
                    f"inline rules of collection {name}",
                    budget.exhausted,
                    starved=budget.starved,
                )
            )
            total.exhausted = total.exhausted or budget.exhausted
            break
        found_here: list[Diagnostic] = []
        if result.exhausted is None:
            if todo:
                pending = list(compress(count(), map(is_, verdicts, repeat(None))))
                for i, found in zip(pending, result.by_self, strict=True):
                    verdicts[i] = tuple(found)
            if memo is not None:
                memo.replace(name, objs, verdicts, keys)
            found_here.extend(chain.from_iterable(filter(None, verdicts)))
        else:
            found_here.extend(d for v in verdicts for d in (v or ()))
            found_here.extend(result.diagnostics)
        total.diagnostics.extend(found_here)
        if found_here:
            total.by_collection[name] = found_here
        total.exhausted = total.exhausted or result.exhausted
        c, b = total.counters, result.counters
        total.counters = RuleCounters(
            evaluated=c.evaluated + b.evaluated,
            failed=c.failed + b.failed,
            skipped=c.skipped + b.skipped,
        )
    return total
