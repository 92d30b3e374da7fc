"""``python -m controller.diagnostics docs`` prints docs/diagnostics.md; ``ids`` prints
controller/diagnostics/ids.py (the ``RuleId`` type); ``titles`` prints the id → title snapshot
that ``tests/diagnostics`` freezes."""

from __future__ import annotations

import sys

from controller.diagnostics.catalog import rule_id_module, rules_markdown, titles


def main(argv: list[str]) -> int:
    if argv == ["docs"]:
        sys.stdout.write(rules_markdown())
        return 0
    if argv == ["ids"]:
        sys.stdout.write(rule_id_module())
        return 0
    if argv == ["titles"]:
        sys.stdout.write(titles())
        return 0
    print("usage: python -m controller.diagnostics docs|ids|titles", file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
