"""Valid and invalid uses of each action, converter, fetch family, bind and server option, and
the section shapes users write (tests/corpus/uses), against each real binary and our pipeline.

Every case is one line in a fixed frame (see ``uses_kit``). Per binary:

* the corpus is right about the binary: a ``+`` case loads, a ``-`` case is refused;
* the pipeline as ``htc validate --raw`` runs it (syntax, schema, sandboxed ``haproxy -c``,
  the directive policy allowing everything: the corpus is about the language) agrees: no case
  the binary loads is invalid for us (no false positive), none it refuses is valid (no false
  negative);
* how many refused cases our own stages already catch before ``haproxy -c`` is printed.
"""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest

from controller.diagnostics import Phase
from controller.render import RenderResult
from controller.spec.models import ValidationSettings
from controller.validation import Pipeline
from controller.validation.syntax import ALLOW_NAMES
from tests.validation.syntax.syntax_kit import binary_version, fileset, run_haproxy
from tests.validation.syntax.uses_kit import Use, coverage, load_uses

pytestmark = pytest.mark.haproxy

USES = load_uses()
_STATIC = {Phase.SYNTAX, Phase.SCHEMA}


def test_every_keyword_has_a_valid_and_an_invalid_use() -> None:
    lacking = []
    for family, counts in coverage(USES).items():
        keys = {k.rsplit(" ", 1)[0] for k in counts}
        for key in keys:
            if not counts[f"{key} valid"] or not counts[f"{key} invalid"]:
                lacking.append(f"{family}: {key}")
    assert not lacking, "\n".join(sorted(lacking))
    assert len(USES) >= 400


async def _judge(binary: str, uses: list[Use]) -> list[tuple[Use, bool, bool, bool, list[str]]]:
    settings = ValidationSettings.model_validate(
        {"policy": {"allowDirectives": sorted(ALLOW_NAMES)}}
    )
    pipeline = Pipeline.from_settings(settings, haproxy_binary=binary, cache=None)
    gate = asyncio.Semaphore(3)

    async def one(use: Use) -> tuple[Use, bool, bool, bool, list[str]]:
        async with gate:
            config = use.config()
            verdict = await asyncio.to_thread(run_haproxy, binary, config)
            report = await pipeline.validate(RenderResult(fileset(config)))
        errors = [f"{d.rule_id} {d.message}" for d in report.errors]
        static = any(d.phase in _STATIC for d in report.errors)
        return use, verdict.accepted, report.valid, static, errors

    return list(await asyncio.gather(*(one(u) for u in USES)))


@pytest.mark.slow  # ~700 cases, each checked by the binary and the pipeline: ~4 min per binary on the loaded shared machine
def test_uses_agree_with_the_binary(haproxy_bin: str) -> None:
    family = ".".join(binary_version(haproxy_bin).split(".")[:2])
    problems: list[str] = []
    tally: Counter[str] = Counter()
    for use, accepted, valid, static, errors in asyncio.run(_judge(haproxy_bin, USES)):
        expected = family in use.accept
        if accepted != expected:
            problems.append(
                f"CORPUS {use.name} {use.text!r}: haproxy {family} "
                f"{'accepts' if accepted else 'refuses'} it"
            )
        if accepted and not valid:
            problems.append(f"FALSE POSITIVE {use.name} {use.text!r}: {errors[:2]}")
        if not accepted and valid:
            problems.append(f"FALSE NEGATIVE {use.name} {use.text!r}")
        tally["accepted" if accepted else "refused"] += 1
        tally["agree"] += accepted == valid
        tally["refused, caught before haproxy -c"] += (not accepted) and static
    print(f"\nhaproxy {family}: {len(USES)} cases, {dict(tally)}")
    assert not problems, "\n".join(problems)
