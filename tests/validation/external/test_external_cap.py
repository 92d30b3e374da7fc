"""Findings over the contract's cap are counted and reported, never silently cut."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from controller.render import FileEntry, FileKind, FileSet, RenderResult
from controller.spec.models import ExternalValidator
from controller.validation.external import ExternalStage
from controller.validation.external.contract import MAX_FINDINGS, parse_answer
from controller.validation.stage import StageContext

FLOOD = Path(__file__).resolve().parent / "validators" / "flood.py"


def _doc(n: int) -> str:
    items = ",".join(f'{{"severity": "info", "message": "m{i}"}}' for i in range(n))
    return f'{{"diagnostics": [{items}]}}'


@pytest.mark.parametrize(("n", "dropped"), [(0, 0), (MAX_FINDINGS, 0), (MAX_FINDINGS + 7, 7)])
def test_answer_counts_what_it_did_not_read(n: int, dropped: int) -> None:
    answer = parse_answer(_doc(n))
    assert len(answer.findings) == min(n, MAX_FINDINGS) and answer.dropped == dropped


async def test_a_flood_ends_with_one_note_saying_how_many_were_dropped() -> None:
    validator = ExternalValidator.model_validate(
        {
            "name": "flood",
            "type": "command",
            "command": [sys.executable, "-I", str(FLOOD), str(MAX_FINDINGS + 250)],
        }
    )
    files = FileSet.of([FileEntry("haproxy.cfg", FileKind.CONFIG, b"global\n")])
    out = await ExternalStage([validator]).run(StageContext(render=RenderResult(files=files)))
    ids = [d.rule_id for d in out.diagnostics]
    assert ids.count("W6003") == MAX_FINDINGS
    [note] = [d for d in out.diagnostics if d.rule_id == "I6009"]
    assert "250 were dropped" in note.message and f"{MAX_FINDINGS + 250} findings" in note.message
    assert ids[-1] == "I6009"
