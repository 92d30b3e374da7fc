"""Huge pages for ``haproxy -c`` (``sandbox/hugepages.py``): what a run is shown, and when.

A policy with ``huge_pages`` adds two read-only ``/sys`` files and, only in a series of runs
that follow each other closely, ``GLIBC_TUNABLES`` as the whole environment; every other
policy's runs keep an empty environment and no ``/sys``. The last test checks the effect
itself: a real ``haproxy -c`` of a large configuration, late in a series, takes transparent
huge pages (the kernel's own counter), which a lone run does not.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import controller.validation.sandbox.run as sandbox_run
from controller.render import FileEntry, FileKind, FileSet
from controller.validation.haproxy.binary import HaproxyBinary
from controller.validation.haproxy.stage import HaproxyStage
from controller.validation.sandbox import SandboxPolicy, hugepages, run_sandboxed
from controller.validation.sandbox.hugepages import SERIES, WARM_S, Pace
from tests.validation.haproxy.haproxy_kit import large_config

pytestmark = pytest.mark.haproxy

HUGE = SandboxPolicy(exec_system=True, huge_pages=True)
PLAIN = SandboxPolicy(exec_system=True)
ENABLED = Path(hugepages.THP_FILES[0])


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_huge_pages_from_the_fourth_run_of_a_series_on() -> None:
    clock = Clock()
    pace = Pace(clock)
    assert SERIES == 3
    assert pace.begin() is False  # the first of a series
    assert pace.begin() is False  # another is in flight: the second
    pace.end()
    pace.end()
    clock.now += WARM_S / 2
    assert pace.begin() is False  # the last one ended moments ago: the third
    pace.end()
    clock.now += WARM_S / 2
    assert pace.begin() is True  # the fourth
    assert pace.begin() is True  # and the fifth, in flight beside it
    pace.end()
    pace.end()
    clock.now += WARM_S * 2
    assert pace.begin() is False  # long after the last: a new series
    pace.end()
    clock.now += WARM_S / 2
    assert pace.begin() is False  # a pair is no series worth it
    pace.end()


@pytest.fixture
def close(monkeypatch: pytest.MonkeyPatch) -> Clock:
    """Runs see a Pace whose series is long enough, its last run ended just now: the next
    run asks for huge pages."""
    clock = Clock()
    pace = Pace(clock)
    for _ in range(SERIES):
        pace.begin()
        pace.end()
    monkeypatch.setattr(sandbox_run, "_pace", pace)
    return clock


async def test_a_close_run_gets_the_tunable_as_its_whole_environment(close: Clock) -> None:
    res = await run_sandboxed(["/usr/bin/env"], FileSet(), timeout=5, policy=HUGE)
    assert res.returncode == 0
    assert res.stdout == "GLIBC_TUNABLES=glibc.malloc.hugetlb=1\n"


async def test_a_lone_run_and_other_policies_keep_an_empty_environment(close: Clock) -> None:
    res = await run_sandboxed(["/usr/bin/env"], FileSet(), timeout=5, policy=PLAIN)
    assert (res.returncode, res.stdout) == (0, "")  # close behind, but not its policy
    close.now += WARM_S * 2
    res = await run_sandboxed(["/usr/bin/env"], FileSet(), timeout=5, policy=HUGE)
    assert (res.returncode, res.stdout) == (0, "")


@pytest.mark.skipif(not ENABLED.exists(), reason="this kernel has no transparent huge pages")
async def test_only_a_huge_pages_policy_may_read_the_two_sys_files(close: Clock) -> None:
    argv = ["/usr/bin/cat", *hugepages.THP_FILES]
    res = await run_sandboxed(argv, FileSet(), timeout=5, policy=HUGE)
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines()[0] == ENABLED.read_text().strip()
    res = await run_sandboxed(argv, FileSet(), timeout=5, policy=PLAIN)
    assert res.returncode != 0
    assert res.stdout == ""
    res = await run_sandboxed(
        ["/usr/bin/cat", "/sys/kernel/mm/transparent_hugepage/defrag"],
        FileSet(),
        timeout=5,
        policy=HUGE,
    )
    assert res.returncode != 0  # the two files, not their directory


def _huge_faults() -> int:
    for line in Path("/proc/vmstat").read_text().splitlines():
        name, value = line.split()
        if name == "thp_fault_alloc":
            return int(value)
    raise AssertionError("no thp_fault_alloc in /proc/vmstat")


@pytest.mark.skipif(
    not ENABLED.exists() or "[never]" in ENABLED.read_text(),
    reason="this kernel grants no transparent huge pages",
)
async def test_haproxy_check_in_a_series_takes_huge_pages(close: Clock, haproxy_bin: str) -> None:
    """Its heap (1,000 backends of 5 servers, some 30 MB) takes huge pages late in a series,
    and none when it runs alone. Other processes of the machine rarely take
    huge pages (glibc asks only when told to): the lone run's count may move, not by the
    dozen a check takes."""
    stage = HaproxyStage(HaproxyBinary.detect(haproxy_bin), timeout=30)
    assert stage.policy.huge_pages
    cfg, hosts_map = large_config(1000, 5)
    files = FileSet.of([FileEntry("haproxy.cfg", FileKind.CONFIG, cfg.encode()), hosts_map])
    argv, extra = stage.invocation(files)

    async def check() -> int:
        before = _huge_faults()
        res = await run_sandboxed(argv, files, timeout=30, policy=stage.policy, extra_files=extra)
        assert res.returncode == 0, res.stderr
        return _huge_faults() - before

    assert await check() >= 8
    close.now += WARM_S * 2
    assert await check() < 4
