"""Stage ``external``: the operator's own validators, on the complete file set.

Validators run concurrently (each command holds one sandbox slot, like ``haproxy -c``).
Their findings get our rule ids — the validator's own id goes into the message — so filters,
severity gates and SARIF treat them like every other finding. ``failurePolicy: ignore``
applies to validators that cannot judge (crash, timeout, garbage, unreachable); a validator
that judged the candidate invalid always fails it.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Sequence

from controller.diagnostics import Diagnostic, Location, Phase, RuleId, make
from controller.render import SourceMap
from controller.spec import ExternalValidator, FailurePolicy
from controller.validation.external.command import VALIDATOR_POLICY, run_command
from controller.validation.external.contract import MAX_FINDINGS, Finding
from controller.validation.external.outcome import RunOutcome, Verdict
from controller.validation.redact import Redactor
from controller.validation.sandbox import SandboxPolicy, isolation_for
from controller.validation.stage import Stage, StageContext, StageOutcome

__all__ = ["ExternalStage"]

IGNORED_FAILURE: RuleId = "W6008"
"""A validator that failed to give a verdict, let pass by ``failurePolicy: ignore``."""

_RULE_BY_SEVERITY: dict[str, RuleId] = {"error": "E6002", "warning": "W6003", "info": "I6004"}


class ExternalStage(Stage):
    phase = Phase.EXTERNAL

    def __init__(
        self, validators: Sequence[ExternalValidator], *, sandbox: SandboxPolicy | None = None
    ) -> None:
        names = [v.name for v in validators]
        if len(set(names)) != len(names):
            raise ValueError(f"external validator names must be unique: {names}")
        self.validators = tuple(validators)
        self.sandbox = sandbox

    def fingerprint(self) -> str:
        doc = [v.model_dump(mode="json", by_alias=True) for v in self.validators]
        text = json.dumps(doc, sort_keys=True)
        extra = self.sandbox.fingerprint() if self.sandbox else ""
        return hashlib.sha256((text + extra).encode()).hexdigest()[:16]

    def warm_up(self) -> None:
        """Probe the sandbox's isolation for command validators before the first candidate."""
        if any(v.type == "command" for v in self.validators):
            isolation_for(self.sandbox or VALIDATOR_POLICY)

    async def run(self, ctx: StageContext) -> StageOutcome:
        if not self.validators:
            return StageOutcome()
        outcomes = await asyncio.gather(*(self._one(v, ctx) for v in self.validators))
        diagnostics: list[Diagnostic] = []
        for validator, outcome in zip(self.validators, outcomes, strict=True):
            diagnostics += _diagnostics(validator, outcome, ctx)
        let_pass = any(d.rule_id == IGNORED_FAILURE for d in diagnostics)
        return StageOutcome(diagnostics, cacheable=not let_pass)

    async def _one(self, v: ExternalValidator, ctx: StageContext) -> RunOutcome:
        try:
            if v.type == "command":
                return await run_command(v, ctx.files, self.sandbox)
            # aiohttp (and the TLS context it makes on import, ~0.2 s) only for a pipeline
            # that has an http validator: `htc validate` without one must not pay for it.
            from controller.validation.external.http import run_http

            return await run_http(v, ctx.files)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a validator must never take the pipeline down
            return RunOutcome(Verdict.FAILURE, f"{type(exc).__name__}: {exc}"[:300])


def _diagnostics(v: ExternalValidator, out: RunOutcome, ctx: StageContext) -> list[Diagnostic]:
    redact = Redactor(out.workdir, ctx.files)
    ignore = v.failure_policy is FailurePolicy.IGNORE
    diags: list[Diagnostic] = []

    def failure(rule_id: RuleId, text: str) -> None:
        if ignore:
            text += " (failurePolicy ignore)"
            rule_id = IGNORED_FAILURE
        diags.append(make(rule_id, Phase.EXTERNAL, f"[{v.name}] {text}"))

    if out.verdict is Verdict.TIMEOUT:
        failure("E6006", f"did not answer within {v.timeout:g} s")
        return diags
    if out.verdict is Verdict.FAILURE:
        failure("E6005", f"failed to run: {out.detail}")
        return diags
    for f in out.findings:
        diags.append(_finding(v, f, out.verdict, redact, ctx.render.source_map))
    if out.dropped:
        diags.append(
            make(
                "I6009",
                Phase.EXTERNAL,
                f"[{v.name}] reported {len(out.findings) + out.dropped} findings; only the first "
                f"{MAX_FINDINGS} are read, {out.dropped} were dropped",
            )
        )
    if out.garbage is not None:
        failure("E6007", f"unreadable output: {out.garbage}")
    if out.verdict is Verdict.REJECT and not any(d.rule_id == "E6002" for d in diags):
        diags.append(
            make("E6001", Phase.EXTERNAL, f"[{v.name}] rejected the file set ({out.detail})")
        )
    return diags


def _finding(
    v: ExternalValidator, f: Finding, verdict: Verdict, redact: Redactor, source_map: SourceMap
) -> Diagnostic:
    severity = f.severity
    note = ""
    if severity == "error" and verdict is Verdict.PASS:
        # The exit status decides; an error on a passing run is reported, not enforced.
        severity, note = "warning", " (reported as error, but the validator passed)"
    label = f"{v.name}/{f.rule_id}" if f.rule_id else v.name
    location = None
    template = None
    if f.file:
        file = redact(f.file)
        file = file[2:] if file.startswith("./") else file
        location = Location(file=file, line=f.line, column=f.column)
        if f.line is not None:
            template = source_map.lookup(file, f.line)
    return make(
        _RULE_BY_SEVERITY[severity],
        Phase.EXTERNAL,
        f"[{label}] {redact(f.message)}{note}"[:2000],
        location=location,
        template_location=template,
    )
