"""`htc crd`: print the CustomResourceDefinition, or refresh every file derived from the models.

The CRD and the API reference are derived from the pydantic models, so they are written, not
edited: ``--write`` puts the same CRD text into the raw manifests (``deploy/crds/``) and the Helm
chart (``charts/.../crds/``) and regenerates ``docs/api.md``; tests fail when any of them differs
from what the models produce.
"""

from __future__ import annotations

from pathlib import Path

import click

from controller.spec import CRD_FILE, DOC_PATH, generate_api_docs, render_crd_yaml

CRD_DIRS = (Path("deploy/crds"), Path("charts/haproxy-template-controller/crds"))
"""Where ``--write`` puts the CRD, relative to the repository root."""


def crd_paths(root: Path) -> list[Path]:
    """The committed CRD files under a repository root."""
    return [root / d / CRD_FILE for d in CRD_DIRS]


def generated_files(root: Path) -> dict[Path, str]:
    """Every committed file derived from the models, with the text it must have."""
    crd = render_crd_yaml()
    files = {path: crd for path in crd_paths(root)}
    files[root / DOC_PATH] = generate_api_docs()
    return files


@click.command(name="crd")
@click.option(
    "--write",
    is_flag=True,
    help="Write the CRD into deploy/crds/ and the chart's crds/, and docs/api.md, "
    "instead of printing the CRD.",
)
@click.option(
    "--root",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("."),
    show_default=True,
    help="Repository root that --write writes under.",
)
def command(write: bool, root: Path) -> None:
    """Print the HAProxyTemplateConfig CustomResourceDefinition as YAML."""
    if not write:
        click.echo(render_crd_yaml(), nl=False)
        return
    if not (root / "deploy").is_dir():
        raise click.UsageError(f"{root} has no deploy/ directory; run from the repository root")
    for path, text in generated_files(root).items():
        path.parent.mkdir(parents=True, exist_ok=True)
        changed = not path.exists() or path.read_text(encoding="utf-8") != text
        if changed:
            path.write_text(text, encoding="utf-8")
        click.echo(f"{'wrote' if changed else 'unchanged'} {path}")
