"""Parsing what the master CLI prints, with text captured from the real 2.6 and 2.8 binaries."""

from __future__ import annotations

import pytest

from controller.deploy.haproxy_log import alerts, diagnostics_from_log
from controller.deploy.master_cli import parse_show_proc

SHOW_PROC_26_FAILED = """\
#<PID>          <type>          <reloads>       <uptime>        <version>
7981            master          1 [failed: 1]   0d00h00m01s     2.6.12-1+deb12u4
# workers
7984            worker          1               0d00h00m01s     2.6.12-1+deb12u4
# programs

"""

SHOW_PROC_28_OK = """\
#<PID>          <type>          <reloads>       <uptime>        <version>
8329            master          2 [failed: 0]   0d00h00m01s     2.8.25-5cf5d0683
# workers
8503            worker          0               0d00h00m00s     2.8.25-5cf5d0683
8400            worker          1               0d00h00m01s     2.8.25-5cf5d0683
# programs

"""

RELOAD_LOG_28 = """\
[NOTICE]   (14082) : haproxy version is 2.8.25-5cf5d0683
[ALERT]    (14082) : Binding [haproxy.cfg:10] for frontend fe: cannot bind socket (Address already in use) for [127.0.0.1:18998]
[ALERT]    (14082) : [haproxy.main()] Some protocols failed to start their listeners! Exiting.
[ALERT]    (8329) : config : parsing [haproxy.cfg:11] : unknown keyword 'bogus' in 'frontend' section
[ALERT]    (8329) : config : Fatal errors found in configuration.
[WARNING]  (14082) : Loading failure!
"""


def test_show_proc_failed_reload_on_26() -> None:
    t = parse_show_proc(SHOW_PROC_26_FAILED)
    assert (t.master_pid, t.reloads, t.failed, t.version) == (7981, 1, 1, "2.6.12-1+deb12u4")
    assert t.current_workers == ()  # the surviving worker is from before the reload
    assert t.worker_pids == {7984}


def test_show_proc_new_generation_on_28() -> None:
    t = parse_show_proc(SHOW_PROC_28_OK)
    assert (t.reloads, t.failed) == (2, 0)
    assert [w.pid for w in t.current_workers] == [8503]
    assert t.worker_pids == {8503, 8400}


def test_show_proc_without_master_line_is_an_error() -> None:
    with pytest.raises(ValueError):
        parse_show_proc("Unknown command: 'show prc'\n")


def test_alert_lines_become_located_diagnostics() -> None:
    assert len(alerts(RELOAD_LOG_28)) == 2  # HAProxy's summary lines are dropped
    diags = diagnostics_from_log(RELOAD_LOG_28, {"haproxy.cfg"})
    assert [d.rule_id for d in diags] == ["E7002", "E7002"]
    assert diags[0].location is not None and diags[0].location.line == 10
    assert "Address already in use" in diags[0].message
    assert diags[1].location is not None and diags[1].location.line == 11


def test_address_in_brackets_is_not_mistaken_for_a_file() -> None:
    log = "[ALERT]    (1) : Starting proxy fe: cannot bind socket [127.0.0.1:80]\n"
    (diag,) = diagnostics_from_log(log, {"haproxy.cfg"})
    assert diag.location is None
