"""Deferred rules: evaluated once everything rendered and ``haproxy -c`` passed.

The unit is one rule of one owner. Its semantics, in the order they are checked:

1. **own-skip exemption** — an output that produced no value (skipped by ``when``, failed,
   blocked) has nothing to validate: its rules are *skipped*;
2. **fail-closed** — a rule that reads an output which produced no value *fails*: it cannot
   see what it is meant to check, and passing it would let the unchecked through;
3. **cascade suppression** — a rule that reads an owner whose own deferred rules already
   failed (at error severity) is *suppressed*: not evaluated, counted, and named once in an
   ``I5011`` summary, so the report shows the root cause and not its echoes. A warning does
   not suppress anything: suppressing would then hide the only error;
4. otherwise the rule is *evaluated* (per object, for a collection).

Order is what makes suppression deterministic. Owners are nodes of a reporting graph with an
edge from each owner to the owners its deferred rules read (validation references never
touch the render graph). Tarjan's algorithm emits its strongly connected components
dependencies-first — root causes before the rules that read them; members of a component
(a mutual reference, which is allowed) are taken in name order and reported as ``I5010``.
``evaluated + skipped + suppressed`` is the number of units; ``failed`` counts evaluated
units that failed.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import repeat
from types import MappingProxyType
from typing import Any

from controller.diagnostics import Diagnostic, Location, ObjectRef, Phase, RuleId, make
from controller.render import strongly_connected
from controller.validation.report import BudgetExhaustion, RuleCounters
from controller.validation.rules.budget import iteration_exhaustion
from controller.validation.rules.cel import BudgetExceeded, EvalError, Program, evaluate
from controller.validation.rules.compiled import CompiledRule, OwnerKind, RuleSet
from controller.validation.rules.inline import all_pass_program, budget_diagnostic
from controller.validation.rules.judge import Judgement, State, judge, plain
from controller.validation.rules.refs import ANY, EXTRA, OUTPUTS, RESOURCES

__all__ = [
    "CODE_NONE",
    "CODE_PASSED",
    "CODE_SKIPPED",
    "OUTPUT_SELF",
    "DeferredInputs",
    "DeferredResult",
    "Known",
    "Plan",
    "code_of",
    "evaluate_deferred",
    "has_value",
    "known_row",
    "memo_name",
    "plan",
    "zeros",
]

OUTPUT_SELF = b""
"""The object key under which an output rule's judgement is remembered (its ``self`` is the
output, whose content the rule's memo key already covers); no content key is empty."""

_NO_JUDGEMENTS: Mapping[Any, Judgement] = MappingProxyType({})


CODE_NONE, CODE_PASSED, CODE_SKIPPED = 0, 1, 2
"""A known judgement as one byte: passed or skipped without a diagnostic (nearly all of
them); 0 for none, or one that only the judgement itself can stand for."""

_CODES = {State.PASSED: CODE_PASSED, State.SKIPPED: CODE_SKIPPED}

Coded = tuple[dict[Any, int], dict[Any, Judgement]]
"""One memo key's judgements: content key → code (:func:`code_of`) for those a code stands
for, and the rest as they are."""

Row = tuple[bytes, Callable[[Any], Judgement | None]]
"""Per object of a collection, in order: the code of its known judgement (0: none, or not
codable), and a look-up of the judgements a code does not stand for, by content key."""


def code_of(j: Judgement) -> int:
    """The byte that stands for ``j``; 0 when it has a diagnostic or another state."""
    return _CODES.get(j.state, CODE_NONE) if j.diagnostic is None else CODE_NONE


