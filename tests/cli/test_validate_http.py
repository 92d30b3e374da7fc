"""`htc validate --http NAME=FILE`: the same HTTP source content as `htc render`, or exit 2."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from controller.cli import main

CONFIG = """\
apiVersion: haproxy-template.dev/v1alpha1
kind: HAProxyTemplateConfig
metadata: {name: x}
spec:
  httpSources:
    limits: {url: "https://example.test/limits.txt"}
  haproxyConfig:
    template: |
      global
          maxconn {{ http['limits'] | trim | haproxy_arg }}
      defaults
          mode http
          timeout connect 5s
          timeout client 30s
          timeout server 30s
      frontend fe
          bind 127.0.0.1:18080
          http-request return status 200
"""


def _validate(tmp_path: Path, *args: str) -> tuple[int, str, str]:
    config = tmp_path / "config.yaml"
    config.write_text(CONFIG)
    result = CliRunner().invoke(main, ["validate", str(config), *args])
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr


def test_the_content_reaches_the_template_and_the_verdict(haproxy_bin: str, tmp_path: Path) -> None:
    limits = tmp_path / "limits.txt"
    limits.write_text("250\n")
    code, stdout, stderr = _validate(
        tmp_path, "--http", f"limits={limits}", "--haproxy", haproxy_bin, "--format", "json"
    )
    assert code == 0, stdout + stderr
    assert '"valid": true' in stdout
    # the validated file set holds the given content: `maxconn many` is a schema warning
    # (2.6 loads it as 0, 2.8 refuses it), an error with --strict
    limits.write_text("many\n")
    code, stdout, _ = _validate(
        tmp_path, "--http", f"limits={limits}", "--haproxy", haproxy_bin, "--strict"
    )
    assert code == 1 and "maxconn many" in stdout


def test_a_declared_source_without_content_is_exit_2_naming_the_option(tmp_path: Path) -> None:
    code, _, stderr = _validate(tmp_path)
    assert code == 2
    assert "E8005" in stderr and "--http limits=FILE" in stderr


def test_http_does_not_go_with_raw(tmp_path: Path) -> None:
    cfg = tmp_path / "haproxy.cfg"
    cfg.write_text("global\n")
    result = CliRunner().invoke(main, ["validate", "--raw", str(cfg), "--http", "a=b"])
    assert result.exit_code == 2 and "--http" in result.output
