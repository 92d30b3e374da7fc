"""Deploy targets: where validated file sets go.

Every target takes a ``ValidatedFileSet`` and nothing else. ``MasterSocketTarget`` writes a
deploy directory and reloads HAProxy through its master CLI (local mode and sidecars).
"""

from controller.deploy.files import DeployDir
from controller.deploy.master_cli import MasterCli, MasterCliError, ProcTable, parse_show_proc
from controller.deploy.master_socket import MasterSocketTarget
from controller.deploy.target import (
    DeployOutcome,
    DeployResult,
    DeployTarget,
    HAProxyProcess,
    StartResult,
)

__all__ = [
    "DeployDir",
    "DeployOutcome",
    "DeployResult",
    "DeployTarget",
    "HAProxyProcess",
    "MasterCli",
    "MasterCliError",
    "MasterSocketTarget",
    "ProcTable",
    "StartResult",
    "parse_show_proc",
]
