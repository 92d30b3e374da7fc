"""The input steps `htc render` and `htc validate` share: config + manifests → store → render.

Both commands must see exactly the same candidate for the same files, so they share this
code rather than each wiring loader, store and renderer by hand. Problems with the inputs
themselves (unreadable YAML, an invalid HAProxyTemplateConfig, a manifest without a name)
raise :class:`InputError`, which the commands turn into exit code 2; problems of the rendered
result are the pipeline's business.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

import click

from controller.diagnostics import Diagnostic, Location, Phase, make
from controller.render import (
    KIND_DIRS,
    MAIN_CONFIG,
    FileEntry,
    FileKind,
    FileSet,
    RenderResult,
    check_name,
)
from controller.resources import (
    InvalidObject,
    Manifest,
    Store,
    StoreConfigError,
    check_watched,
    collections_for,
    load_manifests,
    object_key,
    object_ref,
    unwatched_note,
)
from controller.spec import KIND, HAProxyTemplateConfig, Locate, load_config_located

if TYPE_CHECKING:
    from controller.validation import RuleSet

__all__ = [
    "InputError",
    "Inputs",
    "echo_diagnostics",
    "http_option",
    "load_inputs",
    "load_raw",
    "read_http",
    "render_inputs",
]


class InputError(Exception):
    """The inputs cannot be used at all; carries the diagnostics that say why."""

    def __init__(self, diagnostics: Sequence[Diagnostic]) -> None:
        self.diagnostics = list(diagnostics)
        super().__init__("; ".join(d.message for d in self.diagnostics))


@dataclass
class Inputs:
    config: HAProxyTemplateConfig
    store: Store
    diagnostics: list[Diagnostic] = field(default_factory=list)
    """Warnings and notes about the inputs (duplicates, objects nothing watches)."""
    locate: Locate | None = None
    """Config field path → its line in the config file, so rule errors point at YAML."""
    http: dict[str, str] = field(default_factory=dict)
    """Content per httpSources name, read from the files given with --http."""
    files: int = 0
    """How many manifest files were read."""
    manifests: int = 0
    """How many objects they held (watched or not)."""


def _where(m: Manifest) -> Location:
    return Location(file=str(m.file), line=m.line)


def _fill(store: Store, manifests: Iterable[Manifest]) -> list[Diagnostic]:
    notes: list[Diagnostic] = []
    errors: list[Diagnostic] = []
    first: dict[tuple[str, tuple[str, str]], Manifest] = {}
    watched = store.watched()
    for m in manifests:
        if m.obj.get("kind") == KIND:
            continue  # the config itself may sit among the resources
        names = collections_for(m.obj, watched)
        if not names:
            notes.append(unwatched_note(m, watched))
            continue
        for name in names:
            key = (name, object_key(m.obj))
            if key in first:
                kept = first[key]
                notes.append(
                    make(
                        "W8013",
                        Phase.SPEC,
                        f"{name} {'/'.join(key[1])} is defined again; keeping the definition "
                        f"at {kept.file}:{kept.line}",
                        location=_where(m),
                        object=object_ref(m.obj),
                    )
                )
                continue
            first[key] = m
            try:
                change = store.apply(name, m.obj)
            except InvalidObject as exc:
                errors.append(make("E8003", Phase.SPEC, str(exc), location=_where(m)))
                continue
            if change is not None:
                notes.extend(change.diagnostics)
    if errors:
        raise InputError(errors)
    return notes


def load_inputs(config_path: Path, resources: Sequence[Path], http: Sequence[str] = ()) -> Inputs:
    """Read the config and every manifest, and fill a store by the config's collections.

    ``http`` holds ``NAME=FILE`` options: the content of each declared httpSources entry
    (nothing is fetched here).
    """
    config, problems, locate = load_config_located(config_path)
    if config is None or problems:
        raise InputError(problems)
    problems = check_watched(config.spec.watched_resources, locate)
    if problems:
        raise InputError(problems)
    contents = read_http(config, http, locate)
    missing = [p for p in resources if not p.exists()]
    if missing:
        raise InputError(
            [
                make(
                    "E8002",
                    Phase.SPEC,
                    f"{p}: no such file or directory",
                    location=Location(file=str(p)),
                )
                for p in missing
            ]
        )
    manifests, bad = load_manifests(list(resources), frozen=True)  # read-only: stored as read
    if bad:
        raise InputError(bad)
    try:
        store = Store.from_spec(config)
    except StoreConfigError as exc:
        raise InputError(exc.diagnostics) from None
    notes = _fill(store, manifests)
    files = len({m.file for m in manifests})
    return Inputs(config, store, notes, locate, contents, files=files, manifests=len(manifests))


def render_inputs(inputs: Inputs, ruleset: RuleSet | None = None) -> RenderResult:
    """Render as reconcile does: the inline rules of the loaded objects first, then of each
    output right after it renders. ``htc render`` must not write, without a word, what the
    controller would refuse; the deferred rules are the pipeline's (``htc validate``)."""
    from controller.validation import ruled_renderer  # heavy; only when rendering

    renderer = ruled_renderer(inputs.config.spec, locate=inputs.locate, ruleset=ruleset)
    return renderer.render(inputs.store.snapshot(), http=inputs.http)


