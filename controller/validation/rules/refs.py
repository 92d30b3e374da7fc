"""What one checked CEL expression refers to: variables, output names, collection names.

The walk keeps a scope of names bound by comprehensions (``all``, ``exists``, ``map`` …
expand into loops with an iteration and an accumulator variable), so ``[1].all(outputs, …)``
does not count as a reference to the global ``outputs``. A name that cannot be read off a
constant — ``outputs[name]``, ``outputs`` iterated or passed to a function — is recorded as
:data:`ANY`, which every consumer treats as "all of them".
"""

from __future__ import annotations

from dataclasses import dataclass

from controller.validation.rules.checked import Node
from controller.validation.rules.matching import FUNCTION

__all__ = ["ANY", "Refs", "collect", "reads_field"]

ANY = "*"
"""A reference whose target name is computed at evaluation time."""

OUTPUTS = "outputs"
RESOURCES = "resources"
SELF = "self"
EXTRA = "extraContext"
VARIABLES = (SELF, OUTPUTS, RESOURCES, EXTRA)

_INDEX = frozenset({"_[_]", "_[?_]", "_?._"})
_IN = "@in"


@dataclass(frozen=True, slots=True)
class Refs:
    variables: frozenset[str] = frozenset()
    """Free variables read: a subset of self, outputs, resources, extraContext."""
    outputs: frozenset[str] = frozenset()
    """Output names read through ``outputs`` (``ANY`` when computed)."""
    collections: frozenset[str] = frozenset()
    """Collection names read through ``resources`` (``ANY`` when computed)."""
    iterates: bool = False
    """The expression may do work that grows faster than its size times its input: a
    comprehension other than an element-local ``all``/``exists``/``exists_one``, a string
    function whose output can multiply (``replace``, ``join``, ``quote``, ``format``), or a
    pattern that is not a constant. ``regex.extractAll`` with a constant pattern, which is
    not bounded either, watches the deadline itself (``deadline.py``)."""
    size: int = 0
    """Number of nodes; a bound on the work of a loop-free expression."""
    output_fields: frozenset[str] = frozenset()
    """Fields read of an output's value through ``outputs`` (``outputs['x'].content``):
    ``ANY`` when a value is used otherwise (compared, iterated, passed to a function, indexed
    by a computed key), which may read every field."""
    self_fields: frozenset[str] = frozenset()
    """The same for ``self`` (an output's value when the rule belongs to an output)."""

    def __or__(self, other: Refs) -> Refs:
        return Refs(
            self.variables | other.variables,
            self.outputs | other.outputs,
            self.collections | other.collections,
            self.iterates or other.iterates,
            self.size + other.size,
            self.output_fields | other.output_fields,
            self.self_fields | other.self_fields,
        )


def reads_field(fields: frozenset[str], name: str) -> bool:
    """Whether an expression with these ``*_fields`` may read field ``name``."""
    return name in fields or ANY in fields


_BUILDERS = frozenset({"comprehension", "list", "struct"})
_MULTIPLYING = frozenset({"replace", "join", "quote", "strings.quote", "format"})
"""String functions whose output can be a multiple of their input (``replace('', long)``,
``join`` with a long separator, quoting, formatting), so that a chain of them grows
exponentially in the expression's length: never in-process."""
_PATTERN_TAKERS = {"matches": 1, FUNCTION: 1, "regex.extractAll": 1}
"""Functions taking a pattern (``matches`` as written, and as ``matching.py`` renames it in
compiled programs), and its index among the arguments after the receiver: a
pattern that is not a constant may come from a hostile object, and RE2's time per
character grows with the pattern's size."""


def _expensive_call(call: Node) -> bool:
    if call.name in _MULTIPLYING:
        return True
    index = _PATTERN_TAKERS.get(call.name)
    if index is None:
        return False
    args = call.args if call.target is None else (call.target, *call.args)
    return len(args) <= index or args[index].kind != "const"


