"""Every public surface, pinned (httpx's ``test_exported_members`` habit).

Each layer package re-exports what other layers and users may import, in ``__all__``. A name
added to or dropped from one of them is an API change; this test makes it a visible one: update
:data:`EXPORTS` in the same commit, on purpose.
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
from pathlib import Path
from types import ModuleType

import pytest

import controller

EXPORTS: dict[str, set[str]] = {
    "controller": {
        "__version__",
    },
    "controller.cli": {
        "COMMANDS",
        "main",
    },
    "controller.deploy": {
        "DataplaneClient",
        "DataplaneDetail",
        "DataplaneError",
        "DataplaneTarget",
        "DeployDetail",
        "DeployDir",
        "DeployOutcome",
        "DeployResult",
        "DeployTarget",
        "Fleet",
        "FleetDetail",
        "HAProxyNotFound",
        "HAProxyProcess",
        "HAProxySupervisor",
        "MasterCli",
        "MasterCliError",
        "MasterSocketDetail",
        "MasterSocketTarget",
        "PARENT_DEATH_SIGNAL",
        "ProcTable",
        "StartResult",
        "TargetStatus",
        "find_haproxy",
        "parse_show_proc",
    },
    "controller.diagnostics": {
        "Diagnostic",
        "Location",
        "ObjectRef",
        "Occurrences",
        "Phase",
        "RULES",
        "Rule",
        "RuleId",
        "Severity",
        "TemplateLocation",
        "UnknownRuleError",
        "configure_docs_url",
        "documentation_url",
        "make",
        "rule",
    },
    "controller.local": {
        "LocalApp",
        "LocalOptions",
    },
    "controller.observability": {
        "CONTENT_TYPE_LATEST",
        "METRICS",
        "Metrics",
        "bind",
        "configure",
        "escape_char",
        "escape_controls",
        "get_logger",
        "object_ref",
        "render_markdown",
    },
    "controller.operator": {
        "DataplaneSettings",
        "OperatorApp",
        "OperatorOptions",
    },
    "controller.publish": {
        "Event",
        "EventKind",
        "Publisher",
        "Sink",
        "StatusBoard",
        "StatusServer",
        "now_rfc3339",
        "parse_addr",
    },
    "controller.render": {
        "AfterOutput",
        "CodeCache",
        "disk_cache",
        "FileEntry",
        "FileKind",
        "FileSet",
        "FilterError",
        "FRAGMENTS_CALL",
        "KIND_DIRS",
        "MAIN_CONFIG",
        "OutputDef",
        "OutputStatus",
        "Reference",
        "RenderBudget",
        "RenderGraph",
        "RenderInputs",
        "RenderResult",
        "RenderedOutput",
        "Renderer",
        "RuleTally",
        "SourceMap",
        "TemplateRefs",
        "check_name",
        "parse_expression",
        "path_for",
        "same_ends",
        "scattered",
        "strongly_connected",
    },
    "controller.resources": {
        "AmbiguousLookup",
        "Change",
        "ChangeOp",
        "CollectionView",
        "Entry",
        "FieldPath",
        "FieldPathError",
        "FrozenDict",
        "IndexKey",
        "IndexedCollectionView",
        "IndexedStoreView",
        "InvalidObject",
        "K8sObject",
        "MISSING",
        "Manifest",
        "ObjectKey",
        "Overlay",
        "OverlayOp",
        "SelectorError",
        "Snapshot",
        "Store",
        "StoreConfigError",
        "StoreView",
        "TooManyKeys",
        "UnknownCollection",
        "check_paths",
        "check_raw_watched",
        "check_watched",
        "collections_for",
        "format_path",
        "freeze",
        "iter_manifest_files",
        "load_file",
        "load_manifests",
        "lookup",
        "object_key",
        "object_ref",
        "parse_path",
        "selector_matches",
        "thaw",
        "unwatched_note",
    },
    "controller.spec": {
        "API_GROUP",
        "API_VERSION",
        "AssertionType",
        "CRD_FILE",
        "DOC_PATH",
        "EmbeddedTest",
        "ExternalValidator",
        "FULL_API_VERSION",
        "FailurePolicy",
        "HAProxyTemplateConfig",
        "HAProxyTemplateConfigSpec",
        "HAProxyTemplateConfigStatus",
        "HttpSource",
        "KIND",
        "LabelSelector",
        "Locate",
        "MAX_NODES",
        "Output",
        "PathKey",
        "ReconcileSettings",
        "RuleSeverity",
        "SecretKeyRef",
        "TestAssertion",
        "ValidateBlock",
        "ValidationRule",
        "ValidationSettings",
        "WatchedResource",
        "check_output_name",
        "describe_error",
        "field_selector_error",
        "format_path",
        "generate_api_docs",
        "generate_crd",
        "load_config",
        "load_config_located",
        "no_config_kind",
        "not_exactly_one",
        "openapi_schema",
        "parse_config",
        "prune_nulls",
        "read_documents",
        "render_crd_yaml",
        "webhook_configuration",
    },
    "controller.testing": {
        "FakeStage",
        "ManualClock",
        "RecordingTarget",
        "endpoint_slice",
        "ingress",
        "render_of",
        "service",
        "settle",
        "stageless_pipeline",
        "store_of",
    },
    "controller.triggers": {
        "AdmissionDecision",
        "AdmissionJudge",
        "Clock",
        "Engine",
        "EngineFactory",
        "FetchError",
        "HttpSources",
        "ReconcileTrigger",
        "SpecDecision",
        "default_engine",
        "evaluate",
        "failure_report",
        "spec_lint",
        "spec_rejection",
        "with_listen",
    },
    "controller.validation": {
        "BudgetExhaustion",
        "CheckerLike",
        "Counts",
        "Engine",
        "EngineFactory",
        "FORMATS",
        "HaproxyBinary",
        "HaproxyBinaryError",
        "InvalidFilterError",
        "InvalidOptionError",
        "Locator",
        "Origin",
        "Pipeline",
        "PipelineSetupError",
        "RendererLike",
        "ReportMetadata",
        "ReportStatus",
        "RuleSet",
        "RuledRenderer",
        "Stage",
        "StageContext",
        "StageOutcome",
        "SuiteReport",
        "TEST_FORMATS",
        "TestRunner",
        "ValidatedFileSet",
        "ValidationOptions",
        "ValidationReport",
        "Verdict",
        "VerdictCache",
        "VerdictLike",
        "checking_pipeline",
        "config_origin",
        "cpu_slots",
        "default_engine",
        "evaluate",
        "failure_report",
        "fix_mmap_threshold",
        "format_report",
        "format_suite",
        "limit_arenas",
        "lint_report",
        "lint_spec",
        "paused_gc",
        "ruled_renderer",
        "sarif_log",
        "select_tests",
        "spec_failure_report",
        "spec_lint",
        "spec_locator",
        "trim_heap",
        "verdict",
        "with_origins",
    },
}


def _module(name: str) -> ModuleType:
    return importlib.import_module(name)


@pytest.mark.parametrize("name", sorted(EXPORTS))
def test_all_is_pinned(name: str) -> None:
    exported = _module(name).__all__
    assert len(exported) == len(set(exported)), f"{name}.__all__ lists a name twice"
    assert set(exported) == EXPORTS[name]


@pytest.mark.parametrize("name", sorted(EXPORTS))
def test_every_exported_name_resolves(name: str) -> None:
    module = _module(name)
    missing = [n for n in module.__all__ if not hasattr(module, n)]
    assert not missing, f"{name}.__all__ names what it does not define: {missing}"


@pytest.mark.parametrize("name", sorted(EXPORTS))
def test_star_import_gives_exactly_all(name: str) -> None:
    namespace: dict[str, object] = {}
    exec(f"from {name} import *", namespace)
    namespace.pop("__builtins__", None)
    assert set(namespace) == EXPORTS[name]


def test_every_layer_package_is_pinned() -> None:
    """A new layer package gets an ``__all__`` and a pin here; the test bed is no layer (the
    controller never imports it; tests reach its modules directly)."""
    packages = {
        f"controller.{info.name}"
        for info in pkgutil.iter_modules(controller.__path__)
        if info.ispkg and info.name != "testbed"
    }
    assert packages <= set(EXPORTS), sorted(packages - set(EXPORTS))


# Imports that reach into another layer's module on purpose: the CLI is loaded lazily (its
# package exports only the group), and the manifest reader shares the spec loader's private
# YAML loader class.
REACHING_IN = {
    ("controller/demo.py", "controller.cli.local"),
    ("controller/resources/manifests.py", "controller.spec.loader"),
}


def test_other_layers_import_through_the_package() -> None:
    """``from controller.spec import X``, never ``from controller.spec.models import X``, when
    the importer is outside ``controller.spec``: a layer's modules may move; its exports stay."""
    root = Path(controller.__file__).parent
    found = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root.parent).as_posix()
        own = rel.split("/")[1] if rel.count("/") > 1 else None
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ImportFrom) or not node.module or node.level:
                continue
            parts = node.module.split(".")
            if parts[0] != "controller" or len(parts) < 3 or parts[1] in (own, "testbed"):
                continue
            if (rel, node.module) not in REACHING_IN:
                found.append(f"{rel}:{node.lineno}: from {node.module} import …")
    assert not found, "\n".join(found)