class Known(Mapping[tuple[str, Any], Judgement]):
    """Known judgements as :attr:`DeferredInputs.known` reads them, (memo key, content key) →
    judgement, kept per memo key: a pass over every object of one rule (which of them are
    judged afresh, what a worker is sent) looks up content keys in that rule's own mapping,
    or takes set differences of it, instead of a pair per object in one mapping of all.

    The per-memo mappings are never changed once a ``Known`` holds them (a new one copies
    what it changes), so a run still reading an older ``Known`` reads what it was given.

    Each memo key's judgements are also kept as codes (:meth:`coded`), carried from one
    ``Known`` to the next with the changes applied (:meth:`changed`): the codes of every
    object, in order, are then one pass in C (:meth:`row`) rather than a look-up per object
    in Python (at 1,000 Ingresses the quickstart's three Ingress rules made 3,000 of them per
    proposal, twice: which objects are judged afresh, and what a worker is sent)."""

    __slots__ = ("_coded", "_rows", "by_memo")

    def __init__(
        self,
        by_memo: dict[str, dict[Any, Judgement]] | None = None,
        *,
        coded: dict[str, Coded] | None = None,
    ) -> None:
        self.by_memo: dict[str, dict[Any, Judgement]] = by_memo if by_memo is not None else {}
        self._coded: dict[str, Coded] = coded if coded is not None else {}
        self._rows: dict[str, tuple[Sequence[Any], bytes]] = {}

    def of(self, memo: str) -> Mapping[Any, Judgement]:
        """Content key → judgement, for one memo key."""
        return self.by_memo.get(memo, _NO_JUDGEMENTS)

    def coded(self, memo: str) -> Coded:
        """:data:`Coded` of one memo key's judgements (made on first use, then kept)."""
        found = self._coded.get(memo)
        if found is None:
            codes: dict[Any, int] = {}
            rest: dict[Any, Judgement] = {}
            for k, j in self.of(memo).items():
                code = code_of(j)
                if code:
                    codes[k] = code
                else:
                    rest[k] = j
            found = self._coded[memo] = (codes, rest)
        return found

    def row(self, memo: str, keys: Sequence[Any]) -> Row:
        """:data:`Row` of the objects whose content keys are ``keys`` (kept for the last
        ``keys`` asked about: a run asks twice, for what to judge and what to send)."""
        codes, rest = self.coded(memo)
        last = self._rows.get(memo)
        if last is not None and last[0] is keys:
            return last[1], rest.get
        row = bytes(map(codes.get, keys, repeat(CODE_NONE)))
        self._rows[memo] = (keys, row)
        return row, rest.get

    def changed(
        self,
        by_memo: dict[str, dict[Any, Judgement]],
        edits: Mapping[str, tuple[Collection[Any], Mapping[Any, Judgement]]],
    ) -> Known:
        """A ``Known`` of ``by_memo``, where each memo key's mapping is this one's (the same
        object), or, for a memo key in ``edits`` (removed keys, added judgements), this
        one's without the removed and with the added. The codes this one made are carried
        over with the same changes, not made again."""
        coded: dict[str, Coded] = {}
        for memo, judged in by_memo.items():
            have = self._coded.get(memo)
            if have is None:
                continue
            if judged is self.by_memo.get(memo):
                coded[memo] = have
                continue
            edit = edits.get(memo)
            if edit is None:
                continue
            removed, added = edit
            codes, rest = dict(have[0]), dict(have[1])
            for k in removed:
                codes.pop(k, None)
                rest.pop(k, None)
            for k, j in added.items():
                code = code_of(j)
                if code:
                    codes[k] = code
                    rest.pop(k, None)
                else:
                    rest[k] = j
                    codes.pop(k, None)
            coded[memo] = (codes, rest)
        return Known(by_memo, coded=coded)

    def get(self, key: tuple[str, Any], default: Any = None) -> Any:
        found = self.by_memo.get(key[0])
        return default if found is None else found.get(key[1], default)

    def __getitem__(self, key: tuple[str, Any]) -> Judgement:
        found = self.get(key)
        if found is None:
            raise KeyError(key)
        return found  # type: ignore[no-any-return]

    def __contains__(self, key: object) -> bool:
        return isinstance(key, tuple) and len(key) == 2 and self.get(key) is not None

    def __iter__(self) -> Iterator[tuple[str, Any]]:
        for memo, judged in self.by_memo.items():
            for k in judged:
                yield (memo, k)

    def __len__(self) -> int:
        return sum(len(judged) for judged in self.by_memo.values())


