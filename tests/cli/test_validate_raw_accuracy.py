"""`htc validate --raw` over configuration classes real users write, against both binaries.

Each class below is one that real HAProxy 2.6 and 2.8 accept and that we once refused. Every
test first asks the real binary (`haproxy -c` in a fresh directory laid out like the deploy
directory), then runs the whole command the way a user does, so a disagreement between the
two is visible in one place.
"""

from __future__ import annotations

import datetime
import json
import struct
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from controller.cli import main
from controller.cli.inputs import aux_kind, load_raw
from controller.render import FileKind

HEAD = """\
defaults
    mode http
    timeout connect 5s
    timeout client 30s
    timeout server 30s
frontend fe
    bind 127.0.0.1:18080
"""


def invoke(*args: str) -> Result:
    return CliRunner().invoke(main, ["validate", *args], catch_exceptions=False)


def haproxy_accepts(binary: str, root: Path) -> tuple[bool, str]:
    proc = subprocess.run(
        [binary, "-c", "-f", "haproxy.cfg", "-C", str(root)],
        cwd=root,
        env={},
        capture_output=True,
        text=True,
        timeout=20,
        check=False,
    )
    out = proc.stdout + proc.stderr
    return proc.returncode == 0, out


def report(tmp: Path, binary: str, *extra: str) -> tuple[int, dict[str, object]]:
    r = invoke("--raw", str(tmp / "haproxy.cfg"), "--haproxy", binary, "--format", "json", *extra)
    return r.exit_code, json.loads(r.stdout)


def rule_ids(doc: dict[str, object]) -> list[str]:
    diags = doc["diagnostics"]
    assert isinstance(diags, list)
    return [d["ruleId"] for d in diags]


# --- timers with trailing characters --------------------------------------------------------

TIMERS = (
    HEAD
    + """\
    default_backend be
backend be
    timeout queue 5sx
    default-server inter 1s[ fastinter 2sx
    server s1 10.0.0.1:80 check inter 1s[ fastinter 2sx downinter 3sq slowstart 10sz
"""
)


def test_timer_with_trailing_characters_is_a_warning(tmp_path: Path, haproxy_bin: str) -> None:
    (tmp_path / "haproxy.cfg").write_text(TIMERS)
    accepted, out = haproxy_accepts(haproxy_bin, tmp_path)
    assert accepted and "will be reported as an error in next versions" in out, out
    code, doc = report(tmp_path, haproxy_bin)
    assert code == 0, doc
    assert doc["valid"] is True
    ours = [d for d in doc["diagnostics"] if d["phase"] == "schema"]  # type: ignore[attr-defined]
    words = sorted(d["message"].split("timer value '")[1].split("'")[0] for d in ours)
    assert words == ["10sz", "1s[", "1s[", "2sx", "2sx", "3sq", "5sx"]
    assert {d["ruleId"] for d in ours} == {"W3017"}
    assert all(d["suggestedFix"].startswith("write '") for d in ours)


def test_timer_with_trailing_characters_after_digits_stays_an_error(
    tmp_path: Path, haproxy_bin: str
) -> None:
    (tmp_path / "haproxy.cfg").write_text(
        HEAD + "    default_backend be\nbackend be\n    server s1 10.0.0.1:80 inter 5x\n"
    )
    accepted, out = haproxy_accepts(haproxy_bin, tmp_path)
    assert not accepted and "unexpected character 'x'" in out
    code, doc = report(tmp_path, haproxy_bin)
    assert code == 1 and "E3004" in rule_ids(doc)


def test_a_family_that_refuses_trailing_characters_makes_them_errors() -> None:
    from controller.validation.parsed import Directive
    from controller.validation.schema.catalog import family
    from controller.validation.schema.normalize import normalize
    from controller.validation.syntax.parser import parse

    parsed, _ = parse("backend be\n    server s1 10.0.0.1:80 inter 1s[\n", "haproxy.cfg")
    d: Directive = parsed.sections[0].directives[0]
    fam = family("2.6")
    spec = fam.keywords["proxy"]["server"]
    table = fam.option_tables["server"]
    warn = normalize(d, spec, 1, None, table)
    error = normalize(d, spec, 1, None, table, timer_trailing_error=True)
    assert [i.rule_id for i in warn.issues] == ["W3017"]
    assert [i.rule_id for i in error.issues] == ["E3004"]
    assert warn.instance["options"]["inter"] == 1000  # loaded as 1s, as HAProxy does


# --- actions whose name carries the file ----------------------------------------------------

ACTIONS = (
    HEAD
    + """\
    http-request set-map(maps/hosts.map) %[src] %[req.hdr(host)]
    http-request add-acl(maps/blocked.acl) %[src]
    http-request del-acl(maps/blocked.acl) %[src]
    http-request del-map(maps/hosts.map) %[src] if { src 10.0.0.1 }
    http-response set-map(maps/hosts.map) %[src] %[res.hdr(x-served)]
    http-response add-acl(maps/blocked.acl) %[src]
    http-response del-acl(maps/blocked.acl) %[src] unless { src 10.0.0.2 }
    http-response del-map(maps/hosts.map) %[src]
    default_backend be
backend be
    server s1 10.0.0.1:80
"""
)
AFTER_RESPONSE = """\
    http-after-response set-map(maps/hosts.map) %[src] ok
    http-after-response del-acl(maps/blocked.acl) %[src]
    http-after-response del-map(maps/hosts.map) %[src]
"""


