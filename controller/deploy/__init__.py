"""Deploy targets: where validated file sets go.

Every target takes a ``ValidatedFileSet`` and nothing else. ``MasterSocketTarget`` writes a
deploy directory and reloads HAProxy through its master CLI (local mode and sidecars);
``DataplaneTarget`` deploys to one HAProxy pod through its Data Plane API, and a ``Fleet``
holds such targets as pods come and go and deploys to them concurrently (docs/topologies.md).
"""

from controller.deploy.binary import HAProxyNotFound, find_haproxy
from controller.deploy.dataplane import DataplaneDetail, DataplaneTarget
from controller.deploy.dataplane_client import DataplaneClient, DataplaneError
from controller.deploy.files import DeployDir
from controller.deploy.fleet import Fleet, FleetDetail, TargetStatus
from controller.deploy.master_cli import MasterCli, MasterCliError, ProcTable, parse_show_proc
from controller.deploy.master_socket import MasterSocketTarget
from controller.deploy.supervisor import PARENT_DEATH_SIGNAL, HAProxySupervisor
from controller.deploy.target import (
    DeployDetail,
    DeployOutcome,
    DeployResult,
    DeployTarget,
    HAProxyProcess,
    MasterSocketDetail,
    StartResult,
)

__all__ = [
    "PARENT_DEATH_SIGNAL",
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
    "ProcTable",
    "StartResult",
    "TargetStatus",
    "find_haproxy",
    "parse_show_proc",
]
