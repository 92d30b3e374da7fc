"""Validators of type ``command``: a program run in the same sandbox as ``haproxy -c``.

The program gets the file-set directory (with ``manifest.json``) as its last argument and an
empty environment. Exit 0 passes, exit 1 rejects, anything else — another status, a signal,
a program that cannot start — means the validator itself failed. A Python traceback exits
with 1, so a validator that must distinguish "invalid" from "broken" should exit with 2+
when it breaks, as linters commonly do.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import replace

from controller.render import FileSet
from controller.spec import ExternalValidator
from controller.validation.external.contract import ContractError, manifest, parse_answer
from controller.validation.external.outcome import RunOutcome, Verdict
from controller.validation.redact import Redactor
from controller.validation.sandbox import (
    SANDBOX_DIR,
    Limits,
    SandboxError,
    SandboxPolicy,
    run_sandboxed,
)

__all__ = ["VALIDATOR_POLICY", "run_command"]

MANIFEST = "manifest.json"

VALIDATOR_POLICY = SandboxPolicy(
    limits=Limits(address_space=2 << 30, processes=128, file_size=64 << 20),
    exec_system=True,
)
"""Validators are programs of the operator's choosing, often interpreters that run tools: they
may execute system programs and get more memory, but see no more files than haproxy does."""

_TAIL = 400


def _resolve(program: str) -> str | None:
    if os.path.isabs(program):
        return program if os.access(program, os.X_OK) else None
    found = shutil.which(program)
    return os.path.abspath(found) if found else None


async def run_command(
    validator: ExternalValidator, files: FileSet, base: SandboxPolicy | None = None
) -> RunOutcome:
    program = _resolve(validator.command[0])
    if program is None:
        return RunOutcome(Verdict.FAILURE, f"command {validator.command[0]!r} not found")
    args = list(validator.command[1:])
    # Absolute arguments that exist (a script, a rules file) must be readable inside.
    readable = tuple(a for a in args if os.path.isabs(a) and os.path.exists(a))
    pol = base or VALIDATOR_POLICY
    pol = replace(pol, read_paths=pol.read_paths + readable)
    try:
        res = await run_sandboxed(
            [program, *args, SANDBOX_DIR],
            files,
            timeout=validator.timeout,
            policy=pol,
            extra_files={MANIFEST: manifest(files)},
        )
    except SandboxError as exc:
        return RunOutcome(Verdict.FAILURE, str(exc))
    redact = Redactor(res.workdir_name, files)
    if res.timed_out:
        return RunOutcome(Verdict.TIMEOUT, workdir=res.workdir_name)
    if res.returncode not in (0, 1):
        how = f"killed by signal {res.signal}" if res.signal else f"exit status {res.returncode}"
        tail = redact(res.stderr.strip()[-_TAIL:])
        return RunOutcome(
            Verdict.FAILURE, f"{how}: {tail}" if tail else how, workdir=res.workdir_name
        )
    verdict = Verdict.PASS if res.returncode == 0 else Verdict.REJECT
    out = RunOutcome(verdict, f"exit status {res.returncode}", workdir=res.workdir_name)
    try:
        answer = parse_answer(res.stdout)
        out.findings, out.dropped = answer.findings, answer.dropped
    except ContractError as exc:
        out.garbage = str(exc)
    if verdict is Verdict.REJECT and not out.findings:
        tail = redact(res.stderr.strip()[-_TAIL:])
        if tail:
            out.detail += f": {tail}"
    return out
