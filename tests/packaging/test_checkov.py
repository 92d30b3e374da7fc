"""checkov on what a platform team installs: no failed check beyond the listed exceptions.

Scanned: the chart rendered with default values and with ``topology: fleet``, deploy/ and
deploy/fleet/ as the pinned kubectl's kustomize builds them, and the Dockerfile. The accepted
findings live in tests/packaging/checkov-exceptions.yaml, each with its reason; an entry that
matches no failure any more is an error too, so the list only shrinks when things are fixed.

checkov pins many dependencies the project shares, so it runs from a venv of its own
(``make checkov``: .venv-checkov/, or ``$HTC_CHECKOV``), offline: no API key is passed, the
platform download, guideline mapping and update check are switched off, and where this runs as
root it runs in a network namespace of its own, with no interface but loopback.
"""

from __future__ import annotations

import fnmatch
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from controller.testbed import cluster
from controller.testbed.fixtures import unavailable
from tests.packaging.chart_kit import render
from tests.packaging.manifests import NAMESPACE, REPO

pytestmark = pytest.mark.cluster  # the pinned release's kubectl builds deploy/

EXCEPTIONS = Path(__file__).with_name("checkov-exceptions.yaml")
PINNED_NS = "htc-pinned"
DIGEST = "sha256:" + "0" * 64
# A pod checkov must flag: proof that the offline run still runs the Kubernetes checks.
CANARY = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "canary", "namespace": "canary"},
    "spec": {"containers": [{"name": "c", "image": "x:1.0.0",
                             "securityContext": {"privileged": True}}]},
}  # fmt: skip
OFFLINE_ENV = {
    "BC_SKIP_MAPPING": "TRUE",  # no guideline/severity mapping download
    "CKV_SKIP_PACKAGE_UPDATE_CHECK": "TRUE",  # no version check against the package index
    "LOG_LEVEL": "WARNING",
}


def checkov_binary() -> Path:
    given = os.environ.get("HTC_CHECKOV")
    found = Path(given) if given else REPO / ".venv-checkov" / "bin" / "checkov"
    if not found.exists():
        unavailable(f"checkov is not installed at {found}: run `make checkov`")
    return found


def kustomize(target: Path) -> str:
    reason = cluster.can_build()
    if reason:
        unavailable(reason)
    kubectl = cluster.build().parent / "kubectl"
    proc = subprocess.run([str(kubectl), "kustomize", str(target)],
                          capture_output=True, text=True, check=True)  # fmt: skip
    return proc.stdout


def inputs(into: Path) -> None:
    """Every manifest set and the Dockerfile, one file each, under ``into``."""
    pinned = {"topology": "fleet", "image": {"tag": f"1.0.0@{DIGEST}"},
              "fleet": {"image": {"tag": f"3.2.5@{DIGEST}"}}}  # fmt: skip
    renders: dict[str, tuple[dict[str, Any], str]] = {
        "chart-defaults": ({}, NAMESPACE),
        "chart-fleet": ({"topology": "fleet"}, NAMESPACE),
        "chart-pinned": (pinned, PINNED_NS),
    }
    for name, (values, namespace) in renders.items():
        docs = render(values, namespace=namespace, name="htc")
        (into / f"{name}.yaml").write_text(yaml.safe_dump_all(docs))
    (into / "deploy.yaml").write_text(kustomize(REPO / "deploy"))
    (into / "deploy-fleet.yaml").write_text(kustomize(REPO / "deploy" / "fleet"))
    (into / "canary.yaml").write_text(yaml.safe_dump(CANARY))
    shutil.copy(REPO / "Dockerfile", into / "Dockerfile")


