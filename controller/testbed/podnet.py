"""A pod network for tests: a bridge, an `unreachable` route, and "pods" that are namespaces.

The real API server refuses loopback addresses in EndpointSlices, so a test that sends traffic
through HAProxy to the backends an EndpointSlice names needs backends at real, non-loopback
addresses that still never leave this machine. This module builds them the way Kubernetes'
bridge plugin does: one Linux bridge, one network namespace per pod with a veth on the bridge
and an address from the pod CIDR, and a process started inside it.

Why traffic cannot escape:

- Before anything else, an ``unreachable`` route for the whole CIDR is installed on the host,
  so a packet to an address no pod holds is dropped here with an ICMP error instead of
  following the default route off the machine.
- Each pod gets a ``/32`` host route through the bridge, more specific than the unreachable
  one, added when the pod starts and removed when it stops.
- Pods have no default route: they reach the host's bridge address and each other, nothing else.

Everything this module makes carries the ``htc`` name prefix and routes carry the protocol
number :data:`ROUTE_PROTO`, so that a run killed half-way is cleaned up by the next one. One
network exists at a time; a lock file names the process that owns it.

Needs root and iproute2's ``ip``. Run ``python -m controller.testbed.podnet --help`` for the
command people use.
"""

from __future__ import annotations

import argparse
import contextlib
import ipaddress
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

DEFAULT_CIDR = "10.244.0.0/16"
BRIDGE = "htcbr0"
NETNS_PREFIX = "htcpod-"
VETH_PREFIX = "htcv"
# Marks our routes (`ip route ... proto 213`): a number no routing daemon here uses.
ROUTE_PROTO = "213"
LOCK = Path("/run/htc-podnet.pid")
# Pods take addresses from the lower half of the CIDR; the control plane's Service range sits in
# the upper part (10.244.240.0/20 by default), under the same unreachable route.
POD_SHARE = 2


class PodNetError(RuntimeError):
    """The pod network cannot be built here; the message says why and what to do."""


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(["ip", *args], capture_output=True, text=True, check=False)
    if check and proc.returncode != 0:
        raise PodNetError(f"ip {' '.join(args)}: {proc.stderr.strip() or proc.returncode}")
    return proc


def _ip_json(*args: str) -> list[dict[str, object]]:
    out = _ip("-j", *args).stdout.strip()
    return list(json.loads(out)) if out else []


def can_run() -> str | None:
    """Why a pod network cannot be built here, or None when it can."""
    if os.geteuid() != 0:
        return "the pod network needs root (network namespaces, a bridge, routes)"
    try:
        _ip("-V")
    except (OSError, PodNetError):
        return "the pod network needs iproute2's `ip` command"
    return None


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def cleanup_stale() -> list[str]:
    """Remove every namespace, link and route a previous run left behind; return their names."""
    removed: list[str] = []
    for ns in _ip_json("netns", "list"):
        name = str(ns.get("name", ""))
        if name.startswith(NETNS_PREFIX):
            _kill_netns_processes(name)
            _ip("netns", "del", name, check=False)
            removed.append(f"netns {name}")
    for link in _ip_json("link", "show"):
        name = str(link.get("ifname", ""))
        if name.startswith((VETH_PREFIX, BRIDGE)):
            _ip("link", "del", name, check=False)
            removed.append(f"link {name}")
    for route in _ip_json("route", "show", "table", "main", "proto", ROUTE_PROTO):
        dst = str(route.get("dst", ""))
        kind = str(route.get("type", "unicast"))
        _ip("route", "del", kind, dst, "proto", ROUTE_PROTO, check=False)
        removed.append(f"route {kind} {dst}")
    return removed


def _kill_netns_processes(netns: str) -> None:
    proc = _ip("netns", "pids", netns, check=False)
    for pid in proc.stdout.split():
        with contextlib.suppress(ProcessLookupError, ValueError):
            os.kill(int(pid), signal.SIGKILL)


@dataclass
class Pod:
    """A network namespace on the bridge, with one address, and the processes run inside it."""

    name: str
    ip: str
    host_link: str
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def command(self, argv: Sequence[str]) -> list[str]:
        """``argv`` prefixed so that it runs inside this pod's network namespace."""
        return ["ip", "netns", "exec", self.name, *argv]

    def start(self, argv: Sequence[str], **popen: object) -> subprocess.Popen[bytes]:
        """Start ``argv`` inside the pod, in a session of its own (stopped with the pod)."""
        proc: subprocess.Popen[bytes] = subprocess.Popen(  # type: ignore[call-overload]
            self.command(argv), start_new_session=True, **popen
        )
        self.processes.append(proc)
        return proc

    def stop_processes(self, grace: float = 5.0) -> None:
        for proc in self.processes:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        for proc in self.processes:
            try:
                proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        self.processes.clear()
        _kill_netns_processes(self.name)


