"""``python -m controller.validation.formats schema`` prints the report's JSON Schema."""

from __future__ import annotations

import sys

from controller.validation.formats.json_report import schema_text


def main(argv: list[str]) -> int:
    if argv != ["schema"]:
        print("usage: python -m controller.validation.formats schema", file=sys.stderr)
        return 2
    sys.stdout.write(schema_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