def zeros(row: bytes) -> Iterator[int]:
    """The places of ``row`` whose code is 0 (found in C, one ``find`` per place)."""
    i = row.find(CODE_NONE)
    while i >= 0:
        yield i
        i = row.find(CODE_NONE, i + 1)


def known_row(
    known: Mapping[tuple[str, Any], Judgement], memo: str, keys: Sequence[Any]
) -> Row | None:
    """``known``'s :data:`Row` for these objects, when it keeps codes (None: look up each)."""
    ask = getattr(known, "row", None)
    if not callable(ask):
        return None
    found: Row | None = ask(memo, keys)
    return found if found is not None and len(found[0]) == len(keys) else None


@dataclass(frozen=True)
class Plan:
    """Deferred units in evaluation order, and the reporting cycles among their owners."""

    order: tuple[CompiledRule, ...]
    cycles: tuple[tuple[str, ...], ...]
    """Owner keys of every component with more than one member, each sorted."""


def plan(ruleset: RuleSet) -> Plan:
    by_owner: dict[str, list[CompiledRule]] = {}
    for r in ruleset.deferred:
        by_owner.setdefault(r.owner.key, []).append(r)
    edges: dict[str, set[str]] = {k: set() for k in by_owner}
    for key, rules in by_owner.items():
        for r in rules:
            for target in ruleset.owner_keys(r):
                edges[key].add(target)
                edges.setdefault(target, set())
    components = strongly_connected(edges)
    order: list[CompiledRule] = []
    cycles: list[tuple[str, ...]] = []
    for comp in components:
        members = sorted(comp)
        if len(members) > 1:
            cycles.append(tuple(members))
        for key in members:
            order.extend(by_owner.get(key, ()))
    return Plan(tuple(order), tuple(cycles))


@dataclass(frozen=True)
class DeferredInputs:
    """Everything deferred rules may read, already converted for CEL."""

    outputs: Mapping[str, dict[str, Any] | None]
    """Every output owner: its value when it rendered, None when it produced none. It may
    convert each value when first read; :func:`has_value` asks without converting."""
    states: Mapping[str, str] = field(default_factory=dict)
    """Why an output has no value: skipped, failed, blocked (for messages)."""
    collections: Mapping[str, Sequence[tuple[dict[str, Any], str, ObjectRef | None]]] = field(
        default_factory=dict
    )
    """Per collection: (object, "namespace/name", reference) in store order."""
    extra_context: Mapping[str, Any] = field(default_factory=dict)
    known: Mapping[tuple[str, Any], Judgement] = field(default_factory=dict)
    """Judgements of collection rules already made on the same inputs: (the rule's memo key
    for this run, the object's content key) → judgement. See :class:`ObjectJudgements`."""
    memo_keys: Mapping[str, str] = field(default_factory=dict)
    """:func:`memo_name` of a rule → its memo key for this run (a digest of everything the rule reads besides
    ``self``); rules without one are judged afresh for every object."""
    object_keys: Mapping[str, Sequence[Any]] = field(default_factory=dict)
    """Per collection: each object's content key, in the order of ``collections``."""


@dataclass
class DeferredResult:
    diagnostics: list[Diagnostic] = field(default_factory=list)
    counters: RuleCounters = field(default_factory=RuleCounters)
    exhausted: BudgetExhaustion | None = None
    fresh: dict[tuple[str, Any], Judgement] = field(default_factory=dict)
    """Judgements of collection rules made by this run, for the next (see ``known``)."""


