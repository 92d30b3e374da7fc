"""Packaging files: deploy/ manifests, the Helm chart, the Dockerfile and its build context."""

from __future__ import annotations

import copy
import fnmatch
import functools
import re
import shutil
import subprocess
import tomllib
import zipfile
from pathlib import Path
from typing import Any

import pytest
import yaml

import controller
from controller.spec.crd import CRD_FILE

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
CHART = REPO / "charts" / "haproxy-template-controller"
NAMESPACE = "haproxy-template-controller"
SA = {"kind": "ServiceAccount", "name": "haproxy-template-controller", "namespace": NAMESPACE}
READ = {"get", "list", "watch"}


def deploy_docs() -> list[dict[str, Any]]:
    return copy.deepcopy(_deploy_docs())


@functools.cache
def _deploy_docs() -> list[dict[str, Any]]:
    kustomization = yaml.safe_load((DEPLOY / "kustomization.yaml").read_text())
    docs: list[dict[str, Any]] = []
    for resource in kustomization["resources"]:
        docs += [d for d in yaml.safe_load_all((DEPLOY / resource).read_text()) if d]
    return docs


def by_kind(kind: str) -> list[dict[str, Any]]:
    return [d for d in deploy_docs() if d["kind"] == kind]


# --- deploy/ -----------------------------------------------------------------------------


def test_kustomization_lists_existing_files_including_the_crd() -> None:
    kustomization = yaml.safe_load((DEPLOY / "kustomization.yaml").read_text())
    assert kustomization["namespace"] == NAMESPACE
    for resource in kustomization["resources"]:
        assert (DEPLOY / resource).is_file(), resource
    assert f"crds/{CRD_FILE}" in kustomization["resources"]
    kinds = {d["kind"] for d in deploy_docs()}
    # the cluster-side prerequisites; tests/packaging checks the workload objects
    assert kinds >= {
        "Namespace", "CustomResourceDefinition", "ServiceAccount", "ClusterRole",
        "ClusterRoleBinding", "Role", "RoleBinding",
    }  # fmt: skip


def test_manifests_are_valid_kubernetes_objects() -> None:
    kubernetes_validate = pytest.importorskip("kubernetes_validate")
    for doc in deploy_docs():
        kubernetes_validate.validate(doc, "1.30.0", strict=True)


def test_kustomize_builds_when_kubectl_is_present() -> None:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl is not installed")
    out = subprocess.run(
        [kubectl, "kustomize", str(DEPLOY)], capture_output=True, text=True, timeout=30, check=True
    ).stdout
    built = [d for d in yaml.safe_load_all(out) if d]
    assert len(built) == len(deploy_docs())
    for doc in built:
        assert doc["metadata"]["labels"]["app.kubernetes.io/name"] == "haproxy-template-controller"
        if doc["kind"] in ("ServiceAccount", "Role", "RoleBinding"):
            assert doc["metadata"]["namespace"] == NAMESPACE


def effective_cluster_rules() -> list[dict[str, Any]]:
    """The bound ClusterRole's rules after the API server's aggregation."""
    [binding] = by_kind("ClusterRoleBinding")
    assert binding["subjects"] == [SA]
    roles = {r["metadata"]["name"]: r for r in by_kind("ClusterRole")}
    bound = roles[binding["roleRef"]["name"]]
    selector = bound["aggregationRule"]["clusterRoleSelectors"][0]["matchLabels"]
    rules = list(bound.get("rules") or [])
    for role in roles.values():
        labels = role["metadata"].get("labels", {})
        if selector.items() <= labels.items():
            rules += role["rules"]
    return rules


def verbs_for(rules: list[dict[str, Any]], group: str, resource: str) -> set[str]:
    return {
        verb
        for rule in rules
        if group in rule["apiGroups"] and resource in rule["resources"]
        for verb in rule["verbs"]
    }


@pytest.mark.parametrize(
    ("group", "resource"),
    [
        ("networking.k8s.io", "ingresses"),
        ("", "services"),
        ("discovery.k8s.io", "endpointslices"),
        ("", "secrets"),
    ],
)
def test_watched_kinds_are_readable_and_never_writable(group: str, resource: str) -> None:
    # list and watch are all the watches use (tests/operator/test_rbac.py checks the calls)
    assert verbs_for(effective_cluster_rules(), group, resource) == READ - {"get"}


def test_controller_can_run_its_own_api_and_publish() -> None:
    rules = effective_cluster_rules()
    assert verbs_for(rules, "haproxy-template.dev", "haproxytemplateconfigs") >= READ
    assert verbs_for(rules, "haproxy-template.dev", "haproxytemplateconfigs/status") == {"patch"}
    assert "create" in verbs_for(rules, "events.k8s.io", "events")
    everything = {v for r in rules for v in r["verbs"]}
    assert not everything & {"delete", "deletecollection", "escalate", "bind", "impersonate", "*"}
    assert all("*" not in r["resources"] and "*" not in r["apiGroups"] for r in rules)


