"""Every file a configuration names must be a file of the file set.

HAProxy opens whatever path a directive names, at parse time and with the rights of the
process: ``errorfile 503 /etc/shadow`` would put a secret into an HTTP response, and
``crt ../../other-tenant/key.pem`` would borrow someone else's key. So a reference must be
relative, must not climb with ``..``, and — resolved the way HAProxy resolves it — must name a
file the file set contains. HAProxy resolves a relative path against its working directory,
which is the deploy directory (``-C``), optionally moved by ``default-path``; ``crt``,
``ca-file``/``crl-file``/``ca-verify-file`` and ``key`` are prefixed with ``crt-base``,
``ca-base`` and ``key-base``; ``crt-list`` is not prefixed, but the certificates listed inside
a crt-list are (checked here too, with the crt-list file as location).

Sample expressions name files too: the ``map*`` converters their map file, and
``jwt_verify(<alg>,<key>)`` its key, which HAProxy (2.5+) loads as a public key or certificate
while parsing (2.6 opens it even when the algorithm is HMAC and the key a secret). Their
arguments are read the way HAProxy's argument parser reads them, quotes and escapes included,
so that a quoted comma or bracket cannot cut the path short of what HAProxy opens.

Not file references: sockets and run-time paths (``stats socket``, ``log``, ``unix-bind``,
``pidfile``, ``chroot``), URLs (``errorloc``), map names used by ``set-map()``/``add-acl()``
(HAProxy creates those in memory), ``fcgi-app docroot`` (a path on the application server),
and ``parse-resolv-conf`` (always the system resolver file). Files HAProxy may create or that
appear at run time (``server-state-file``, ``stats-file``, ``acme`` ``account-key``) must stay
inside the deploy directory but need not be rendered.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from enum import Enum
from itertools import pairwise

from controller.diagnostics import Diagnostic, Location, Phase, RuleId, make
from controller.render import FileSet
from controller.validation.parsed import Directive, ParsedConfig, Token
from controller.validation.syntax.tokenizer import tokenize

__all__ = [
    "BUNDLE_SUFFIXES",
    "CONVERTER_MARKS",
    "OPTION_LINES",
    "REF_KEYWORDS",
    "SSL_PATH_OPTIONS",
    "FileRef",
    "Need",
    "check_file_refs",
    "file_references",
]


class Need(Enum):
    FILE = "file"
    FILE_OR_DIR = "file or directory"
    DIR = "directory"
    INSIDE = "path inside the deploy directory"
    """May be absent: HAProxy creates it, or it appears at run time."""


@dataclass(frozen=True, slots=True)
class FileRef:
    """One path a directive names, resolved the way HAProxy would resolve it."""

    file: str
    """The file whose line names the path (the config, or a crt-list)."""
    line: int
    directive: str
    option: str
    token: Token
    need: Need
    candidates: tuple[str, ...] = ()
    """Deploy-relative paths HAProxy may open; the first is the likeliest."""
    problem: tuple[RuleId, str] | None = None
    """(rule id, message) when the path cannot be inside the file set at all."""


# Path-taking options of bind/server-like lines and crt-list entries: option → (base, need).
# A base ending in "?" means HAProxy's prefixing is not certain: either form is accepted.
SSL_PATH_OPTIONS: Mapping[str, tuple[str, Need]] = {
    "crt": ("crt", Need.FILE_OR_DIR),
    "default-crt": ("crt", Need.FILE_OR_DIR),
    "crt-list": ("", Need.FILE),
    "ca-file": ("ca", Need.FILE),
    "ca-verify-file": ("ca", Need.FILE),
    "crl-file": ("ca", Need.FILE),
    "ca-sign-file": ("ca?", Need.FILE),
    "tls-ticket-keys": ("", Need.FILE),
    "key": ("key", Need.FILE),
    "ocsp": ("crt?", Need.FILE),
    "issuer": ("crt?", Need.FILE),
    "sctl": ("crt?", Need.FILE),
}

# Options of bind/server/... lines that take one value (so the value is not read as an option).
_ONE_VALUE = frozenset(
    {
        "addr",
        "agent-addr",
        "agent-inter",
        "agent-port",
        "agent-send",
        "alpn",
        "backlog",
        "ca-ignore-err",
        "ca-sign-pass",
        "check-alpn",
        "check-proto",
        "check-sni",
        "ciphers",
        "ciphersuites",
        "client-sigalgs",
        "cookie",
        "crt-ignore-err",
        "curves",
        "downinter",
        "ecdhe",
        "error-limit",
        "expose-fd",
        "fall",
        "fastinter",
        "gid",
        "group",
        "guid",
        "guid-prefix",
        "hash-key",
        "id",
        "idle-ping",
        "init-addr",
        "inter",
        "interface",
        "label",
        "level",
        "log-proto",
        "max-reuse",
        "maxconn",
        "maxqueue",
        "minconn",
        "mode",
        "mss",
        "name",
        "namespace",
        "nice",
        "npn",
        "observe",
        "ocsp-update",
        "on-error",
        "on-marked-down",
        "on-marked-up",
        "pool-conn-name",
        "pool-low-conn",
        "pool-max-conn",
        "pool-purge-delay",
        "port",
        "process",
        "proto",
        "proxy-v2-options",
        "quic-cc-algo",
        "quic-socket",
        "redir",
        "resolve-net",
        "resolve-opts",
        "resolve-prefer",
        "resolvers",
        "rise",
        "severity-output",
        "shard",
        "shards",
        "sigalgs",
        "slowstart",
        "sni",
        "source",
        "ssl-max-ver",
        "ssl-min-ver",
        "tcp-ut",
        "thread",
        "track",
        "uid",
        "user",
        "usesrc",
        "verify",
        "verifyhost",
        "weight",
        "ws",
        "alias",
    }
)

# keyword → number of positional words before options start.
OPTION_LINES: Mapping[str, int] = {
    "bind": 1,
    "dgram-bind": 1,
    "server": 2,
    "default-server": 0,
    "server-template": 3,
    "peer": 2,
    "ssl-f-use": 0,
    "load": 0,  # crt-store
}

# Global (or any-section) keywords whose first argument is a path: keyword → (base, need).
_PATH_KEYWORDS: Mapping[str, tuple[str, Need]] = {
    "lua-load": ("", Need.FILE),
    "lua-load-per-thread": ("", Need.FILE),
    "h1-case-adjust-file": ("", Need.FILE),
    "ssl-dh-param-file": ("", Need.FILE),
    "issuers-chain-path": ("", Need.DIR),
    "httpclient.ssl.ca-file": ("ca?", Need.FILE),
    "51degrees-data-file": ("", Need.FILE),
    "wurfl-data-file": ("", Need.FILE),
    "deviceatlas-json-file": ("", Need.FILE),
    "wurfl-patch-file": ("", Need.FILE),
    "server-state-file": ("state", Need.INSIDE),
    "server-state-file-name": ("state", Need.INSIDE),
    "stats-file": ("", Need.INSIDE),
    "account-key": ("", Need.INSIDE),
    "lua-prepend-path": ("", Need.INSIDE),
}
#: Keywords of _PATH_KEYWORDS whose every argument is a path, not only the first:
#: ``wurfl-patch-file`` loads each patch file it lists.
_PATH_LISTS = frozenset({"wurfl-patch-file"})

_BASES: Mapping[str, str] = {
    "crt-base": "crt",
    "ca-base": "ca",
    "key-base": "key",
    "server-state-base": "state",
}

_HTTP_RULES = frozenset({"http-request", "http-response", "http-after-response"})
_RESPONSE_ACTIONS = frozenset({"return", "deny", "tarpit"})
_RESPONSE_PATHS = frozenset({"file", "lf-file", "errorfile"})
_RESPONSE_VALUES = {
    "status": 1,
    "content-type": 1,
    "string": 1,
    "lf-string": 1,
    "hdr": 2,
    "deny_status": 1,
    "errorfiles": 1,
}
_ACL_VALUE_FLAGS = frozenset({"-m", "-u"})

#: Converters that name a file HAProxy opens while parsing → (argument index, base, option):
#: the map file of ``map``, ``map_<match>`` and ``map_<match>_<output>``, and the key of
#: ``jwt_verify(<alg>,<key>)``. HAProxy 3.x also accepts there the name of a certificate a
#: ``crt-store`` loaded; any value is held to be a file of the file set all the same, which can
#: only refuse too much. Whether 3.x prefixes a key it loads with ``crt-base`` is not certain,
#: so either form is accepted (both lie inside the deploy directory).
_FILE_CONVERTERS: Mapping[str, tuple[int, str, str]] = {
    "map": (0, "", "map()"),
    "jwt_verify": (1, "crt?", "jwt_verify()"),
}
_FILE_CONVERTER = re.compile(r",\s*(map(?:_[a-z]+){0,2}|jwt_verify)\(")
#: Substrings a word must contain for a file-naming converter to be in it (one per name
#: family of _FILE_CONVERTER); the shortcut in file_references and the lean gate test them.
CONVERTER_MARKS = ("map", "jwt_verify")
#: What a backslash followed by the key stands for in a converter argument.
_ARG_ESCAPES: Mapping[str, str] = {
    "\\": "\\",
    " ": " ",
    '"': '"',
    "'": "'",
    "r": "\r",
    "n": "\n",
    "t": "\t",
}

#: Keywords _refs_of looks at by name, apart from the option lines: a directive whose keyword
#: is none of these (nor an option line with a path option) can only name a file through a
#: ``{ ... }`` ACL or a file-naming converter (CONVERTER_MARKS) in one of its words.
REF_KEYWORDS = frozenset(
    {
        *_BASES,
        *_PATH_KEYWORDS,
        *_HTTP_RULES,
        "default-path",
        "errorfile",
        "acl",
        "filter",
        "http-error",
    }
)
if REF_KEYWORDS & set(OPTION_LINES):  # the shortcut in file_references relies on it
    raise RuntimeError("option-line keywords must not be named file-reference keywords")

_INVALID = "\x00invalid"  # marker for a base directory that was refused

#: Section text hash → True when the section names no file and sets no base directory.
#: Whether a directive references a file does not depend on the resolution state (only where
#: it resolves does), so such a section is skipped the next time: a warm run only reads the
#: sections that reference files or set bases.
_SILENT: dict[str, bool] = {}
_SILENT_MAX = 50_000


def _remember(text_hash: str, silent: bool) -> None:
    if len(_SILENT) >= _SILENT_MAX:
        _SILENT.clear()
    _SILENT[text_hash] = silent


@dataclass
class _State:
    """Path-resolution state that HAProxy carries from line to line."""

    config_dir: str
    cwd: str = ""
    crt: str = ""
    ca: str = ""
    key: str = ""
    state: str = ""
    store_crt: str | None = None  # crt-store sections have their own crt-base/key-base
    store_key: str | None = None
    refused: dict[str, str] = field(default_factory=dict)
    """Base name → why the base directory it names was refused (for the references)."""

    def base(self, name: str) -> str:
        if name == "crt" and self.store_crt is not None:
            return self.store_crt
        if name == "key" and self.store_key is not None:
            return self.store_key
        return str(getattr(self, name))


def file_references(parsed: ParsedConfig, files: FileSet | None = None) -> list[FileRef]:
    """All paths the configuration names, in file order, resolved against the deploy layout.

    When ``files`` is given, crt-lists found in it are read for the certificates they name.
    """
    out: list[FileRef] = []
    st = _State(config_dir=_dirname(parsed.file))
    plain = not parsed.macros  # then a section's directives follow from its text alone
    for section in parsed.sections:
        st.store_crt = st.store_key = None
        if plain and _SILENT.get(section.text_hash):
            continue
        before = len(out)
        sets_state = False
        for d in section.directives:
            tokens = d.tokens
            kw = tokens[0].value
            sets_state = sets_state or kw in _BASES or kw == "default-path"
            # A shortcut for the directives _refs_of certainly finds nothing in (most lines
            # of a never-seen section): it must stay a superset of _refs_of's conditions.
            if kw not in REF_KEYWORDS:
                maybe = False
                if kw in OPTION_LINES:
                    for t in tokens:
                        if t.value in SSL_PATH_OPTIONS:
                            maybe = True
                            break
                if not maybe:
                    for t in tokens:
                        v = t.value
                        if v == "{" or "map" in v or "jwt_verify" in v:  # CONVERTER_MARKS
                            maybe = True
                            break
                if not maybe:
                    continue
            out.extend(_refs_of(d, section.keyword, st))
        if plain:
            _remember(section.text_hash, len(out) == before and not sets_state)
    if files is not None:
        for ref in list(out):
            if ref.option == "crt-list" and ref.problem is None:
                entry = files.get(ref.candidates[0]) if ref.candidates else None
                if entry is not None:
                    out.extend(_crt_list_refs(entry.path, entry.content, st))
    return out


def check_file_refs(parsed: ParsedConfig, files: FileSet) -> list[Diagnostic]:
    """Errors for every file reference that is absolute, escapes, or is not in ``files``."""
    present = set(files.files)
    dirs = _directories(present)
    out: list[Diagnostic] = []
    for ref in file_references(parsed, files):
        if ref.problem is not None:
            rule_id, reason = ref.problem
            out.append(_diag(rule_id, ref, reason))
            continue
        if ref.need is Need.INSIDE or _exists(ref, present, dirs):
            continue
        wanted = ref.candidates[0] if ref.candidates else ref.token.value
        out.append(_diag("E2203", ref, f"{ref.need.value} '{wanted}' is not in the file set"))
    return out


# -- extraction ----------------------------------------------------------------------------


def _refs_of(d: Directive, section: str, st: _State) -> Iterator[FileRef]:
    tokens = d.tokens
    kw = tokens[0].value
    if kw in _BASES and len(tokens) > 1:
        yield from _set_base(d, section, st, _BASES[kw])
        return
    if kw == "default-path":
        yield from _default_path(d, st)
        return
    if kw == "errorfile" and len(tokens) > 2:
        yield _ref(d, "errorfile", tokens[2], "", Need.FILE, st)
    elif kw in _PATH_KEYWORDS and len(tokens) > 1:
        value = tokens[1].value
        if not (kw == "server-state-file-name" and value == "use-backend-name") and not (
            kw == "httpclient.ssl.ca-file" and value.startswith("@")
        ):
            base, need = _PATH_KEYWORDS[kw]
            for tok in tokens[1:] if kw in _PATH_LISTS else tokens[1:2]:
                yield _ref(d, kw, tok, base, need, st)
    elif kw in OPTION_LINES and (kw != "load" or section == "crt-store"):
        yield from _options(d, kw, tokens[1 + OPTION_LINES[kw] :], st)
    elif kw == "acl" and len(tokens) > 3:
        yield from _acl_flags(d, tokens[3:], st)
    elif kw == "filter":
        for prev, tok in pairwise(tokens):
            if prev.value == "config":
                yield _ref(d, "config", tok, "", Need.FILE, st)
    if kw in _HTTP_RULES and len(tokens) > 1 and tokens[1].value in _RESPONSE_ACTIONS:
        yield from _response_files(d, tokens[2:], st)
    elif kw == "http-error":
        yield from _response_files(d, tokens[1:], st)
    for i, tok in enumerate(tokens):
        if tok.value == "{" and i + 2 < len(tokens):
            yield from _acl_flags(d, tokens[i + 2 :], st, until_brace=True)
        v = tok.value
        if "map" in v or "jwt_verify" in v:  # CONVERTER_MARKS
            yield from _converter_files(d, tok, st)


def _options(d: Directive, kw: str, tokens: Iterable[Token], st: _State) -> Iterator[FileRef]:
    name = "crt-list" if kw == "crt-list" else ""
    it = iter(tokens)
    for tok in it:
        option = tok.value
        spec = SSL_PATH_OPTIONS.get(option)
        if spec is not None:
            path = next(it, None)
            if path is None:
                return
            if path.value.startswith("@") and option in ("crt", "default-crt", "ca-file"):
                continue  # "@system-ca", "@store/cert": not paths
            yield _ref(d, option, path, spec[0], spec[1], st, name)
        elif option in _ONE_VALUE:
            next(it, None)


def _acl_flags(
    d: Directive, tokens: Iterable[Token], st: _State, until_brace: bool = False
) -> Iterator[FileRef]:
    it = iter(tokens)
    for tok in it:
        flag = tok.value
        if flag == "--" or not flag.startswith("-") or (until_brace and flag == "}"):
            return
        if flag == "-f":
            path = next(it, None)
            if path is not None:
                yield _ref(d, "-f", path, "", Need.FILE, st)
        elif flag in _ACL_VALUE_FLAGS:
            next(it, None)


def _response_files(d: Directive, tokens: Iterable[Token], st: _State) -> Iterator[FileRef]:
    it = iter(tokens)
    for tok in it:
        word = tok.value
        if word in ("if", "unless"):
            return
        if word in _RESPONSE_PATHS:
            path = next(it, None)
            if path is not None:
                yield _ref(d, word, path, "", Need.FILE, st)
        else:
            for _ in range(_RESPONSE_VALUES.get(word, 0)):
                next(it, None)


def _converter_files(d: Directive, tok: Token, st: _State) -> Iterator[FileRef]:
    """The files the converters in one word name (see _FILE_CONVERTERS).

    In a log-format string the expressions start at ``%[``; where one ends is for HAProxy's
    sample parser to say (a quoted ``]`` does not end it), so the rest of the word is read
    whole: that can only find more. A word with an environment variable is read too (the
    policy refuses it unless allowed): an argument that contains ``$`` is then unverifiable.
    """
    value = tok.value
    if "%[" in value:
        value = value[value.index("%[") :]
    for m in _FILE_CONVERTER.finditer(value):
        name = m.group(1)
        index, base, option = _FILE_CONVERTERS["map" if name.startswith("map") else name]
        args = _converter_args(value, m.end())
        if len(args) > index and args[index]:
            path = args[index]
            fake = Token(path, tok.raw, tok.column, tok.end_column, tok.has_env and "$" in path)
            yield _ref(d, option, fake, base, Need.FILE, st)


def _converter_args(text: str, start: int) -> list[str]:
    """The arguments of the converter whose ``(`` ends just before ``start``, read as
    HAProxy's argument parser (``make_arg_list``) reads them: ``"`` and ``'`` quote and are
    dropped, a backslash outside single quotes escapes a backslash, blank or quote (or writes
    ``\\r``, ``\\n``, ``\\t``), and only a ``,`` or ``)`` outside quotes ends an argument.

    A simpler reading would let ``map('maps/a.map,/../../etc/passwd')`` pass as
    ``maps/a.map`` while HAProxy opens the whole path. Blanks are kept, as HAProxy keeps them.
    """
    args: list[str] = []
    out: list[str] = []
    squote = dquote = False
    i, end = start, len(text)
    while i < end:
        c = text[i]
        if c == '"' and not squote:
            dquote = not dquote
        elif c == "'" and not dquote:
            squote = not squote
        elif c == "\\" and not squote and i + 1 < end:
            escaped = _ARG_ESCAPES.get(text[i + 1])
            if escaped is None:
                out.append(c)  # a lone backslash: kept, and the next character read as usual
            else:
                out.append(escaped)
                i += 1
        elif c in ",)" and not squote and not dquote:
            args.append("".join(out))
            out = []
            if c == ")":
                return args
        else:
            out.append(c)
        i += 1
    args.append("".join(out))  # unterminated: HAProxy refuses it; what is there is checked
    return args


def _crt_list_refs(path: str, content: bytes, st: _State) -> Iterator[FileRef]:
    text = content.decode("utf-8", "surrogateescape")
    for number, line in enumerate(text.split("\n"), 1):
        tokens, error = tokenize(line, line_no=number, file=path)
        if error is not None or not tokens or tokens[0].value.startswith("#"):
            continue
        d = Directive(path, number, tokens)
        yield _ref(d, "certificate", tokens[0], "crt", Need.FILE_OR_DIR, st, "crt-list")
        options: list[Token] = []
        inside = False
        for tok in tokens[1:]:
            word = tok.value
            if word.startswith("["):
                inside, word = True, word[1:]
            closing = word.endswith("]")
            if closing:
                word = word[:-1]
            if inside and word:
                options.append(Token(word, tok.raw, tok.column, tok.end_column))
            if closing:
                break
        yield from _options(d, "crt-list", options, st)


# -- resolution ----------------------------------------------------------------------------


def _set_base(d: Directive, section: str, st: _State, name: str) -> Iterator[FileRef]:
    """A base directory. One outside the deploy directory (absolute, or climbing with ``..``)
    is harmless until a reference is resolved against it, so it is not a finding itself:
    each reference that uses it is, naming it (an absolute ``ca-base`` no ``ca-file`` uses
    is what many real configurations carry)."""
    tok = d.tokens[1]
    problem = _path_problem(tok)
    resolved = _INVALID if problem else _normalize(tok.value)
    if problem:
        st.refused[name] = f"'{d.keyword} {tok.value}' at line {d.line}: {problem[1]}"
    if False:  # a generator, like the other directive readers
        yield
    if section == "crt-store" and name in ("crt", "key"):
        if name == "crt":
            st.store_crt = resolved
        else:
            st.store_key = resolved
    else:
        setattr(st, name, resolved)


def _default_path(d: Directive, st: _State) -> Iterator[FileRef]:
    tokens = d.tokens
    mode = tokens[1].value if len(tokens) > 1 else ""
    if mode == "current":
        st.cwd = ""
    elif mode == "config":
        st.cwd = st.config_dir
    elif mode == "parent":
        st.cwd = _INVALID
        yield FileRef(
            d.file,
            d.line,
            "default-path",
            "",
            tokens[1],
            Need.DIR,
            (),
            ("E2202", "relative paths would resolve outside the deploy directory"),
        )
    elif mode == "origin" and len(tokens) > 2:
        problem = _path_problem(tokens[2])
        st.cwd = _INVALID if problem else _normalize(tokens[2].value)
        if problem:
            yield FileRef(
                d.file, d.line, "default-path", "origin", tokens[2], Need.DIR, (), problem
            )


def _ref(
    d: Directive, option: str, tok: Token, base: str, need: Need, st: _State, name: str = ""
) -> FileRef:
    name = name or d.keyword
    problem = _path_problem(tok)
    if problem is not None:
        return FileRef(d.file, d.line, name, option, tok, need, (), problem)
    if st.cwd == _INVALID:
        return FileRef(d.file, d.line, name, option, tok, need, (), _MOVED)
    optional = base.endswith("?")
    base_dir = st.base(base.rstrip("?")) if base else ""
    if base_dir == _INVALID:
        if not optional:
            why = st.refused.get(base.rstrip("?"), "")
            problem = (_BAD_BASE[0], f"{_BAD_BASE[1]} ({why})" if why else _BAD_BASE[1])
            return FileRef(d.file, d.line, name, option, tok, need, (), problem)
        base_dir = ""
    candidates = [_join(st.cwd, base_dir, tok.value)]
    if optional and base_dir:
        candidates.append(_join(st.cwd, "", tok.value))
    return FileRef(d.file, d.line, name, option, tok, need, tuple(candidates))


_MOVED: tuple[RuleId, str] = (
    "E2202",
    "an earlier 'default-path' moved relative paths outside the deploy directory",
)
_BAD_BASE: tuple[RuleId, str] = (
    "E2202",
    "the base directory it is resolved against is outside the deploy directory",
)


def _path_problem(tok: Token) -> tuple[RuleId, str] | None:
    value = tok.value
    if tok.has_env:
        return ("E2204", "the path depends on an environment variable")
    if value.startswith("/"):
        return ("E2201", "absolute path; only files of the file set may be referenced")
    if ".." in value.split("/"):
        return ("E2202", "the path climbs out with '..'")
    return None


def _normalize(path: str) -> str:
    return "/".join(p for p in path.split("/") if p not in ("", "."))


def _join(*parts: str) -> str:
    return _normalize("/".join(p for p in parts if p))


def _dirname(path: str) -> str:
    return path.rsplit("/", 1)[0] if "/" in path else ""


def _directories(paths: Collection[str]) -> set[str]:
    dirs = {""}
    for p in paths:
        parts = p.split("/")
        for i in range(1, len(parts)):
            dirs.add("/".join(parts[:i]))
    return dirs


#: Options naming a certificate that may be a multi-certificate bundle: HAProxy loads
#: ``site.pem.rsa``, ``site.pem.ecdsa`` and ``site.pem.dsa`` (each with its own ``.key``,
#: ``.ocsp``, ``.issuer`` and ``.sctl`` siblings) for ``crt site.pem`` when ``site.pem`` itself
#: does not exist.
_BUNDLE_OPTIONS = frozenset({"crt", "default-crt", "certificate"})
BUNDLE_SUFFIXES = (".rsa", ".ecdsa", ".dsa")


def _exists(ref: FileRef, present: set[str], dirs: set[str]) -> bool:
    bundle = ref.option in _BUNDLE_OPTIONS
    for c in ref.candidates:
        if ref.need is Need.FILE and c in present:
            return True
        if bundle and any(c + suffix in present for suffix in BUNDLE_SUFFIXES):
            return True
        if ref.need is Need.DIR and c in dirs:
            return True
        if ref.need is Need.FILE_OR_DIR and (c in present or c in dirs):
            return True
    return False


def _diag(rule_id: RuleId, ref: FileRef, reason: str) -> Diagnostic:
    tok = ref.token
    what = ref.directive if ref.option in ("", ref.directive) else f"{ref.directive} {ref.option}"
    return make(
        rule_id,
        Phase.SYNTAX,
        f"'{what}' '{tok.value}' at line {ref.line}: {reason}",
        location=Location(
            file=ref.file,
            line=ref.line,
            column=tok.column,
            end_line=ref.line,
            end_column=tok.end_column,
        ),
    )
