"""Binary detection: real binaries, a fake one to prove the cache notices a replaced file."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from controller.validation.haproxy import HaproxyBinary, HaproxyBinaryError


def test_default_is_debian_haproxy_on_path() -> None:
    b = HaproxyBinary.detect()
    assert b.family == "2.6"
    assert b.path == shutil.which("haproxy")


def test_real_binaries_report_version_and_build_features(
    haproxy_bin: str, request: pytest.FixtureRequest
) -> None:
    family = request.node.callspec.params["haproxy_bin"]
    b = HaproxyBinary.detect(haproxy_bin)
    assert b.family == family and b.path == haproxy_bin
    assert b.version.startswith(family + ".") and b.version.count(".") == 2
    assert b.build.startswith(b.version)
    assert b.has_lua and b.lua_version and b.lua_version.startswith("Lua 5.")
    assert b.has_openssl and b.openssl_version and "OpenSSL 3" in b.openssl_version
    assert b.fingerprint() == f"{b.path}@{b.build}"


def _fake(path: Path, version: str) -> None:
    path.write_text(
        "#!/bin/sh\n"
        f'echo "HAProxy version {version} 2026/01/01 - https://haproxy.org/"\n'
        'echo "Feature list : +EPOLL -LUA +OPENSSL"\n'
    )
    path.chmod(0o755)


def test_cache_is_keyed_by_file_identity(tmp_path: Path) -> None:
    fake = tmp_path / "haproxy"
    _fake(fake, "3.2.1-abc")
    first = HaproxyBinary.detect(str(fake))
    assert (first.version, first.family, first.build) == ("3.2.1", "3.2", "3.2.1-abc")
    assert first.features == {"EPOLL", "OPENSSL"} and not first.has_lua
    assert HaproxyBinary.detect(str(fake)) is first
    _fake(fake, "3.3.0-longer-build")  # replaced on disk: new size and mtime
    st = fake.stat()
    os.utime(fake, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    second = HaproxyBinary.detect(str(fake))
    assert second.version == "3.3.0"


@pytest.mark.parametrize(
    ("script", "needle"),
    [
        ("#!/bin/sh\necho hello\n", "not a working haproxy"),
        ("#!/bin/sh\necho 'HAProxy version 2.8.1' ; exit 3\n", "exit 3"),
        (None, "not accessible"),
    ],
)
def test_broken_binaries_are_diagnostics(tmp_path: Path, script: str | None, needle: str) -> None:
    path = tmp_path / "haproxy"
    if script is not None:
        path.write_text(script)
        path.chmod(0o755)
    with pytest.raises(HaproxyBinaryError) as info:
        HaproxyBinary.detect(str(path))
    d = info.value.diagnostic
    assert d.rule_id == "E4011" and needle in d.message


def test_not_executable_is_a_diagnostic(tmp_path: Path) -> None:
    path = tmp_path / "haproxy"
    path.write_text("#!/bin/sh\n")
    path.chmod(0o644)
    with pytest.raises(HaproxyBinaryError) as info:
        HaproxyBinary.detect(str(path))
    assert "cannot be executed" in info.value.diagnostic.message