def _element_local(loop: Node) -> bool:
    """An ``all``/``exists``/``exists_one`` whose body reads only its own element and
    accumulator and builds nothing, and whose result is the accumulator: each step costs at
    most the expression's size times one element, so the loop as a whole stays within its
    size times the input, like a loop-free expression. ``map`` and ``filter`` build a list
    at every step, a nested loop multiplies, a body that reads anything else (``self``,
    another loop's variable) may scan the whole input at every step, and a result that does
    more than look at the accumulator once (``optMap`` binds a value and computes with it)
    can multiply it: those count as loops."""
    own = set(loop.binds)
    result = loop.result
    if result is None:
        return False
    uses = 0
    for n in result.walk():  # the accumulator itself, or one test of it (exists_one: == 1)
        if n.kind in _BUILDERS or (n.kind == "ident" and n.name != loop.accu):
            return False
        uses += n.kind == "ident"
    if uses > 1:
        return False
    for part in loop.inner:
        for n in part.walk():
            if n.kind in _BUILDERS or (n.kind == "ident" and n.name not in own):
                return False
    return True


def _field(value: Node, parent: Node | None) -> str:
    """The constant field ``parent`` selects of ``value``; ``ANY`` for any other use."""
    if parent is None:
        return ANY
    if parent.kind == "select" and parent.target is value:
        return parent.name  # has(x.f) too: whether f is there is read
    if parent.kind == "call" and parent.name == "_[_]" and len(parent.args) == 2:
        first, second = parent.args
        if first is value and second.kind == "const" and second.text is not None:
            return second.text
    return ANY


def _output_fields(outputs: Node, parent: Node | None, grand: Node | None) -> set[str]:
    """Fields read of the output value that ``parent`` takes from ``outputs``."""
    if parent is None:
        return {ANY}
    if parent.kind == "select" and parent.target is outputs:
        return set() if parent.test_only else {_field(parent, grand)}  # has(outputs.x)
    if parent.kind == "call" and len(parent.args) == 2 and parent.args[1] is outputs:
        return set() if parent.name == _IN else {ANY}  # 'x' in outputs
    if _field(outputs, parent) != ANY:  # outputs['x']
        return {_field(parent, grand)}
    return {ANY}


def collect(root: Node) -> Refs:
    variables: set[str] = set()
    names: dict[str, set[str]] = {OUTPUTS: set(), RESOURCES: set()}
    fields: dict[str, set[str]] = {OUTPUTS: set(), SELF: set()}
    iterates = False
    size = 0

    def named(ident: Node, parent: Node | None) -> str:
        if parent is None:
            return ANY
        if parent.kind == "select" and parent.target is ident:
            return parent.name
        if parent.kind == "call" and len(parent.args) == 2:
            first, second = parent.args
            if parent.name in _INDEX and first is ident and second.text is not None:
                return second.text
            if parent.name == _IN and second is ident and first.text is not None:
                return first.text
        return ANY

    def visit(
        node: Node, bound: frozenset[str], parent: Node | None, grand: Node | None = None
    ) -> None:
        nonlocal iterates, size
        size += 1
        if node.kind == "ident":
            if node.name not in bound:
                variables.add(node.name)
                if node.name in names:
                    names[node.name].add(named(node, parent))
                if node.name == SELF:
                    fields[SELF].add(_field(node, parent))
                elif node.name == OUTPUTS:
                    fields[OUTPUTS].update(_output_fields(node, parent, grand))
            return
        if node.kind == "other":  # a node this walk cannot read may hold any use
            fields[OUTPUTS].add(ANY)
            fields[SELF].add(ANY)
        if node.kind == "call" and _expensive_call(node):
            iterates = True
        if node.kind == "comprehension":
            if not _element_local(node):
                iterates = True
            for child in node.outer:
                visit(child, bound, node, parent)
            loop = bound | set(node.binds)
            for child in node.inner:
                visit(child, loop, node, parent)
            if node.result is not None:
                visit(node.result, bound | {node.accu}, node, parent)
            return
        for child in node.children():
            visit(child, bound, node, parent)

    visit(root, frozenset(), None)
    return Refs(
        frozenset(variables),
        frozenset(names[OUTPUTS]),
        frozenset(names[RESOURCES]),
        iterates,
        size,
        frozenset(fields[OUTPUTS]),
        frozenset(fields[SELF]),
    )