def _map_files(tmp: Path) -> None:
    (tmp / "maps").mkdir()
    (tmp / "maps" / "hosts.map").write_text("10.0.0.9 example.com\n")
    (tmp / "maps" / "blocked.acl").write_text("10.0.0.8\n")


def test_actions_naming_a_map_or_acl_file(tmp_path: Path, haproxy_bin: str) -> None:
    _map_files(tmp_path)
    (tmp_path / "haproxy.cfg").write_text(ACTIONS)
    accepted, out = haproxy_accepts(haproxy_bin, tmp_path)
    assert accepted, out
    code, doc = report(tmp_path, haproxy_bin, "--aux", str(tmp_path))
    assert code == 0 and rule_ids(doc) == [], doc


def test_after_response_map_actions_follow_the_version(tmp_path: Path, haproxy_bin: str) -> None:
    _map_files(tmp_path)
    cfg = ACTIONS.replace("    default_backend be\n", AFTER_RESPONSE + "    default_backend be\n")
    (tmp_path / "haproxy.cfg").write_text(cfg)
    accepted, out = haproxy_accepts(haproxy_bin, tmp_path)
    code, doc = report(tmp_path, haproxy_bin, "--aux", str(tmp_path))
    assert accepted == (code == 0), (out, doc)
    assert accepted == ("2.8" in doc["metadata"]["haproxyVersion"])  # type: ignore[index]
    schema = [d for d in doc["diagnostics"] if d["phase"] == "schema"]  # type: ignore[attr-defined]
    assert all(d["severity"] != "error" for d in schema), schema


@pytest.mark.parametrize(
    "line",
    [
        "http-request set-map(maps/hosts.map) %[src]",
        "http-request add-acl(maps/blocked.acl)",
        "http-request del-map(maps/hosts.map)",
    ],
)
def test_map_actions_missing_their_key_are_errors(
    tmp_path: Path, haproxy_bin: str, line: str
) -> None:
    _map_files(tmp_path)
    cfg = HEAD + f"    {line}\n    default_backend be\nbackend be\n    server s1 10.0.0.1:80\n"
    (tmp_path / "haproxy.cfg").write_text(cfg)
    accepted, out = haproxy_accepts(haproxy_bin, tmp_path)
    assert not accepted and "expects exactly" in out
    code, doc = report(tmp_path, haproxy_bin, "--aux", str(tmp_path))
    assert code == 1 and "E3005" in rule_ids(doc), doc


# --- multi-certificate bundles --------------------------------------------------------------


def _bundle(certs: Path, name: str) -> None:
    """``name.rsa`` and ``name.ecdsa`` (certificate only), each with its ``.key``, ``.issuer``
    and ``.ocsp`` siblings, signed by a throw-away CA (nothing secret lives in the repo)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec, rsa
    from cryptography.x509 import ocsp
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.UTC)
    day = datetime.timedelta(days=1)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "bundle test CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(1)
        .not_valid_before(now - day)
        .not_valid_after(now + 30 * day)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    keys: dict[str, rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey] = {
        ".rsa": rsa.generate_private_key(65537, 2048),
        ".ecdsa": ec.generate_private_key(ec.SECP256R1()),
    }
    for serial, (suffix, key) in enumerate(keys.items(), start=2):
        cert = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "example.com")]))
            .issuer_name(ca_name)
            .public_key(key.public_key())
            .serial_number(serial)
            .not_valid_before(now - day)
            .not_valid_after(now + 30 * day)
            .add_extension(
                x509.SubjectAlternativeName([x509.DNSName("example.com")]), critical=False
            )
            .sign(ca_key, hashes.SHA256())
        )
        base = certs / (name + suffix)
        base.write_bytes(cert.public_bytes(pem))
        Path(f"{base}.key").write_bytes(
            key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
        )
        Path(f"{base}.issuer").write_bytes(ca.public_bytes(pem))
        response = (
            ocsp.OCSPResponseBuilder()
            .add_response(
                cert=cert,
                issuer=ca,
                algorithm=hashes.SHA1(),
                cert_status=ocsp.OCSPCertStatus.GOOD,
                this_update=now - datetime.timedelta(hours=1),
                next_update=now + 3 * day,
                revocation_time=None,
                revocation_reason=None,
            )
            .responder_id(ocsp.OCSPResponderEncoding.HASH, ca)
            .sign(ca_key, hashes.SHA256())
        )
        Path(f"{base}.ocsp").write_bytes(response.public_bytes(serialization.Encoding.DER))


BUNDLE = """\
defaults
    mode http
    timeout connect 5s
    timeout client 30s
    timeout server 30s
frontend fe
    bind 127.0.0.1:18443 ssl crt certs/site.pem
    bind 127.0.0.1:18444 ssl crt-list certs/sites.list
    default_backend be
backend be
    server s1 10.0.0.1:80
