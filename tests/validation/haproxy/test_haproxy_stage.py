"""The haproxy stage against both real binaries: verdicts, locations, budgets, redaction."""

from __future__ import annotations

import time

import pytest

from controller.diagnostics import Phase
from controller.render import FileEntry, FileKind
from controller.validation.haproxy import HaproxyBinary, HaproxyStage
from controller.validation.redact import REDACTED
from controller.validation.sandbox import Limits, SandboxPolicy
from controller.validation.stage import StageContext
from tests.validation.haproxy.haproxy_kit import VALID, check, errors, ids, large_config, render

pytestmark = pytest.mark.haproxy


async def test_valid_config_passes(haproxy_bin: str) -> None:
    out = await check(haproxy_bin, render(VALID))
    assert out.budget is None
    assert errors(out) == []
    assert out.extra_timings["haproxyProcessMs"] > 0


async def test_parse_error_maps_to_rendered_and_template_line(haproxy_bin: str) -> None:
    cfg = VALID + "    bogus-keyword on\n"  # rendered line 13
    out = await check(haproxy_bin, render(cfg, template_lines={13: 42}))
    [err] = [d for d in out.diagnostics if d.rule_id == "E4001"]
    assert err.phase is Phase.HAPROXY
    assert err.location is not None
    assert (err.location.file, err.location.line) == ("haproxy.cfg", 13)
    assert err.template_location is not None
    assert (err.template_location.template, err.template_location.line) == ("haproxy.cfg.j2", 42)
    assert "bogus-keyword" in err.message
    assert "I4005" not in ids(out)  # HAProxy's closing summary is not a finding of its own
    assert not any("Error(s) found" in d.message for d in out.diagnostics)


async def test_post_parse_error_without_location_points_at_the_reference(
    haproxy_bin: str,
) -> None:
    cfg = VALID.replace(
        "    default_backend be\n",
        "    use_backend nowhere if { path_beg /x }\n    default_backend be\n",
    )
    out = await check(haproxy_bin, render(cfg))
    [err] = [d for d in out.diagnostics if d.rule_id == "E4002"]
    assert "nowhere" in err.message
    assert err.location is not None and err.location.line == 10  # the use_backend line
    assert err.template_location is not None and err.template_location.line == 110


async def test_warnings_are_kept_on_a_passing_check(haproxy_bin: str) -> None:
    cfg = VALID.replace("\nbackend be\n", "\nbackend be\n    option httplog\n")
    out = await check(haproxy_bin, render(cfg))
    assert errors(out) == []
    warnings = [d for d in out.diagnostics if d.rule_id == "W4003"]
    assert warnings and all(d.location and d.location.line == 12 for d in warnings)


async def test_continuation_lines_join_their_message(haproxy_bin: str) -> None:
    cfg = VALID.replace("    timeout client 30s\n", "")
    out = await check(haproxy_bin, render(cfg))
    [warn] = [d for d in out.diagnostics if "missing timeouts for frontend" in d.message]
    assert warn.rule_id == "W4003"
    assert "'client'" in warn.message  # text from the "   |" continuation lines
    assert warn.location is not None and warn.location.line == 7  # frontend fe header


async def test_auxiliary_files_resolve_relative_to_the_deploy_layout(haproxy_bin: str) -> None:
    cfg = VALID.replace(
        "    default_backend be\n",
        "    use_backend %[req.hdr(host),lower,map(maps/hosts.map,be)]\n"
        "    errorfile 503 files/503.http\n"
        "    default_backend be\n",
    )
    page = b"HTTP/1.0 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n"
    extra = [
        FileEntry("maps/hosts.map", FileKind.MAP, b"example.com be\n"),
        FileEntry("files/503.http", FileKind.FILE, page),
    ]
    assert errors(await check(haproxy_bin, render(cfg, extra))) == []
    missing = await check(haproxy_bin, render(cfg, extra[:1]))
    [err] = [d for d in missing.diagnostics if d.rule_id == "E4001"]
    assert "files/503.http" in err.message and err.location and err.location.line == 11


async def test_no_listener_is_an_error(haproxy_bin: str) -> None:
    out = await check(haproxy_bin, render("global\n    maxconn 10\n"))
    assert errors(out) == ["E4009"]


async def test_lua_busy_loop_is_analysis_incomplete_within_timeout(
    haproxy_bin: str,
) -> None:
    cfg = "global\n    lua-load files/spin.lua\n" + VALID.split("\n", 2)[2]
    extra = [FileEntry("files/spin.lua", FileKind.FILE, b"while true do end\n")]
    started = time.monotonic()
    out = await check(haproxy_bin, render(cfg, extra), timeout=1.0)
    elapsed = time.monotonic() - started
    assert elapsed < 2.0
    assert out.budget is not None and out.budget.budget == "timeout"
    assert out.budget.limit == 1.0 and out.budget.phase is Phase.HAPROXY
    assert ids(out)[0] == "E0002"


async def test_memory_limit_is_a_budget_not_a_verdict(haproxy_bin: str) -> None:
    servers = "".join(f"    server s{i} 127.0.0.1:{20000 + i}\n" for i in range(3000))
    cfg = VALID + servers
    stage = HaproxyStage(
        HaproxyBinary.detect(haproxy_bin),
        10,
        policy=SandboxPolicy(limits=Limits(address_space=24 << 20)),
    )
    out = await stage.run(StageContext(render=render(cfg)))
    assert out.budget is not None and out.budget.budget == "addressSpace"
    assert "E0002" in ids(out)