def test_leader_election_leases_are_namespaced() -> None:
    [role] = by_kind("Role")
    [binding] = [b for b in by_kind("RoleBinding") if b["roleRef"]["kind"] == "Role"]
    assert role["metadata"]["namespace"] == NAMESPACE
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert binding["subjects"] == [SA]
    assert {"get", "create", "update"} <= verbs_for(role["rules"], "coordination.k8s.io", "leases")
    assert not verbs_for(effective_cluster_rules(), "coordination.k8s.io", "leases")


# --- chart -------------------------------------------------------------------------------


def test_chart_is_honest_about_its_contents() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert chart["apiVersion"] == "v2" and chart["name"] == CHART.name
    assert re.fullmatch(r"\d+\.\d+\.\d+", chart["version"])
    assert chart["appVersion"] == controller.__version__
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert chart["appVersion"] == pyproject["project"]["version"]
    assert sorted(p.name for p in (CHART / "crds").iterdir()) == [CRD_FILE]
    assert (CHART / "templates").is_dir()  # tests/packaging renders and installs them


def test_chart_crd_is_the_deploy_crd() -> None:
    assert (CHART / "crds" / CRD_FILE).read_bytes() == (DEPLOY / "crds" / CRD_FILE).read_bytes()


# --- Dockerfile and build context --------------------------------------------------------


def dockerfile() -> list[tuple[str, str]]:
    """(instruction, arguments) pairs with continuation lines joined."""
    text = re.sub(r"\\\n", " ", (REPO / "Dockerfile").read_text())
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), " ".join(rest.split())))
    return out


def copy_sources() -> list[str]:
    sources: list[str] = []
    for ins, arg in dockerfile():
        if ins == "COPY" and "--from" not in arg:
            sources += arg.split()[:-1]
    return sources


def ignored(path: str, patterns: list[str]) -> bool:
    """Docker's rule: the last matching pattern wins; a pattern matching a parent matches."""
    parts = path.split("/")
    candidates = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    result = False
    for pattern in patterns:
        negate = pattern.startswith("!")
        glob = pattern.lstrip("!").rstrip("/")
        if any(fnmatch.fnmatchcase(c, glob) for c in candidates):
            result = not negate
    return result


def dockerignore() -> list[str]:
    lines = (REPO / ".dockerignore").read_text().splitlines()
    return [x.strip() for x in lines if x.strip() and not x.startswith("#")]


def test_build_context_holds_what_copy_needs_and_nothing_else() -> None:
    patterns = dockerignore()
    for source in copy_sources():
        assert not ignored(source, patterns), f"COPY {source} is excluded by .dockerignore"
    for path in (REPO / "controller").rglob("*.py"):
        assert not ignored(str(path.relative_to(REPO)), patterns), path
    for secret_or_bulk in (".venv/bin/python", ".git/config", "tests/conftest.py", ".env"):
        assert ignored(secret_or_bulk, patterns), secret_or_bulk
    assert ignored("controller/__pycache__/cli.cpython-311.pyc", patterns)


def test_the_copied_sources_build_a_wheel_with_the_htc_entry_point(tmp_path: Path) -> None:
    wheel_builder = pytest.importorskip("hatchling.builders.wheel")
    context = tmp_path / "src"
    context.mkdir()
    for source in copy_sources():
        src = REPO / source
        if src.is_dir():
            shutil.copytree(src, context / source, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(src, context / source)
    [wheel] = wheel_builder.WheelBuilder(str(context)).build(
        directory=str(tmp_path / "dist"), versions=["standard"]
    )
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        entry_points = next(n for n in names if n.endswith("entry_points.txt"))
        assert "htc = controller.cli:main" in zf.read(entry_points).decode()
    assert "controller/cli/__init__.py" in names and "controller/spec/models.py" in names
    assert not any(n.startswith("tests/") for n in names)


def test_fleet_reads_pods_and_one_secret_in_one_namespace() -> None:
    """--deploy dataplane: pods list/watch and the credentials Secret, through a RoleBinding
    (one namespace), never through the aggregated cluster-wide role."""
    roles = {r["metadata"]["name"]: r for r in by_kind("ClusterRole")}
    fleet = roles["haproxy-template-controller-fleet"]
    assert "haproxy-template.dev/aggregate-to-controller" not in fleet["metadata"].get("labels", {})
    assert verbs_for(fleet["rules"], "", "pods") == {"list", "watch"}
    [secret_rule] = [r for r in fleet["rules"] if "secrets" in r["resources"]]
    assert secret_rule["verbs"] == ["get"]
    assert secret_rule["resourceNames"] == ["dataplane-credentials"]
    [binding] = [
        b
        for b in by_kind("RoleBinding")
        if b["roleRef"]["name"] == "haproxy-template-controller-fleet"
    ]
    assert binding["roleRef"]["kind"] == "ClusterRole"
    assert binding["subjects"] == [SA]
    assert not verbs_for(effective_cluster_rules(), "", "pods")