def evaluate_deferred(ruleset: RuleSet, p: Plan, inputs: DeferredInputs) -> DeferredResult:
    result = DeferredResult()
    diags = result.diagnostics
    for cycle in p.cycles:
        names = ", ".join(k.replace(":", " ", 1) for k in cycle)
        diags.append(
            make(
                "I5010",
                Phase.RULES,
                f"deferred rules of {names} read each other; they are evaluated in name order",
            )
        )
    rendered = _Rendered(inputs.outputs)
    shared = {
        OUTPUTS: rendered,
        RESOURCES: _Lists(inputs.collections),
        EXTRA: dict(inputs.extra_context),
    }
    failed_owners: set[str] = set()
    suppressed: dict[str, list[str]] = {}
    evaluated = skipped = failed = 0
    quick = _Quick(ruleset, p, inputs, shared)
    for rule in p.order:
        owner = rule.owner
        if owner.kind is OwnerKind.OUTPUT and owner.name not in rendered:
            skipped += 1
            continue
        missing = sorted(
            n for n in rule.refs.outputs if n != ANY and n != owner.name and n not in rendered
        )
        if missing:
            evaluated += 1
            failed += 1
            diags.extend(_fail_closed(rule, n, inputs.states.get(n)) for n in missing)
            if rule.is_error:
                failed_owners.add(owner.key)
            continue
        roots = sorted(ruleset.owner_keys(rule) & failed_owners)
        if roots:
            suppressed.setdefault(roots[0], []).append(rule.title)
            continue
        selves: Sequence[tuple[dict[str, Any], str, ObjectRef | None]]
        keys: Sequence[Any] | None
        if owner.kind is OwnerKind.OUTPUT:
            selves = _OwnOutput(rendered, owner.name)
            location: Location | None = Location(file=str(owner.path))
            keys = (OUTPUT_SELF,)
        else:
            selves = inputs.collections.get(owner.name, ())
            location = None
            keys = inputs.object_keys.get(owner.name)
        memo_key = inputs.memo_keys.get(memo_name(rule))
        judged, rule_failed, blocking = _judge_all(
            rule,
            selves,
            functools.partial(_visible, rule, shared),
            location,
            result,
            memo=(memo_key, keys, inputs.known) if memo_key is not None and keys else None,
            quick=quick.outcome if owner.kind is OwnerKind.COLLECTION else None,
        )
        if judged or (owner.kind is OwnerKind.COLLECTION and not selves):
            evaluated += 1
            failed += rule_failed
            if blocking:
                failed_owners.add(owner.key)
        else:
            skipped += 1
    for root, titles in sorted(suppressed.items()):
        what = root.replace(":", " ", 1)
        diags.append(
            make(
                "I5011",
                Phase.RULES,
                f"{len(titles)} deferred rule(s) not evaluated because the rules of {what} "
                f"failed: {', '.join(titles)}",
            )
        )
    result.counters = RuleCounters(
        evaluated=evaluated,
        failed=failed,
        skipped=skipped,
        suppressed=sum(len(t) for t in suppressed.values()),
    )
    return result


def memo_name(rule: CompiledRule) -> str:
    """A rule's name in :attr:`DeferredInputs.memo_keys`: its owner and its index."""
    return f"{rule.owner.key}#{rule.index}"


def has_value(outputs: Mapping[str, Any], name: str) -> bool:
    """Whether output ``name`` produced a value, without converting it when ``outputs``
    converts lazily (it then has a ``has_value`` method of its own)."""
    ask = getattr(outputs, "has_value", None)
    if callable(ask):
        return bool(ask(name))
    return outputs.get(name) is not None


class _Rendered(Mapping[str, Any]):
    """The outputs that produced a value; each converted when first read (a run whose
    judgements are all known reads none of them)."""

    def __init__(self, outputs: Mapping[str, Any]) -> None:
        self._outputs = outputs
        self._names = [n for n in outputs if has_value(outputs, n)]
        self._present = frozenset(self._names)

    def __contains__(self, name: object) -> bool:
        return name in self._present

    def __getitem__(self, name: str) -> Any:
        if name not in self._present:
            raise KeyError(name)
        return self._outputs[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)


class _Lists(Mapping[str, list[Any]]):
    """Collection → its objects' CEL values, listed when a rule first reads the collection."""

    def __init__(self, collections: Mapping[str, Sequence[tuple[Any, str, Any]]]) -> None:
        self._collections = collections
        self._done: dict[str, list[Any]] = {}

    def __getitem__(self, name: str) -> list[Any]:
        found = self._done.get(name)
        if found is None:
            found = self._done[name] = [o for o, _, _ in self._collections[name]]
        return found

    def __contains__(self, name: object) -> bool:
        return name in self._collections

    def __iter__(self) -> Iterator[str]:
        return iter(self._collections)

    def __len__(self) -> int:
        return len(self._collections)


