"""The whole pipeline (syntax, schema, sandboxed ``haproxy -c``) over tests/corpus, per binary.

The syntax-stage differential (tests/validation/syntax/test_syntax_corpus.py) proves the
parser and the file references; this one proves what a user of ``htc validate --raw`` sees:
every configuration the binary accepts is valid for us too (the directive policy switched to
allow everything, as the corpus is about the language, not the policy), except the few marked
``# ours: reject`` with their reason; and every configuration the binary refuses is invalid for
us. Schema findings on an accepted configuration may be warnings, never errors.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from controller.render import RenderResult
from controller.spec.models import ValidationSettings
from controller.validation import Pipeline
from controller.validation.syntax import ALLOW_NAMES
from tests.validation.syntax.syntax_kit import Case, binary_version, fileset, load_cases

CASES = load_cases()
#: Accepted by the binary in a writable directory, refused in the sandbox on purpose.
SANDBOX_REFUSES = {
    "27-ring-backing-file.cfg": "the sandbox is read-only: a ring's backing file cannot be "
    "created there (docs/security.md), and the policy denies backing-file anyway",
}


def _pipeline(binary: str) -> Pipeline:
    settings = ValidationSettings.model_validate(
        {"policy": {"allowDirectives": sorted(ALLOW_NAMES)}}
    )
    return Pipeline.from_settings(settings, haproxy_binary=binary, cache=None)


async def _verdicts(binary: str, cases: list[Case]) -> list[tuple[Case, bool, list[str]]]:
    pipeline = _pipeline(binary)
    out: list[tuple[Case, bool, list[str]]] = []
    for case in cases:
        report = await pipeline.validate(RenderResult(fileset(case.content)))
        errors = [f"{d.rule_id} {d.message}" for d in report.errors]
        out.append((case, report.valid, errors))
    return out


def test_pipeline_agrees_with_the_binary(haproxy_bin: str) -> None:
    family = ".".join(binary_version(haproxy_bin).split(".")[:2])
    problems: list[str] = []
    for case, valid, errors in asyncio.run(_verdicts(haproxy_bin, CASES)):
        name = Path(case.path).name
        expected = case.ours_reject or name in SANDBOX_REFUSES
        if case.accepted_by(family) and not valid and not expected:
            problems.append(f"FALSE POSITIVE {name}: {errors[:3]}")
        if not case.accepted_by(family) and valid:
            problems.append(f"FALSE NEGATIVE {name}")
    assert not problems, "\n".join(problems)
    assert len(CASES) >= 45
