"""Compile one CEL source and find out what it reads — the basis of inline vs deferred.

Two independent answers are combined, and the more conservative one wins:

1. **The checker's proof.** The expression is compiled once more in each probe environment
   that lacks one of ``outputs``, ``resources``, ``extraContext``. It compiled in the full
   environment, so a failure there can only be an undeclared reference: the expression reads
   that variable. Comprehension variables are local to the expression and never need a
   declaration, so ``[1].all(outputs, outputs > 0)`` compiles without ``outputs`` — correctly
   not a reference. ``has(outputs.x)`` fails without ``outputs`` — correctly a reference.
2. **The syntax tree** (``checked.py`` + ``refs.py``) adds what the checker cannot say: the
   constant names after ``outputs`` and ``resources``, and whether the expression loops.

If the tree says a variable is read but names no constant target, or cannot be decoded at
all, the target is :data:`ANY` (every output / every collection). A rule can therefore be
classified deferred when it need not be, never inline when it reads anything but ``self``.
"""

from __future__ import annotations

from dataclasses import dataclass

from controller.validation.rules.cel import (
    Program,
    compile_expression,
    compiles_in,
    probe_env,
)
from controller.validation.rules.checked import DecodeError, decode_checked
from controller.validation.rules.refs import ANY, EXTRA, OUTPUTS, RESOURCES, Refs, collect

__all__ = ["Analysis", "analyse"]

_NON_SELF = (OUTPUTS, RESOURCES, EXTRA)
_UNKNOWN_SIZE = 1_000_000


@dataclass(frozen=True)
class Analysis:
    program: Program
    refs: Refs
    decoded: bool
    """False when the syntax tree could not be read (names then default to ANY)."""

    @property
    def self_only(self) -> bool:
        return not (self.refs.variables & set(_NON_SELF))


def analyse(source: str) -> Analysis:
    """Compile ``source`` and classify it. Raises ``CompileError``."""
    program = compile_expression(source)
    try:
        tree: Refs | None = collect(decode_checked(program.expression.serialize()))
    except (DecodeError, IndexError, ValueError):
        tree = None
    proven = {v for v in _NON_SELF if not compiles_in(source, probe_env(v))}
    if tree is None:
        refs = Refs(
            variables=frozenset(proven),
            outputs=frozenset({ANY}) if OUTPUTS in proven else frozenset(),
            collections=frozenset({ANY}) if RESOURCES in proven else frozenset(),
            iterates=True,
            size=_UNKNOWN_SIZE,
            output_fields=frozenset({ANY}),
            self_fields=frozenset({ANY}),
        )
        return Analysis(program, refs, decoded=False)
    variables = tree.variables | proven
    outputs, collections = tree.outputs, tree.collections
    if OUTPUTS in variables and not outputs:
        outputs = frozenset({ANY})
    if RESOURCES in variables and not collections:
        collections = frozenset({ANY})
    output_fields = tree.output_fields
    if OUTPUTS in variables and not output_fields:
        output_fields = frozenset({ANY})
    refs = Refs(
        variables,
        outputs,
        collections,
        tree.iterates,
        tree.size,
        output_fields,
        tree.self_fields,
    )
    return Analysis(program, refs, decoded=True)
