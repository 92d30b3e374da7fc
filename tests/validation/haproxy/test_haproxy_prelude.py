"""The check's prelude: used where it cannot change a verdict, and then it changes none."""

from __future__ import annotations

import re
import stat
from pathlib import Path

import pytest

from controller.render import FileEntry, FileKind, FileSet
from controller.validation.haproxy import HaproxyBinary, HaproxyStage
from controller.validation.haproxy.prelude import PRELUDE, PRELUDE_NAME, applies, usable
from controller.validation.sandbox import SANDBOX_DIR
from controller.validation.stage import StageContext
from tests.validation.haproxy.haproxy_kit import VALID, check, errors, render
from tests.validation.syntax.syntax_kit import load_cases, run_haproxy

pytestmark = pytest.mark.haproxy

_PID = re.compile(r"\(\d+\)")


def _files(config: str | bytes) -> FileSet:
    content = config.encode() if isinstance(config, str) else config
    return FileSet.of([FileEntry("haproxy.cfg", FileKind.CONFIG, content)])


@pytest.mark.parametrize(
    "line",
    [
        "    httpclient.ssl.verify required",
        "    httpclient.ssl.ca-file /etc/ssl/certs/ca-certificates.crt",
        "    httpclient.resolvers.disabled on",
        "    setenv HC verify",
        "    presetenv HC verify",
        "    resetenv HOME",
        "    unsetenv HC",
        "    # a comment naming httpclient counts too: no parsing, only the bytes",
    ],
)
def test_a_configuration_naming_the_http_client_or_setting_variables_gets_none(
    line: str,
) -> None:
    config = VALID.replace("global\n", f"global\n{line}\n")
    assert applies(_files(VALID))
    assert not applies(_files(config))


def test_the_last_answer_is_reused_only_for_the_same_bytes() -> None:
    """The answer is remembered for the last configuration: a configuration of the same
    length that differs only in a word the prelude cares about must not get it."""
    named = VALID.replace("global\n", "global\n    setenv A b\n")
    plain = VALID.replace("global\n", "global\n    maxconn 13\n")
    assert len(named) == len(plain)
    for _ in range(2):
        assert applies(_files(plain))
        assert applies(_files(plain.encode()))  # equal bytes, another object
        assert not applies(_files(named))
        assert not applies(_files(named.encode()))


def test_a_file_set_without_a_main_configuration_gets_none() -> None:
    files = FileSet.of([FileEntry("maps/hosts.map", FileKind.MAP, b"a b\n")])
    assert not applies(files)


def test_both_real_binaries_take_the_prelude(haproxy_bin: str) -> None:
    binary = HaproxyBinary.detect(haproxy_bin)
    assert usable(binary, ("-dr",))


def test_a_binary_that_refuses_the_prelude_checks_without_it(tmp_path: Path) -> None:
    """A stand-in for a build without OpenSSL (none is installed here): it accepts the probe's
    configuration alone and refuses it with the prelude, as such a build refuses the unknown
    keyword."""
    script = tmp_path / "haproxy"
    script.write_text(
        "#!/bin/sh\n"
        f'case "$*" in *{PRELUDE_NAME}*) echo "unknown keyword" >&2; exit 1;; esac\n'
        'echo "Configuration file is valid"\n'
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    binary = HaproxyBinary(path=str(script), version="2.6.0", family="2.6", build="stand-in")
    assert not usable(binary, ("-dr",))
    argv, extra = HaproxyStage(binary, 5.0).invocation(_files(VALID))
    assert PRELUDE_NAME not in argv and not extra


async def test_the_stage_gives_the_prelude_first_and_the_candidate_unchanged(
    haproxy_bin: str,
) -> None:
    stage = HaproxyStage(HaproxyBinary.detect(haproxy_bin), 10.0)
    out = await stage.run(StageContext(render=render(VALID)))
    assert errors(out) == []
    argv, extra = stage.invocation(_files(VALID))
    assert argv[argv.index("-C") + 1] == SANDBOX_DIR
    assert argv[argv.index(PRELUDE_NAME) - 1] == "-f"
    assert argv.index(PRELUDE_NAME) < argv.index("haproxy.cfg")
    assert extra == {PRELUDE_NAME: PRELUDE}


async def test_an_explicit_http_client_option_is_checked_as_written(haproxy_bin: str) -> None:
    """Without the prelude the option keeps its meaning: HAProxy tries the CA file it names
    and says it cannot (2.6 fails the check; 2.8 alerts and carries on, ``W4010``). With the
    prelude's ``verify none`` it would not even try."""
    bad = VALID.replace("global\n", "global\n    httpclient.ssl.ca-file certs/missing.pem\n")
    out = await check(haproxy_bin, render(bad))
    assert any("missing.pem" in d.message for d in out.diagnostics), out.diagnostics
    good = VALID.replace("global\n", "global\n    httpclient.ssl.verify required\n")
    assert errors(await check(haproxy_bin, render(good))) == []


@pytest.mark.slow
def test_with_the_prelude_every_corpus_configuration_checks_the_same(haproxy_bin: str) -> None:
    """Over the shared corpus (valid and invalid), wherever the stage would use the prelude:
    the same exit status and the very same messages, with and without it."""
    compared = 0
    for case in load_cases():
        if not applies(_files(case.content)):
            continue
        without = run_haproxy(haproxy_bin, case.content)
        with_it = run_haproxy(haproxy_bin, case.content, first=(PRELUDE_NAME, PRELUDE))
        assert with_it.accepted == without.accepted, case.name
        assert _PID.sub("", with_it.output) == _PID.sub("", without.output), case.name
        compared += 1
    assert compared >= 80
