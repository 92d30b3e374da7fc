"""Validators of type ``http``: the file set POSTed as JSON to a URL the operator configured.

2xx passes, 4xx rejects (the service judged the candidate), anything else — 5xx, a redirect,
a refused connection, a TLS failure — means the validator itself failed. The body, when there
is one, follows the same diagnostics contract as a command's stdout.
"""

from __future__ import annotations

import asyncio
import ssl

import aiohttp

from controller.render import FileSet
from controller.spec import ExternalValidator
from controller.validation.external.contract import ContractError, parse_answer, payload
from controller.validation.external.outcome import RunOutcome, Verdict
from controller.validation.redact import Redactor

__all__ = ["run_http"]

MAX_BODY = 1 << 20
_TAIL = 300


async def run_http(validator: ExternalValidator, files: FileSet) -> RunOutcome:
    assert validator.url is not None  # the model guarantees it for type http
    tls: ssl.SSLContext | bool = True
    if validator.ca_bundle:
        try:
            tls = ssl.create_default_context(cafile=validator.ca_bundle)
        except (OSError, ssl.SSLError) as exc:
            return RunOutcome(Verdict.FAILURE, f"CA bundle {validator.ca_bundle!r}: {exc}")
    redact = Redactor(None, files)
    timeout = aiohttp.ClientTimeout(total=validator.timeout)
    try:
        async with (
            aiohttp.ClientSession(timeout=timeout, trust_env=False) as session,
            session.post(
                validator.url,
                data=payload(files),
                headers={"Content-Type": "application/json"},
                ssl=tls,
                allow_redirects=False,
            ) as resp,
        ):
            status = resp.status
            body = await resp.content.read(MAX_BODY + 1)
    except TimeoutError:
        return RunOutcome(Verdict.TIMEOUT)
    except (aiohttp.ClientError, OSError, ssl.SSLError, asyncio.IncompleteReadError) as exc:
        return RunOutcome(Verdict.FAILURE, redact(f"{type(exc).__name__}: {exc}")[:_TAIL])
    if len(body) > MAX_BODY:
        return RunOutcome(Verdict.FAILURE, f"HTTP {status}: answer larger than {MAX_BODY} bytes")
    text = body.decode("utf-8", "replace")
    if 200 <= status < 300:
        out = RunOutcome(Verdict.PASS, f"HTTP {status}")
    elif 400 <= status < 500:
        out = RunOutcome(Verdict.REJECT, f"HTTP {status}")
    else:
        return RunOutcome(Verdict.FAILURE, f"HTTP {status}: {redact(text.strip()[:_TAIL])}")
    try:
        answer = parse_answer(text)
        out.findings, out.dropped = answer.findings, answer.dropped
    except ContractError as exc:
        if out.verdict is Verdict.PASS:
            out.garbage = str(exc)
        else:
            # A rejection's body may be a plain error page; the status already decided.
            out.detail += f": {redact(text.strip()[:_TAIL])}"
    return out