async def test_temp_paths_are_never_echoed(haproxy_bin: str) -> None:
    class AbsolutePaths(HaproxyStage):
        """Makes HAProxy print the sandbox path itself in every location."""

        def argv(self) -> list[str]:
            return [self.binary.path, "-c", "-f", "{sandbox_dir}/haproxy.cfg"]

    stage = AbsolutePaths(HaproxyBinary.detect(haproxy_bin), 10)
    out = await stage.run(StageContext(render=render(VALID + "    nonsense\n")))
    [err] = [d for d in out.diagnostics if d.rule_id == "E4001"]
    assert err.location is not None and err.location.file == "haproxy.cfg"
    dumped = "".join(d.model_dump_json() for d in out.diagnostics)
    assert "htc-sandbox" not in dumped and "/tmp" not in dumped


async def test_key_material_printed_during_the_check_is_redacted(haproxy_bin: str) -> None:
    body = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7VJTUt9Us8cKj"
    pem = f"-----BEGIN PRIVATE KEY-----\n{body}\n-----END PRIVATE KEY-----\n"
    lua = b'local f = io.open("certs/site.pem"); local t = f:read("a"); print(t); print(t:sub(30, 60))'
    cfg = "global\n    lua-load files/leak.lua\n" + VALID.split("\n", 2)[2]
    extra = [
        FileEntry("certs/site.pem", FileKind.CERT, pem.encode()),
        FileEntry("files/leak.lua", FileKind.FILE, lua),
    ]
    out = await check(haproxy_bin, render(cfg, extra))
    [other] = [d for d in out.diagnostics if d.rule_id == "I4008"]
    assert "[redacted" in other.message
    assert body[:20] not in other.message and body[30:50] not in other.message


async def test_missing_binary_is_a_diagnostic_not_a_traceback(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from controller.validation.haproxy import HaproxyBinaryError

    with pytest.raises(HaproxyBinaryError) as info:
        HaproxyBinary.detect(str(tmp_path / "no-such-haproxy"))
    assert info.value.diagnostic.rule_id == "E4011"


async def test_benchmark_sized_config_passes_within_the_default_limits(haproxy_bin: str) -> None:
    """1,000 backends x 5 servers (~7,000 lines) under the default sandbox limits."""
    cfg, hosts_map = large_config()
    assert cfg.count("\n") > 7000
    out = await check(haproxy_bin, render(cfg, [hosts_map]))
    assert out.budget is None and errors(out) == []


async def test_server_hostnames_neither_hang_nor_fail_the_check(haproxy_bin: str) -> None:
    """No network in the sandbox: names cannot resolve, and ``-dr`` keeps that from failing a
    configuration that may well resolve where HAProxy runs. DNS on this host hangs, so a
    leak of the host resolver into the sandbox would show up as a timeout here."""
    cfg = VALID + "    server s2 backend.default.svc.cluster.local:8080\n"
    started = time.monotonic()
    out = await check(haproxy_bin, render(cfg), timeout=5)
    assert time.monotonic() - started < 3
    assert out.budget is None and errors(out) == []
    [note] = [d for d in out.diagnostics if "could not resolve" in d.message]
    assert note.location is not None and note.location.line == 13


RESOLVERS = (
    VALID.replace(
        "defaults\n", "resolvers dns\n    parse-resolv-conf\n    hold valid 10s\ndefaults\n"
    )
    + "    server-template dyn 3 app.example.test:80 resolvers dns init-addr none\n"
)


async def test_parse_resolv_conf_passes_without_the_hosts_resolver(haproxy_bin: str) -> None:
    """``parse-resolv-conf`` needs a file to read; the private root gets a loopback-only stub
    (the host's file stays out), so a configuration that is fine where HAProxy runs passes."""
    from controller.validation.sandbox import isolation_for

    if not isolation_for(SandboxPolicy()).namespaces:
        pytest.skip("the stub lives in the private mount root (needs namespaces)")
    out = await check(haproxy_bin, render(RESOLVERS), timeout=5)
    assert out.budget is None and errors(out) == [], [d.message for d in out.diagnostics]


async def test_a_clean_check_builds_no_redactor_and_a_noisy_one_still_redacts(
    haproxy_bin: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Building a Redactor decodes every file and scans the configuration for credentials,
    on the verdict's critical path after ``haproxy -c`` exits: it is built only when the
    check printed something to report, and then it redacts as before."""
    from controller.validation.haproxy import stage as stage_module

    built: list[object] = []
    from controller.validation.redact import Redactor as real

    def counting(*args: object) -> object:
        built.append(args)
        return real(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(stage_module, "Redactor", counting)
    clean = await check(haproxy_bin, render(VALID))
    assert errors(clean) == [] and built == []
    secret = "stats auth admin:hunter22\n"
    noisy = await check(
        haproxy_bin,
        render(VALID.replace("frontend fe\n", "frontend fe\n    " + secret) + "    hunter22 x\n"),
    )
    assert "E4001" in ids(noisy) and len(built) == 1
    assert any(REDACTED in d.message for d in noisy.diagnostics)  # HAProxy quoted the line
    dumped = "".join(d.model_dump_json() for d in noisy.diagnostics)
    assert "htc-sandbox" not in dumped and "hunter22" not in dumped