"""


def test_multi_certificate_bundle_is_a_reference_into_the_file_set(
    tmp_path: Path, haproxy_bin: str
) -> None:
    certs = tmp_path / "certs"
    certs.mkdir()
    _bundle(certs, "site.pem")
    (certs / "sites.list").write_text("certs/site.pem [alpn h2,http/1.1] example.com\n")
    (tmp_path / "haproxy.cfg").write_text(BUNDLE)
    accepted, out = haproxy_accepts(haproxy_bin, tmp_path)
    assert accepted, out
    code, doc = report(tmp_path, haproxy_bin, "--aux", str(tmp_path))
    assert code == 0 and rule_ids(doc) == [], doc
    # and a bundle that is not there is still a missing file, for both sides
    (tmp_path / "haproxy.cfg").write_text(BUNDLE.replace("crt certs/site.pem", "crt certs/x.pem"))
    accepted, _ = haproxy_accepts(haproxy_bin, tmp_path)
    code, doc = report(tmp_path, haproxy_bin, "--aux", str(tmp_path))
    assert not accepted and code == 1 and "E2203" in rule_ids(doc)


def test_bundle_siblings_join_the_file_set_as_certificates(tmp_path: Path) -> None:
    certs = tmp_path / "certs"
    certs.mkdir()
    _bundle(certs, "site.pem")
    # .sctl is read by HAProxy too; its content is not checked here (see the test above)
    (certs / "site.pem.rsa.sctl").write_bytes(struct.pack(">H", 0))
    (tmp_path / "haproxy.cfg").write_text(BUNDLE)
    files = load_raw(tmp_path / "haproxy.cfg", tmp_path).files
    kinds = {e.path: e.kind for e in files}
    for suffix in ("", ".key", ".issuer", ".ocsp"):
        assert kinds[f"certs/site.pem.rsa{suffix}"] is FileKind.CERT
        assert kinds[f"certs/site.pem.ecdsa{suffix}"] is FileKind.CERT
    assert kinds["certs/site.pem.rsa.sctl"] is FileKind.CERT


# --- --aux takes every file, whatever the layout --------------------------------------------

ERRORS = (
    HEAD
    + """\
    errorfile 503 errors/503.http
    http-request return status 200 content-type text/plain file pages/ok.txt if { path /ok }
    http-request set-header x-geo %[src,map_ip(geo/geo.map,none)]
    default_backend be
backend be
    server s1 10.0.0.1:80
"""
)


def test_aux_takes_every_file_whatever_the_layout(tmp_path: Path, haproxy_bin: str) -> None:
    aux = tmp_path / "aux"
    for rel, text in {
        "errors/503.http": "HTTP/1.0 503 Service Unavailable\r\n\r\nbusy\n",
        "pages/ok.txt": "ok\n",
        "geo/geo.map": "10.0.0.0/8 private\n",
    }.items():
        (aux / rel).parent.mkdir(parents=True, exist_ok=True)
        (aux / rel).write_text(text)
    (aux / ".git").mkdir()
    (aux / ".git" / "HEAD").write_text("ref\n")  # hidden: skipped
    (aux / "haproxy.cfg").write_text(ERRORS)  # the config itself: not an aux file
    for rel in ("errors/503.http", "pages/ok.txt", "geo/geo.map"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_bytes((aux / rel).read_bytes())
    (tmp_path / "haproxy.cfg").write_text(ERRORS)
    accepted, out = haproxy_accepts(haproxy_bin, tmp_path)
    assert accepted, out
    r = invoke("--raw", str(aux / "haproxy.cfg"), "--aux", str(aux), "--haproxy", haproxy_bin)
    assert r.exit_code == 0, r.output
    files = load_raw(aux / "haproxy.cfg", aux).files
    assert sorted(files.files) == ["errors/503.http", "geo/geo.map", "haproxy.cfg", "pages/ok.txt"]
    assert files.files["geo/geo.map"].kind is FileKind.MAP


@pytest.mark.parametrize(
    ("path", "kind"),
    [
        ("maps/hosts.txt", FileKind.MAP),
        ("certs/readme.txt", FileKind.CERT),
        ("files/x.pem", FileKind.FILE),
        ("errors/503.http", FileKind.FILE),
        ("geo/geo.map", FileKind.MAP),
        ("tls/site.pem.ecdsa", FileKind.CERT),
        ("tls/site.pem.rsa.ocsp", FileKind.CERT),
        ("ca.crt", FileKind.CERT),
        ("lua/x.lua", FileKind.FILE),
    ],
)
def test_aux_kind_from_folder_then_extension(path: str, kind: FileKind) -> None:
    assert aux_kind(path) is kind


def test_aux_refuses_names_that_cannot_be_deployed(tmp_path: Path) -> None:
    (tmp_path / "bad dir").mkdir()
    (tmp_path / "bad dir" / "x.map").write_text("a b\n")
    cfg = tmp_path / "h.cfg"
    cfg.write_text(HEAD)
    r = invoke("--raw", str(cfg), "--aux", str(tmp_path))
    assert r.exit_code == 2 and "bad dir" in r.stderr and "E8002" in r.stderr
