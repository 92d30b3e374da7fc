"""Deploy targets: where validated file sets go.

Every target takes a ``ValidatedFileSet`` and nothing else. ``MasterSocketTarget`` writes a
deploy directory and reloads HAProxy through its master CLI (local mode and sidecars).
"""

from controller.deploy.binary import HAProxyNotFound, find_haproxy
from controller.deploy.files import DeployDir
from controller.deploy.master_cli import MasterCli, MasterCliError, ProcTable, parse_show_proc
from controller.deploy.master_socket import MasterSocketTarget
from controller.deploy.supervisor import PARENT_DEATH_SIGNAL, HAProxySupervisor
from controller.deploy.target import (
    DeployOutcome,
    DeployResult,
    DeployTarget,
    HAProxyProcess,
    StartResult,
)

__all__ = [
    "PARENT_DEATH_SIGNAL",
    "DeployDir",
    "DeployOutcome",
    "DeployResult",
    "DeployTarget",
    "HAProxyNotFound",
    "HAProxyProcess",
    "HAProxySupervisor",
    "MasterCli",
    "MasterCliError",
    "MasterSocketTarget",
    "ProcTable",
    "StartResult",
    "find_haproxy",
    "parse_show_proc",
]