class PodNetwork:
    """The bridge, the unreachable route and the pods; a context manager that removes them all.

    ``up()`` refuses when another live process owns the network or when a route of this machine
    overlaps the CIDR (pods there would shadow, or be shadowed by, real destinations).
    """

    def __init__(self, cidr: str = DEFAULT_CIDR) -> None:
        self.cidr = ipaddress.IPv4Network(cidr)
        hosts = self.cidr.hosts()
        self.gateway = str(next(hosts))
        self._free: Iterator[ipaddress.IPv4Address] = hosts
        self._last_pod = self.cidr.network_address + self.cidr.num_addresses // POD_SHARE
        self.pods: dict[str, Pod] = {}
        self._up = False
        self._counter = 0

    def __enter__(self) -> PodNetwork:
        self.up()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.down()

    def up(self) -> None:
        reason = can_run()
        if reason:
            raise PodNetError(reason)
        self._take_lock()
        try:
            cleanup_stale()
            self.check_overlap()
            # First: whatever happens next, nothing addressed into the CIDR leaves the machine.
            _ip("route", "add", "unreachable", str(self.cidr), "proto", ROUTE_PROTO)
            _ip("link", "add", BRIDGE, "type", "bridge")
            _ip("addr", "add", f"{self.gateway}/32", "dev", BRIDGE)
            _ip("link", "set", BRIDGE, "up")
        except BaseException:
            cleanup_stale()
            LOCK.unlink(missing_ok=True)
            raise
        self._up = True

    def _take_lock(self) -> None:
        try:
            owner = int(LOCK.read_text().strip())
        except (OSError, ValueError):
            owner = 0
        if owner and owner != os.getpid() and _pid_alive(owner):
            raise PodNetError(
                f"the pod network is in use by process {owner} (lock {LOCK}); stop it first"
            )
        LOCK.write_text(f"{os.getpid()}\n")

    def check_overlap(self) -> None:
        for route in _ip_json("-4", "route", "show", "table", "all"):
            dst = str(route.get("dst", ""))
            if dst in ("", "default") or route.get("table") == "local":
                continue
            try:
                net = ipaddress.IPv4Network(dst, strict=False)
            except ValueError:
                continue
            if net.overlaps(self.cidr) and not net.is_loopback:
                raise PodNetError(
                    f"route {dst} (dev {route.get('dev', '?')}) overlaps the pod CIDR {self.cidr}; "
                    "choose another CIDR (--cidr) so that pods never shadow a real destination"
                )

    def add_pod(self, name: str | None = None) -> Pod:
        """A new pod with the next free address; its processes are started with ``Pod.start``."""
        if not self._up:
            raise PodNetError("the pod network is not up")
        address = next(self._free)
        if address >= self._last_pod:
            raise PodNetError(f"no free pod address left in the lower half of {self.cidr}")
        self._counter += 1
        pod = Pod(
            name=f"{NETNS_PREFIX}{name or self._counter}",
            ip=str(address),
            host_link=f"{VETH_PREFIX}{self._counter}",
        )
        if pod.name in self.pods:
            raise PodNetError(f"pod {pod.name} exists")
        _ip("netns", "add", pod.name)
        self.pods[pod.name] = pod
        _ip("link", "add", pod.host_link, "type", "veth", "peer", "name", "eth0", "netns", pod.name)
        _ip("link", "set", pod.host_link, "master", BRIDGE, "up")
        inside = ("-n", pod.name)
        _ip(*inside, "addr", "add", f"{pod.ip}/{self.cidr.prefixlen}", "dev", "eth0")
        _ip(*inside, "link", "set", "eth0", "up")
        _ip(*inside, "link", "set", "lo", "up")
        _ip("route", "add", f"{pod.ip}/32", "dev", BRIDGE, "proto", ROUTE_PROTO)
        return pod

    def remove_pod(self, pod: Pod) -> None:
        pod.stop_processes()
        _ip("route", "del", f"{pod.ip}/32", "dev", BRIDGE, "proto", ROUTE_PROTO, check=False)
        _ip("link", "del", pod.host_link, check=False)
        _ip("netns", "del", pod.name, check=False)
        self.pods.pop(pod.name, None)

    def down(self) -> None:
        """Remove every pod, the bridge and the routes (also after a failure half-way)."""
        for pod in list(self.pods.values()):
            with contextlib.suppress(PodNetError):
                pod.stop_processes()
        if self._up or self.pods:
            cleanup_stale()
        self.pods.clear()
        self._up = False
        with contextlib.suppress(OSError, ValueError):
            if int(LOCK.read_text().strip()) == os.getpid():
                LOCK.unlink()


def _wait_for_signal() -> None:
    stop = False

    def handler(signum: int, frame: object) -> None:
        nonlocal stop
        stop = True

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, handler)
    while not stop:
        signal.pause()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_IGN)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m controller.testbed.podnet",
        description="The test pod network: a bridge, an unreachable route for the CIDR, pods.",
    )
    parser.add_argument("--cidr", default=DEFAULT_CIDR)
    sub = parser.add_subparsers(dest="action", required=True)
    sub.add_parser("up", help="build the network and hold it until Ctrl-C, then remove it")
    run = sub.add_parser("run", help="start CMD in a new pod, print its address, hold until Ctrl-C")
    run.add_argument("cmd", nargs=argparse.REMAINDER, help="-- CMD ARGS...")
    sub.add_parser("clean", help="remove what a killed run left behind")
    args = parser.parse_args(argv)
    try:
        if args.action == "clean":
            for item in cleanup_stale():
                print(f"removed {item}")
            LOCK.unlink(missing_ok=True)
            return 0
        with PodNetwork(args.cidr) as net:
            line = f"pod network {net.cidr} up on {BRIDGE} (host address {net.gateway})"
            if args.action == "run":
                cmd = [c for c in args.cmd if c != "--"] or ["sleep", "infinity"]
                pod = net.add_pod()
                pod.start(cmd)
                line += f"; pod {pod.name} at {pod.ip} runs {' '.join(cmd)}"
            print(line + "; Ctrl-C removes it", flush=True)
            _wait_for_signal()
    except PodNetError as exc:
        print(f"podnet: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
