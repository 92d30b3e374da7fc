"""The deadline of an in-process rule evaluation, for the native functions that can run long.

A batch that runs in-process (a cheap one, see ``budget.py``) cannot be interrupted: the
runtime holds the interpreter for the whole evaluation. Its time is charged afterwards. That
is sound for work bounded by the expression's size times its input, but ``regex.extractAll``
has no such bound (finding every match can be quadratic in the text). So it looks at the
deadline between matches instead: each single match is found in linear time, and once the
deadline has passed the function stops, the deadline records that it tripped, and
:func:`budget.execute` reports the batch as out of time — never as a verdict.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

__all__ = ["Deadline", "RuleTimeout", "check", "within"]


class RuleTimeout(Exception):
    """Raised inside an evaluation whose deadline passed; the evaluation is void."""


@dataclass(slots=True)
class Deadline:
    at: float
    """``time.thread_time()`` value after which evaluation must stop (the budget is CPU
    time, and an in-process batch runs in the calling thread)."""
    tripped: bool = False
    """Set when a native function stopped because the deadline had passed."""


_CURRENT: ContextVar[Deadline | None] = ContextVar("htc_rule_deadline", default=None)


@contextmanager
def within(seconds: float) -> Iterator[Deadline]:
    """Evaluations in the block may use ``seconds`` of this thread's CPU time from now."""
    deadline = Deadline(at=time.thread_time() + max(seconds, 0.0))
    token = _CURRENT.set(deadline)
    try:
        yield deadline
    finally:
        _CURRENT.reset(token)


def check() -> None:
    """Raise :class:`RuleTimeout` once the current evaluation's deadline has passed (no-op
    outside :func:`within`: a forked worker is killed at its deadline instead)."""
    deadline = _CURRENT.get()
    if deadline is not None and (deadline.tripped or time.thread_time() > deadline.at):
        deadline.tripped = True
        raise RuleTimeout("the rule time budget ran out during regex.extractAll")
