"""htc local's console completes a template finding with the config file's line
(controller.local.app.config_file_origin), and builds the file's line index only when a
finding first needs it: the index of the quickstart's config is about 1.2 MB, held for
nothing by a run that never shows such a finding."""

from __future__ import annotations

import shutil
from pathlib import Path

from controller.diagnostics import TemplateLocation
from controller.local.app import config_file_origin
from controller.spec.loader import load_config

QUICKSTART = Path(__file__).resolve().parents[2] / "examples" / "quickstart" / "config.yaml"


def test_the_line_index_is_built_on_first_use_from_the_text_read_at_first(
    tmp_path: Path,
) -> None:
    file = tmp_path / "config.yaml"
    shutil.copy(QUICKSTART, file)
    config, _ = load_config(file)
    assert config is not None
    origin = config_file_origin(config.spec, file)
    assert origin is not None and not origin.indexed  # type: ignore[attr-defined]
    file.write_text("\n" * 40 + QUICKSTART.read_text())  # edited after the spec was read
    located = origin(TemplateLocation(template="haproxy.cfg", line=2))
    assert origin.indexed  # type: ignore[attr-defined]
    block = QUICKSTART.read_text().split("\n").index("  haproxyConfig:") + 2  # `template: |`
    assert located.file is not None and located.file.endswith("config.yaml")
    assert located.file_line == block + 2  # template line 2 of the literal block
    unknown = TemplateLocation(template="no-such-template", line=1)
    assert origin(unknown) == unknown


def test_a_file_without_exactly_one_config_locates_nothing(tmp_path: Path) -> None:
    file = tmp_path / "config.yaml"
    shutil.copy(QUICKSTART, file)
    config, _ = load_config(file)
    assert config is not None
    file.write_text(QUICKSTART.read_text() + "\n---\n" + QUICKSTART.read_text())
    origin = config_file_origin(config.spec, file)
    assert origin is not None
    where = TemplateLocation(template="haproxy.cfg", line=2)
    assert origin(where) == where
    assert config_file_origin(config.spec, tmp_path / "gone.yaml") is None