HTTP_OPTION = "--http"

http_option = click.option(
    HTTP_OPTION,
    "http",
    multiple=True,
    metavar="NAME=FILE",
    help="Content of the httpSources entry NAME, read from FILE (repeatable; every declared "
    "source needs one, since nothing is fetched).",
)
"""The option both commands take; :func:`read_http` reads what it names."""


def read_http(
    config: HAProxyTemplateConfig, options: Sequence[str], locate: Locate | None = None
) -> dict[str, str]:
    """Content per declared HTTP source from ``NAME=FILE`` options.

    A render without network cannot fetch, and a template reading ``http['x']`` without
    content would fail with an undefined value far from the cause; so every declared source
    must be given, and a name that is not declared is a typo.
    """
    declared = sorted(config.spec.http_sources)
    problems: list[Diagnostic] = []
    contents: dict[str, str] = {}
    for option in options:
        name, sep, file = option.partition("=")
        if not sep or not name or not file:
            problems.append(_http_problem(f"{HTTP_OPTION} {option!r}: expected NAME=FILE"))
            continue
        if name not in config.spec.http_sources:
            problems.append(
                _http_problem(
                    f"{HTTP_OPTION} {name}: no httpSources entry named {name!r} "
                    f"(declared: {', '.join(declared) or 'none'})"
                )
            )
            continue
        path = Path(file)
        try:
            contents[name] = path.read_text(encoding="utf-8")
        except OSError as exc:
            problems.append(_unreadable(path, f"cannot read: {exc.strerror or exc}"))
        except UnicodeDecodeError as exc:
            problems.append(_unreadable(path, f"not UTF-8 text ({exc.reason})"))
    given = {option.partition("=")[0] for option in options}
    for name in declared:
        if name not in given:
            problems.append(
                _http_problem(
                    f"httpSources entry {name!r} has no content: give it with "
                    f"{HTTP_OPTION} {name}=FILE (nothing is fetched here)",
                    locate(("spec", "httpSources", name)) if locate else None,
                )
            )
    if problems:
        raise InputError(problems)
    return contents


def _http_problem(message: str, location: Location | None = None) -> Diagnostic:
    return make("E8005", Phase.SPEC, message, location=location)


def _unreadable(path: Path, why: str) -> Diagnostic:
    return make("E8002", Phase.SPEC, f"{path}: {why}", location=Location(file=str(path)))


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise InputError([_unreadable(path, f"cannot read: {exc.strerror or exc}")]) from None


