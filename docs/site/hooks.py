"""mkdocs hook: links from docs/ to files elsewhere in the repository.

The pages are read on a repository browser too, where ``../hack/x.sh`` is a working link. In
the site it would be a broken one, and ``--strict`` rightly fails on broken links, so a link
that leaves docs/ and names a file that exists in the repository becomes the path in code
(``hack/x.sh``); one that names nothing stays a link and fails the build.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
LINK = re.compile(r"\[([^\]]+)\]\((\.\./[^)#\s]+)(#[^)\s]*)?\)")


def on_page_markdown(markdown: str, page: Any, **_: Any) -> str:
    here = (DOCS / page.file.src_path).parent

    def replace(m: re.Match[str]) -> str:
        text, target = m.group(1), m.group(2)
        path = (here / target).resolve()
        if DOCS in path.parents or not path.exists():
            return m.group(0)
        rel = path.relative_to(REPO).as_posix()
        return text if text.strip("`") == rel else f"{text} (`{rel}` in the repository)"

    return LINK.sub(replace, markdown)