class _OwnOutput(Sequence[tuple[Any, str, Any]]):
    """An output rule's one ``self``: the output, converted when first read."""

    def __init__(self, rendered: Mapping[str, Any], name: str) -> None:
        self._rendered, self._name = rendered, name

    def __len__(self) -> int:
        return 1

    def __getitem__(self, i: Any) -> Any:
        if i not in (0, -1):
            raise IndexError(i)
        return (self._rendered[self._name], "", None)


def _visible(rule: CompiledRule, shared: Mapping[str, Any]) -> Mapping[str, Any]:
    """Only the outputs and collections ``rule`` names (all of them for a computed name),
    as plain dicts for the runtime.

    The runtime converts a variable's whole value the first time an evaluation reads it;
    a collection rule is evaluated once per object, so handing it every output would
    convert every output once per object.
    """
    out = dict(shared)
    outputs, lists = shared[OUTPUTS], shared[RESOURCES]
    wanted = rule.refs.outputs
    out[OUTPUTS] = {n: outputs[n] for n in outputs if ANY in wanted or n in wanted}
    wanted = rule.refs.collections
    out[RESOURCES] = {n: lists[n] for n in lists if ANY in wanted or n in wanted}
    return out


_PASSED, _SKIPPED, _OTHER = 1, 0, 2
"""A rule's element in the combined program (``inline.all_pass_program``)."""


class _Quick:
    """Collection rules judged together: per object, one evaluation of every deferred rule
    of its collection (``inline.all_pass_program``) says which pass or are skipped by their
    ``when``.

    Evaluated rule by rule, each object was converted for the runtime once per rule, and a
    ``when`` shared by the rules was evaluated with it each time: the quickstart's three
    Ingress rules cost ~110 µs per object, most of the 2 s budget at 10,000 Ingresses. The
    combined result only confirms passes and skips. Its elements are independent (one per
    rule, each its own conditions and expression on the same inputs), so a rule whose
    element says "not passed" is judged on its own while the others stand; an error or the
    iteration budget (which the combination shares) anywhere in it leaves every rule of the
    object to :func:`judge`, which alone decides failures and writes their messages.
    A rule's pass or skip depends only on its inputs, never on the order of evaluation, so
    a rule that ends up suppressed or fails closed merely leaves its part unused.
    """

    def __init__(
        self, ruleset: RuleSet, p: Plan, inputs: DeferredInputs, shared: Mapping[str, Any]
    ) -> None:
        self._ruleset, self._inputs, self._shared = ruleset, inputs, shared
        self._groups: dict[str, tuple[CompiledRule, ...]] = {}
        for r in p.order:
            if r.owner.kind is OwnerKind.COLLECTION:
                self._groups[r.owner.name] = (*self._groups.get(r.owner.name, ()), r)
        self._found: dict[tuple[str, int], list[int] | None] = {}
        self._visible: dict[str, Mapping[str, Any]] = {}

    def outcome(self, rule: CompiledRule, i: int) -> State | None:
        """PASSED or SKIPPED when the combined evaluation of object ``i`` settles ``rule``;
        None when the rule must be judged on its own."""
        rules = self._groups.get(rule.owner.name, ())
        if len(rules) < 2:
            return None
        key = (rule.owner.name, i)
        if key not in self._found:
            self._found[key] = self._evaluate(rule.owner.name, rules, i)
        found = self._found[key]
        if found is None:
            return None
        x = found[rules.index(rule)]
        return State.PASSED if x == _PASSED else State.SKIPPED if x == _SKIPPED else None

    def _evaluate(self, name: str, rules: tuple[CompiledRule, ...], i: int) -> list[int] | None:
        combined: Program | None = self._ruleset.all_pass(
            f"deferred:collection:{name}", rules, all_pass_program
        )
        if combined is None:
            return None
        visible = self._visible.get(name)
        if visible is None:
            visible = self._visible[name] = _visible_to(rules, self._shared)
        value = self._inputs.collections[name][i][0]
        try:
            quick = evaluate(combined, {**visible, "self": value})
        except (EvalError, BudgetExceeded):
            return None
        if (
            isinstance(quick, list)
            and len(quick) == len(rules)
            and all(type(x) is int and x in (_PASSED, _SKIPPED, _OTHER) for x in quick)
        ):
            return quick
        return None


