"""What a pipeline stage is: a named step that judges a candidate and says how it went.

Stages are async because ``haproxy -c`` and external validators are subprocesses or HTTP calls
and the admission webhook and the reconcile loop share one event loop; CPU-only stages simply
do their work synchronously inside ``run``.

:class:`Stage` declares everything the pipeline may ask of a stage: the two required members
(``fingerprint``, ``run``) and the optional hooks (``warm_up``, ``input_key``, ``gate``), whose
defaults do nothing — a stage subclasses it and overrides what it needs, the way httpx's
``BaseTransport`` leaves ``close`` to the transports that hold something.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from controller.diagnostics import Diagnostic, Phase
from controller.render import FileSet, RenderResult
from controller.validation.parsed import ParsedConfig
from controller.validation.report import BudgetExhaustion, RuleCounters


@dataclass
class StageContext:
    """Shared state of one pipeline run; earlier stages leave results for later ones."""

    render: RenderResult
    haproxy_version: str | None = None
    """Version of the haproxy binary (``2.8.25``), known before the first stage runs."""
    parsed: dict[str, ParsedConfig] = field(default_factory=dict)
    """Parsed HAProxy configurations by path, filled by the syntax stage."""
    cleared: frozenset[Phase] = frozenset()
    """Phases whose :meth:`Stage.gate` returned True for this candidate. The pipeline records
    a gate's answer here (a stage never writes it), so that the stage's :meth:`Stage.run`
    need not repeat the checks its gate already established (the syntax stage's policy and
    file-reference checks)."""
    lean_read: frozenset[str] = frozenset()
    """Configuration paths the syntax stage's gate cleared from its lean reading (a reading of
    only the lines its checks act on, not a full parse); the stage's own run checks these on
    its full parse too, which fills the checks' per-section caches."""

    @property
    def files(self) -> FileSet:
        return self.render.files


@dataclass
class StageOutcome:
    diagnostics: list[Diagnostic] = field(default_factory=list)
    budget: BudgetExhaustion | None = None
    """Set when the stage ran out of a budget: the analysis is incomplete, never a pass."""
    extra_timings: Mapping[str, float] = field(default_factory=dict)
    rules: RuleCounters | None = None
    """Deferred-rule accounting (the rules stage sets it); copied into report metadata."""
    cacheable: bool = True
    """False when the outcome lets a failure pass (an external validator that crashed, hung
    or answered garbage under ``failurePolicy: ignore``): such a verdict is not stored, so the
    next identical candidate gives the validator a fresh chance."""


class Stage(Protocol):
    """One step of the pipeline. Subclass it: the hooks below then have their defaults."""

    phase: Phase
    """Which phase the stage's diagnostics belong to; each appears once in a pipeline."""

    def fingerprint(self) -> str:
        """Everything about this stage's configuration that could change a verdict."""
        ...

    async def run(self, ctx: StageContext) -> StageOutcome:
        """Judge ``ctx.files``; problems are diagnostics in the outcome, never exceptions
        (an exception is still caught and reported as an internal error)."""
        ...

    def warm_up(self) -> None:
        """Pay per-process first-use costs now (compile validators, probe the sandbox);
        :meth:`Pipeline.warm_up <controller.validation.Pipeline.warm_up>` calls it once after
        the pipeline was built. A failure is logged and only means the first candidate pays."""
        return None

    def input_key(self, render: RenderResult) -> str | None:
        """A digest of whatever this stage judges besides the file set (the rules stage reads
        resources and ``extraContext``), folded into the verdict cache's key; None when the
        file set is all it reads. When a candidate's bytes are known but such a digest is
        new, only the stages with a digest run again: the others' outcomes on these bytes
        are reused, so a stage with a digest must judge from the render alone, not from
        what earlier stages left in the context."""
        return None

    def gate(self, ctx: StageContext) -> bool:
        """True when this stage has established, cheaply and before :meth:`run`, that its
        security checks will find nothing in ``ctx.files``: the pipeline may then start
        ``haproxy -c`` while :meth:`run` works, and lists the phase in ``ctx.cleared``.
        Anything but True (the default False, an exception) means "not established". Asked
        only of the stage right before the overlapping window."""
        return False
