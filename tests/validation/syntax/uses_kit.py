"""The "uses" corpus (tests/corpus/uses/*.txt): one line per case, put into a fixed frame.

Each case file holds lines of the form ``MARK PLACE TEXT``:

* ``MARK`` — ``+`` a use every binary accepts, ``-`` one every binary refuses, ``+2.8`` one
  that 2.8 accepts and 2.6 refuses (a keyword or argument added between them);
* ``PLACE`` — where ``TEXT`` goes in the frame: ``fe`` (the frontend), ``ex`` (the frontend,
  with ``expose-experimental-directives`` in global), ``lua`` (the frontend, with
  ``files/actions.lua`` loaded in global), ``luatcp`` (the same, the frontend in TCP mode: Lua
  TCP services are refused in HTTP proxies), ``spoe`` (the frontend, with the SPOE filter of
  ``files/spoe.conf`` and its agents' backend), ``be`` (a backend), ``gl`` (global),
  ``df`` (defaults), ``top`` (whole sections after the frame; ``\\n`` in ``TEXT`` separates
  lines);
* ``TEXT`` — the line, written from the manual's description of the keyword.

Lines starting with ``#`` are comments; ``# family: NAME`` names the family the following
lines belong to (for the coverage counts).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path

USES = Path(__file__).resolve().parents[3] / "tests" / "corpus" / "uses"

FRAME = """\
global
    maxconn 100
{gl}
defaults
    mode http
    timeout connect 5s
    timeout client 5s
    timeout server 5s
{df}
userlist users
    group ops
    user alice insecure-password secret groups ops
resolvers dns
    nameserver ns1 127.0.0.1:53
cache pages
    total-max-size 4
http-errors errs
    errorfile 503 files/503.http
backend be
    stick-table type ip size 1k store gpc0,gpc1,gpt0,http_req_rate(10s),conn_cur
    server s1 127.0.0.1:8081
backend bx
{be}
    server s2 127.0.0.1:8082
frontend fe
    bind 127.0.0.1:8080
    declare capture request len 32
    declare capture response len 32
    stick-table type ip size 1k store gpc0,gpc1,gpt0,http_req_rate(10s),conn_cur
{fe}
    default_backend be
{top}
"""

_FRAME_PARTS = ("fe", "be", "gl", "df", "top")
PLACES = ("fe", "ex", "lua", "luatcp", "spoe", "be", "gl", "df", "top")

#: The frontend variants: place → (global lines, frontend lines before the case, sections).
_VARIANTS: dict[str, tuple[str, str, str]] = {
    "ex": ("expose-experimental-directives", "", ""),
    "lua": ("lua-load files/actions.lua", "", ""),
    "luatcp": ("lua-load files/actions.lua", "mode tcp", ""),
    "spoe": (
        "",
        "filter spoe engine agents config files/spoe.conf",
        "backend spoe-agents\n    mode tcp\n    server agent 127.0.0.1:12345",
    ),
}


@dataclass(frozen=True)
class Use:
    file: str
    lineno: int
    family: str
    place: str
    text: str
    accept: frozenset[str]
    """The version families that accept it."""

    @property
    def key(self) -> str:
        """The keyword (and action) the case is about: ``http-request set-header``."""
        words = self.text.split()
        if self.place == "top":
            return words[0]
        if self.family == "converters":  # the converter applied last
            return "converter " + _segments(words[-1])[-1].split("(")[0]
        if "fetch" in self.family:  # the fetch the expression starts with
            expr = words[2] if words[0] == "acl" else words[-1]
            return "fetch " + _segments(expr)[0].split("(")[0]
        head = words[0]
        if head in {"http-request", "http-response", "http-after-response"} and len(words) > 1:
            return f"{head} {words[1].split('(')[0]}"
        if head in {"tcp-request", "tcp-response"} and words[1:2] == ["inspect-delay"]:
            return f"{head} inspect-delay"
        if head in {"tcp-request", "tcp-response"} and len(words) > 2:
            return f"{head} {words[1]} {words[2].split('(')[0]}"
        first_option = {"bind": 2, "server": 3, "default-server": 1, "stats": 3}.get(head)
        if first_option is not None and len(words) > first_option:
            return f"{head} {words[first_option]}"
        return head

    @property
    def name(self) -> str:
        return f"{self.file}:{self.lineno}"

    def config(self) -> bytes:
        parts = {p: "" for p in PLACES}
        text = self.text.replace("\\n", "\n")
        indent = "" if self.place == "top" else "    "
        place = self.place
        lead = ""
        if place in _VARIANTS:
            gl, lead, sections = _VARIANTS[place]
            parts["gl"] = f"    {gl}" if gl else ""
            parts["top"] = sections
            place = "fe"
        lines = [*([lead] if lead else []), *text.split("\n")]
        parts[place] = "\n".join(indent + line for line in lines)
        return FRAME.format(**{k: v for k, v in parts.items() if k in _FRAME_PARTS}).encode()


def _segments(expr: str) -> list[str]:
    """A sample expression split at the commas between fetch and converters (not those
    between arguments)."""
    parts, depth, start = [], 0, 0
    for i, c in enumerate(expr):
        depth += (c == "(") - (c == ")")
        if c == "," and depth == 0:
            parts.append(expr[start:i])
            start = i + 1
    parts.append(expr[start:])
    return parts


def load_uses() -> list[Use]:
    out: list[Use] = []
    for path in sorted(USES.glob("*.txt")):
        family = path.stem
        for n, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            line = raw.strip()
            if not line:
                continue
            if line.startswith("# family:"):
                family = line.split(":", 1)[1].strip()
                continue
            if line.startswith("#"):
                continue
            mark, place, text = line.split(" ", 2)
            if place not in PLACES:
                raise AssertionError(f"{path.name}:{n}: unknown place {place!r}")
            accept = {
                "+": frozenset({"2.6", "2.8"}),
                "-": frozenset(),
                "+2.8": frozenset({"2.8"}),
            }[mark]
            out.append(Use(path.name, n, family, place, text, accept))
    return out


def coverage(uses: list[Use]) -> dict[str, Counter[str]]:
    """Family → keyword → "valid"/"invalid" counts. Unknown names (``no-such-…``) have no
    valid use by definition and are left out."""
    out: dict[str, Counter[str]] = {}
    for u in uses:
        if u.key.rsplit(" ", 1)[-1].startswith(("no-such", "no_such")):
            continue
        kind = "valid" if u.accept else "invalid"
        out.setdefault(u.family, Counter())[f"{u.key} {kind}"] += 1
    return out
