"""Credentials a configuration spells inline never reach a report, whoever repeats them."""

from __future__ import annotations

import sys
from pathlib import Path

from controller.render import FileEntry, FileKind, FileSet, RenderResult, SourceMap
from controller.spec.models import ExternalValidator
from controller.validation.external import ExternalStage
from controller.validation.redact import REDACTED, Redactor
from controller.validation.stage import StageContext

CONFIG = """\
userlist admins
    user alice insecure-password s3cretpw groups ops
    user bob password $6$abcdefgh$0123456789abcdefghijklmnop
frontend fe
    stats auth admin:hunter22
    http-request set-header Authorization "Basic dXNlcjpwYXNzd29yZA=="
backend be
    http-check send meth GET uri / hdr Authorization Bearer.eyJhbGciOi
    server s1 127.0.0.1:80
"""
SECRETS = [
    "s3cretpw",
    "$6$abcdefgh$0123456789abcdefghijklmnop",
    "hunter22",
    "dXNlcjpwYXNzd29yZA==",
    "Bearer.eyJhbGciOi",
]
FILES = FileSet.of([FileEntry("haproxy.cfg", FileKind.CONFIG, CONFIG.encode())])


def test_inline_credentials_are_replaced_wherever_they_appear() -> None:
    redact = Redactor(None, FILES)
    echoed = redact(" | ".join(CONFIG.splitlines()))
    for secret in SECRETS:
        assert secret not in echoed
    assert echoed.count(REDACTED) == len(SECRETS)
    assert "user alice insecure-password" in echoed and "server s1 127.0.0.1:80" in echoed
    # Short values are left alone (they would garble words), and nothing else changes.
    tiny = FileSet.of([FileEntry("haproxy.cfg", FileKind.CONFIG, b"stats auth a:pw\n")])
    assert Redactor(None, tiny)("stats auth a:pw") == "stats auth a:pw"


async def test_a_validator_quoting_the_configuration_leaks_no_credential() -> None:
    script = Path(__file__).resolve().parents[1] / "external" / "validators" / "quote_lines.py"
    v = ExternalValidator(
        name="quoter", type="command", command=[sys.executable, "-I", str(script)]
    )
    ctx = StageContext(render=RenderResult(files=FILES, source_map=SourceMap({})))
    out = await ExternalStage([v]).run(ctx)
    messages = [d.message for d in out.diagnostics]
    assert any("insecure-password [redacted]" in m for m in messages), messages
    dumped = "".join(d.model_dump_json() for d in out.diagnostics)
    for secret in SECRETS:
        assert secret not in dumped