def _visible_to(rules: Sequence[CompiledRule], shared: Mapping[str, Any]) -> Mapping[str, Any]:
    """What :func:`_visible` gives each of ``rules``, together."""
    out: dict[str, Any] = dict(shared)
    for part in (OUTPUTS, RESOURCES):
        merged: dict[str, Any] = {}
        for r in rules:
            merged.update(_visible(r, shared)[part])
        out[part] = merged
    return out


def _judge_all(
    rule: CompiledRule,
    selves: Sequence[tuple[dict[str, Any], str, ObjectRef | None]],
    visible: Callable[[], Mapping[str, Any]],
    location: Location | None,
    result: DeferredResult,
    memo: tuple[str, Sequence[Any], Mapping[tuple[str, Any], Judgement]] | None = None,
    quick: Callable[[CompiledRule, int], State | None] | None = None,
) -> tuple[int, bool, bool]:
    """``memo`` (the rule's memo key, the objects' content keys, known judgements): an
    object whose judgement on the same inputs is known is not judged again (and, when
    ``selves`` converts lazily, not converted either). ``visible()`` gives what the rule
    reads besides ``self``, asked for only when something is judged. ``quick(rule, i)``
    (see :class:`_Quick`) settles passes and skips before a judgement is asked for."""
    judged = 0
    rule_failed = blocking = False
    shared: Mapping[str, Any] | None = None
    todo: Iterable[int] = range(len(selves))
    rest: Callable[[Any], Judgement | None] | None = None
    row = known_row(memo[2], memo[0], memo[1]) if memo is not None else None
    if row is not None and len(row[0]) == len(selves):
        # Objects whose judgement a code stands for need nothing but counting: a pass is
        # judged and a skip is not, neither has a diagnostic (see ``Known.row``).
        codes, rest = row
        judged = codes.count(CODE_PASSED)
        todo = zeros(codes)
    for i in todo:
        object_key = memo[1][i] if memo is not None else None
        key = (memo[0], object_key) if memo is not None and object_key is not None else None
        if key is None:
            j = None
        elif rest is not None:
            j = rest(object_key)
        else:
            j = memo[2].get(key) if memo is not None else None
        if j is None and quick is not None and (settled := quick(rule, i)) is not None:
            j = plain(settled)
            if key is not None:
                result.fresh[key] = j
        if j is None:
            value, subject, ref = selves[i]
            if shared is None:
                shared = visible()
            try:
                j = judge(
                    rule, {**shared, "self": value}, location=location, object=ref, subject=subject
                )
            except BudgetExceeded:
                judged += 1
                if result.exhausted is None:
                    result.exhausted = iteration_exhaustion()
                    where = rule.title + (f" on {subject}" if subject else "")
                    result.diagnostics.append(budget_diagnostic(where, result.exhausted))
                continue
            if key is not None:
                result.fresh[key] = j
        if j.state is State.SKIPPED:
            continue
        judged += 1
        if j.diagnostic is not None:
            rule_failed = True
            blocking = blocking or j.blocking
            result.diagnostics.append(j.diagnostic)
    return judged, rule_failed, blocking


def _fail_closed(rule: CompiledRule, name: str, state: str | None) -> Diagnostic:
    rule_id: RuleId = "E5005" if rule.is_error else "W5006"
    why = f" (it was {state})" if state else ""
    location = Location(file=rule.owner.path) if rule.owner.path else None
    return make(
        rule_id,
        Phase.RULES,
        f'{rule.title}: deferred validation references output "{name}" which did not '
        f"produce a value{why}",
        location=location,
    )