def own_network_namespace_works() -> bool:
    """Root may still lack CAP_SYS_ADMIN (an unprivileged container): try before relying on it."""
    if os.geteuid() != 0 or not shutil.which("unshare"):
        return False
    return subprocess.run(["unshare", "--net", "true"], capture_output=True).returncode == 0


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    binary = checkov_binary()
    root = tmp_path_factory.mktemp("checkov")
    scan = root / "in"
    scan.mkdir()
    inputs(scan)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BC_", "PRISMA_", "CKV_"))}
    env |= OFFLINE_ENV | {"CKV_CACHE_DIR": str(root / "cache"), "HOME": str(root)}
    argv = [str(binary), "--directory", str(scan), "--framework", "kubernetes", "dockerfile",
            "--skip-download", "--skip-results-upload", "--output", "json"]  # fmt: skip
    if own_network_namespace_works():
        argv = ["unshare", "--net", *argv]
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=root, timeout=600)
    # Exit 1 means failed checks (judged below); anything else is checkov itself failing.
    assert proc.returncode in (0, 1), proc.stderr[-4000:]
    parsed = json.loads(proc.stdout)
    return {r["check_type"]: r for r in (parsed if isinstance(parsed, list) else [parsed])}


def exceptions() -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = yaml.safe_load(EXCEPTIONS.read_text())["exceptions"]
    return entries


def failures(reports: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        f
        for r in reports.values()
        for f in r["results"]["failed_checks"]
        if not f["file_path"].endswith("/canary.yaml")
    ]


def excused(failure: dict[str, Any], entry: dict[str, Any]) -> bool:
    return failure["check_id"] == entry["check"] and any(
        fnmatch.fnmatchcase(failure["resource"], pattern) for pattern in entry["resources"]
    )


def test_every_input_was_scanned_without_parse_errors(reports: dict[str, dict[str, Any]]) -> None:
    assert set(reports) == {"kubernetes", "dockerfile"}
    for report in reports.values():
        assert report["summary"]["parsing_errors"] == 0, report["results"].get("parsing_errors")
    scanned = {
        Path(c["file_path"]).name
        for r in reports.values()
        for kind in ("passed_checks", "failed_checks")
        for c in r["results"][kind]
    }
    assert scanned == {"chart-defaults.yaml", "chart-fleet.yaml", "chart-pinned.yaml",
                       "deploy.yaml", "deploy-fleet.yaml", "canary.yaml", "Dockerfile"}  # fmt: skip


def test_the_offline_run_still_flags_a_privileged_pod(reports: dict[str, dict[str, Any]]) -> None:
    flagged = {
        f["check_id"]
        for f in reports["kubernetes"]["results"]["failed_checks"]
        if f["file_path"].endswith("/canary.yaml")
    }
    assert "CKV_K8S_16" in flagged, flagged  # "Container should not be privileged"


def test_no_failed_check_beyond_the_listed_exceptions(reports: dict[str, dict[str, Any]]) -> None:
    unlisted = [
        f"{f['check_id']} {f['resource']} ({Path(f['file_path']).name}): {f['check_name']}"
        for f in failures(reports)
        if not any(excused(f, e) for e in exceptions())
    ]
    assert not unlisted, "\n".join(unlisted)


def test_every_exception_has_a_reason_and_is_still_needed(
    reports: dict[str, dict[str, Any]],
) -> None:
    failed = failures(reports)
    for entry in exceptions():
        assert set(entry) == {"check", "resources", "reason"}, entry
        assert len(entry["reason"].split()) >= 10, f"{entry['check']}: say why"
        assert any(excused(f, entry) for f in failed), f"{entry['check']} matches no failure"


def test_a_digest_in_the_tag_satisfies_the_digest_check(
    reports: dict[str, dict[str, Any]],
) -> None:
    """The digest exception holds for default values only: a digest given in the tag passes."""
    results = reports["kubernetes"]["results"]
    pinned = [
        (kind, c["resource"])
        for kind in ("passed_checks", "failed_checks")
        for c in results[kind]
        if c["check_id"] == "CKV_K8S_43" and f".{PINNED_NS}." in c["resource"]
    ]
    assert pinned and all(kind == "passed_checks" for kind, _ in pinned), pinned
    assert len(pinned) == 2, pinned  # the controller's Deployment and the HAProxy pods'
