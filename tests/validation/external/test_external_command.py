"""Command validators, run for real in the sandbox: pass, reject, crash, hang, garbage, ignore."""

from __future__ import annotations

import secrets
import sys
import time
from pathlib import Path

import pytest

from controller.diagnostics import Phase, TemplateLocation
from controller.render import FileEntry, FileKind, FileSet, RenderResult, SourceMap
from controller.spec.models import ExternalValidator
from controller.validation.external import ExternalStage
from controller.validation.stage import StageContext, StageOutcome

HERE = Path(__file__).resolve().parent / "validators"
CONFIG = b"global\n    maxconn 10\nbackend be\n    server s1 127.0.0.1:80\n"


def _ctx() -> StageContext:
    files = FileSet.of(
        [
            FileEntry("haproxy.cfg", FileKind.CONFIG, CONFIG),
            FileEntry("maps/hosts.map", FileKind.MAP, b"example.com be\n"),
        ]
    )
    locs = tuple(TemplateLocation(template="main.j2", line=i * 10) for i in range(1, 5))
    return StageContext(
        render=RenderResult(files=files, source_map=SourceMap({"haproxy.cfg": locs}))
    )


def _validator(script: str, **kw: object) -> ExternalValidator:
    return ExternalValidator.model_validate(
        {
            "name": script.removesuffix(".py"),
            "type": "command",
            "command": [sys.executable, "-I", str(HERE / script)],
            **kw,
        }
    )


async def _run(*validators: ExternalValidator) -> StageOutcome:
    return await ExternalStage(validators).run(_ctx())


def _ids(out: StageOutcome) -> list[str]:
    return [d.rule_id for d in out.diagnostics]


async def test_pass_sees_files_manifest_and_an_empty_environment() -> None:
    out = await _run(_validator("check_manifest.py"))
    assert _ids(out) == ["I6004"]
    assert out.diagnostics[0].message == "[check_manifest] checked 2 files"
    assert out.diagnostics[0].phase is Phase.EXTERNAL


async def test_reject_with_json_findings_maps_locations_and_hides_the_sandbox() -> None:
    out = await _run(_validator("reject.py"))
    assert _ids(out) == ["E6002", "W6003"]
    err = out.diagnostics[0]
    assert err.message.startswith("[reject/ACME-12] backend without health check in haproxy.cfg")
    assert err.location is not None and (err.location.file, err.location.line) == ("haproxy.cfg", 3)
    assert err.template_location == TemplateLocation(template="main.j2", line=30)
    assert "htc-sandbox" not in err.model_dump_json()


async def test_exit_status_alone_rejects() -> None:
    out = await _run(_validator("reject_quietly.py"))
    assert _ids(out) == ["E6001"]
    assert "no TLS on frontend fe" in out.diagnostics[0].message


async def test_crash_is_an_error_and_ignore_makes_it_a_warning() -> None:
    out = await _run(_validator("crash.py"))
    assert _ids(out) == ["E6005"]
    assert "signal 11" in out.diagnostics[0].message
    ignored = await _run(_validator("crash.py", failurePolicy="ignore"))
    assert _ids(ignored) == ["W6008"]
    assert not ignored.cacheable  # let pass, but not remembered
    assert (await _run(_validator("check_manifest.py"))).cacheable


async def test_hang_is_killed_at_the_timeout() -> None:
    started = time.monotonic()
    out = await _run(_validator("hang.py", timeout="500ms"))
    assert time.monotonic() - started < 1.5
    assert _ids(out) == ["E6006"]
    ignored = await _run(_validator("hang.py", timeout="300ms", failurePolicy="ignore"))
    assert _ids(ignored) == ["W6008"]


async def test_garbage_output_is_an_error() -> None:
    out = await _run(_validator("garbage.py"))
    assert _ids(out) == ["E6007"]
    assert "not JSON" in out.diagnostics[0].message
    ignored = await _run(_validator("garbage.py", failurePolicy="ignore"))
    assert _ids(ignored) == ["W6008"]


async def test_ignore_never_softens_a_rejection() -> None:
    out = await _run(_validator("reject.py", failurePolicy="ignore"))
    assert "E6002" in _ids(out)


async def test_missing_program_is_a_failure() -> None:
    v = ExternalValidator(name="nope", type="command", command=[f"no-such-{secrets.token_hex(4)}"])
    out = await _run(v)
    assert _ids(out) == ["E6005"] and "not found" in out.diagnostics[0].message


async def test_validators_run_concurrently_and_report_in_order() -> None:
    started = time.monotonic()
    out = await _run(_validator("hang.py", timeout="400ms"), _validator("reject_quietly.py"))
    assert time.monotonic() - started < 1.2
    assert _ids(out) == ["E6006", "E6001"]


def test_names_must_be_unique() -> None:
    with pytest.raises(ValueError, match="unique"):
        ExternalStage([_validator("crash.py"), _validator("crash.py")])


def test_fingerprint_follows_the_configuration() -> None:
    a = ExternalStage([_validator("crash.py")]).fingerprint()
    b = ExternalStage([_validator("crash.py", timeout="3s")]).fingerprint()
    assert a != b and a == ExternalStage([_validator("crash.py")]).fingerprint()
