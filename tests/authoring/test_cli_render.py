"""`htc render` judges inline rules like every other render path."""

from __future__ import annotations

import textwrap
from pathlib import Path

from click.testing import CliRunner

from controller.cli import main

CONFIG = """\
apiVersion: haproxy-template.dev/v1alpha1
kind: HAProxyTemplateConfig
metadata:
  name: t
spec:
  watchedResources:
    ingresses:
      apiVersion: networking.k8s.io/v1
      kind: Ingress
      validate:
        rules:
          - name: dns-hosts
            expression: self.spec.rules.all(r, r.host.matches('^[a-z0-9.-]+$'))
  maps:
    hosts.map:
      template: "{% for i in resources.ingresses.list() %}{{ i.spec.rules[0].host }} x\\n{% endfor %}"
    static.map:
      template: "k v\\n"
  haproxyConfig:
    template: |
      global
          maxconn 10
    validate:
      rules:
        - name: small
          expression: self.lines.size() < 10
"""

INGRESS = """\
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {{name: web, namespace: default}}
spec:
  rules: [{{host: "{host}"}}]
"""


def render(tmp_path: Path, host: str) -> tuple[int, str, Path]:
    config = tmp_path / "config.yaml"
    config.write_text(textwrap.dedent(CONFIG))
    manifests = tmp_path / "resources"
    manifests.mkdir(exist_ok=True)
    (manifests / "ingress.yaml").write_text(INGRESS.format(host=host))
    out = tmp_path / "out"
    result = CliRunner().invoke(
        main, ["render", str(config), "-r", str(manifests), "--out", str(out)]
    )
    return result.exit_code, result.stderr, out


def test_a_failing_object_rule_fails_the_render(tmp_path: Path) -> None:
    code, err, out = render(tmp_path, "evil host")
    assert code == 1
    assert "E5003" in err and "ingresses rule dns-hosts on default/web" in err
    blocked = [line for line in err.splitlines() if "E1008" in line]
    assert len(blocked) == 1 and "maps['hosts.map'] was not rendered" in blocked[0]
    assert not (out / "maps" / "hosts.map").exists()


def test_a_clean_render_passes_its_inline_rules(tmp_path: Path) -> None:
    code, err, out = render(tmp_path, "web.local")
    assert code == 0, err
    assert (out / "maps" / "hosts.map").read_text() == "web.local x\n"