#: Extensions of certificate material: PEM files, keys, and the siblings HAProxy loads next
#: to a certificate (``.key``, ``.ocsp``, ``.issuer``, ``.sctl``) or in a multi-certificate
#: bundle (``site.pem.rsa``, ``.ecdsa``, ``.dsa``).
_CERT_SUFFIXES = frozenset(
    {
        ".pem",
        ".crt",
        ".cer",
        ".der",
        ".key",
        ".ocsp",
        ".issuer",
        ".sctl",
        ".rsa",
        ".ecdsa",
        ".dsa",
        ".crl",
    }
)
_KIND_OF_DIR = {sub: kind for kind, sub in KIND_DIRS.items()}


def aux_kind(relative: str) -> FileKind:
    """The kind of an auxiliary file from its place: under ``maps/``, ``certs/`` or
    ``files/`` the folder says; elsewhere the extension (``.map`` a map, certificate
    material a cert, anything else a general file)."""
    top, sep, _ = relative.partition("/")
    if sep and top in _KIND_OF_DIR:
        return _KIND_OF_DIR[top]
    name = relative.rsplit("/", 1)[-1]
    suffix = name[name.rfind(".") :].lower() if "." in name else ""
    if suffix == ".map":
        return FileKind.MAP
    if suffix in _CERT_SUFFIXES:
        return FileKind.CERT
    return FileKind.FILE


def load_raw(config: Path, aux: Path | None = None) -> RenderResult:
    """A hand-written file set: ``config`` becomes haproxy.cfg, and every file under ``aux``
    joins it at its path relative to ``aux`` (``errors/503.http``, ``certs/site.pem.rsa``),
    whatever the folder layout, with its kind inferred by :func:`aux_kind`.

    Hidden files and folders are skipped, and so is ``config`` itself when it lies inside
    ``aux`` (often the directory holding it). A path component that could not name a deployed
    file (see ``check_name``) is refused, as is anything but a plain file or folder.
    """
    entries = [FileEntry(MAIN_CONFIG, FileKind.CONFIG, _read(config))]
    if aux is not None:
        if not aux.is_dir():
            raise InputError([_unreadable(aux, "not a directory")])
        problems: list[Diagnostic] = []
        skip = config.resolve()
        for item in _walk(aux, problems):
            relative = item.relative_to(aux).as_posix()
            if relative == MAIN_CONFIG or item.resolve() == skip:
                continue
            try:
                for part in relative.split("/"):
                    check_name(part)
            except ValueError as exc:
                problems.append(_unreadable(item, str(exc)))
                continue
            entries.append(FileEntry(relative, aux_kind(relative), _read(item)))
        if problems:
            raise InputError(problems)
    return RenderResult(files=FileSet.of(entries))


def _walk(folder: Path, problems: list[Diagnostic]) -> Iterable[Path]:
    for item in sorted(folder.iterdir()):
        if item.name.startswith("."):
            continue
        if item.is_dir():
            yield from _walk(item, problems)
        elif item.is_file():
            yield item
        else:
            problems.append(_unreadable(item, "neither a plain file nor a folder"))


def echo_diagnostics(diagnostics: Iterable[Diagnostic], stream: TextIO | None = None) -> None:
    """One line per finding: ``file:line: ruleId severity message`` (template:line when the
    finding is about a template)."""
    out = stream or sys.stderr
    for d in diagnostics:
        where = ""
        if d.template_location is not None:
            t = d.template_location
            where = t.template + (f":{t.line}" if t.line else "")
            if t.file:
                where = t.file + (f":{t.file_line}" if t.file_line else "") + f" ({where})"
        elif d.location is not None:
            where = d.location.file + (f":{d.location.line}" if d.location.line else "")
            if d.location.line and d.location.column:
                where += f":{d.location.column}"
        print(
            f"{where + ': ' if where else ''}{d.rule_id} {d.severity.value} {d.message}", file=out
        )
