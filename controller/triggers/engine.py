"""The engine service as the adapters use it: built, evaluated, and rejected specs published.

The service itself (building an engine from a spec and a binary, evaluating a store view into
a verdict) is :mod:`controller.validation.service`, one layer down, so that the commands and
the embedded test runner use the very same code; it is re-exported here for the adapters
(reconcile, ``htc local``, ``htc run``, admission, HTTP sources). What only adapters need
stays here:

* :func:`with_listen` sets ``extraContext.listen`` from ``--listen``;
* :func:`spec_rejection` is the event every adapter publishes for a spec it cannot use.
"""

from __future__ import annotations

from collections.abc import Sequence

from controller.diagnostics import Diagnostic, Phase, make
from controller.publish import Event, EventKind
from controller.spec import HAProxyTemplateConfigSpec
from controller.validation import (
    CheckerLike,
    Engine,
    EngineFactory,
    RendererLike,
    VerdictLike,
    default_engine,
    evaluate,
    failure_report,
    spec_lint,
    verdict,
)

__all__ = [
    "CheckerLike",
    "Engine",
    "EngineFactory",
    "RendererLike",
    "VerdictLike",
    "default_engine",
    "evaluate",
    "failure_report",
    "spec_lint",
    "spec_rejection",
    "verdict",
    "with_listen",
]


def with_listen(spec: HAProxyTemplateConfigSpec, listen: str | None) -> HAProxyTemplateConfigSpec:
    """``spec`` with ``extraContext.listen`` set (``--listen`` of ``htc local`` and ``htc run``)."""
    if listen is None:
        return spec
    return spec.model_copy(update={"extra_context": {**spec.extra_context, "listen": listen}})


def spec_rejection(
    diagnostics: Sequence[Diagnostic], *, running: bool, trigger: str = "config"
) -> Event:
    """The event for a spec that cannot be used (it does not parse, or it failed its check)."""
    state = (
        "the running configuration stays in place" if running else "no configuration is running yet"
    )
    head = make("E7010", Phase.SPEC, f"configuration change rejected; {state}")
    return Event(
        EventKind.SPEC_REJECTED, trigger, diagnostics=(head, *diagnostics), message=head.message
    )
