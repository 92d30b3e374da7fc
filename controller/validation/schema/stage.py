"""The pipeline stage: every parsed configuration against one family schema.

It runs after the syntax stage (which fills ``ctx.parsed``) and before ``haproxy -c``: it
catches version mistakes (a keyword removed in, or not yet in, the target version), typos with
a suggestion, and out-of-range values with a location in the rendered file *and* the template,
which ``haproxy -c`` output cannot give as precisely. The work is synchronous and cheap thanks
to the engine's per-section cache, so it runs inline on the event loop.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from controller.diagnostics import Diagnostic, Phase, make
from controller.validation.schema.engine import SchemaEngine, Stats
from controller.validation.schema.versions import resolve_family
from controller.validation.stage import Stage, StageContext, StageOutcome


class SchemaStage(Stage):
    """``Stage`` for phase ``schema``.

    ``family`` is a family name (``"2.8"``) or a full HAProxy version (``"2.8.25"``); a version
    without its own family is judged by the nearest older one, with a ``W3010`` warning on
    every run. Raises :class:`~controller.validation.schema.overlay.SchemaOverlayError` for a
    bad overlay and :class:`~controller.validation.schema.versions.UnsupportedVersionError`
    for a version older than 2.6; both carry a ``diagnostic``.
    """

    phase = Phase.SCHEMA

    def __init__(self, family: str, overlays: Sequence[Mapping[str, Any]] = ()) -> None:
        self.family, self._fallback = resolve_family(family)
        self.engine = SchemaEngine(self.family, overlays)

    @property
    def stats(self) -> Stats:
        return self.engine.stats

    @property
    def removed_requirements(self) -> list[str]:
        """Requirements the overlays dropped (each was also logged at construction)."""
        result = self.engine.overlay_result
        return list(result.removed_requirements) if result else []

    def fingerprint(self) -> str:
        return self.engine.fingerprint

    def warm_up(self) -> None:
        """Compile every validator now (see :meth:`SchemaEngine.warm_up`); the pipeline's
        :meth:`~controller.validation.pipeline.Pipeline.warm_up` calls it."""
        self.engine.warm_up()

    async def run(self, ctx: StageContext) -> StageOutcome:
        diagnostics: list[Diagnostic] = []
        if self._fallback is not None:
            diagnostics.append(self._fallback)
        if ctx.haproxy_version:
            try:
                binary_family, _ = resolve_family(ctx.haproxy_version)
            except ValueError:
                binary_family = None
            if binary_family is not None and binary_family != self.family:
                diagnostics.append(
                    make(
                        "W3010",
                        Phase.SCHEMA,
                        f"validating with the HAProxy {self.family} schema, but the haproxy "
                        f"binary is {ctx.haproxy_version}",
                    )
                )
        source_map = ctx.render.source_map
        for path, parsed in ctx.parsed.items():
            try:
                diagnostics.extend(self.engine.diagnostics(parsed, path, source_map))
            except Exception as exc:  # a bug here must not take the pipeline down
                diagnostics.append(
                    make(
                        "F0001",
                        Phase.SCHEMA,
                        f"schema stage failed on {path}: {type(exc).__name__}: {exc}",
                    )
                )
        return StageOutcome(diagnostics=diagnostics)
