"""The key scan: nothing in a scenario folder may hold anything that looks like a secret.

Detectors: `detect-secrets`' regex plugins (AWS, GitHub, GitLab, Slack, Stripe, private keys,
JWTs, ``password = "…"`` keywords, …) plus our DeepSeek/OpenAI ``sk-…`` patterns and the value
of every variable an installed model provider keeps its key in (``OPENAI_API_KEY``…: each
``dsh.models`` plugin's ``secret_env_names``), and any other literal the caller names. They run
over every decoded view of every file (see ``_decode``): escapes undone, base64 decoded,
UTF-16/32 read, streamed chunks joined. Hidden files are scanned; symlinks are followed when
they stay inside the folder and reported when they lead out. A finding carries the file, line,
kind and the SHA-256 of the value, never the value; a reviewed false positive is allow-listed
in ``snapshot.yml`` under ``secrets_allowlist`` by that file and hash (not the line, which
moves when a line is added above). Placeholders and variable names are not findings
(``_keyscan_rules``).
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from dsh_core import ScenarioFiles
from dsh_core.plugins import secret_env_names
from dsh_snapshot._confine import inside
from dsh_snapshot._decode import file_texts, line_at, line_views, split_views
from dsh_snapshot._detect import screened
from dsh_snapshot._fsafe import ConfinedPathError, read_bytes
from dsh_snapshot._keyscan_rules import not_a_secret
from dsh_snapshot._scancache import cache_key, lookup, store
from dsh_snapshot._scenario import AllowEntry

__all__ = [
    "KEY_PATTERNS",
    "KeyFinding",
    "redact",
    "redact_html",
    "scan_file",
    "scan_folder",
    "scan_text",
]

KEY_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "a DeepSeek/OpenAI sk- API key",
        re.compile(
            r"(?<![A-Za-z0-9])sk-(?:(?:proj|ant|svcacct|admin)-[A-Za-z0-9_-]{16,}"
            r"|(?=[A-Za-z0-9_-]{0,200}[0-9])[A-Za-z0-9_-]{20,})"
        ),
    ),
    ("a bearer token", re.compile(r"\bBearer\s+[A-Za-z0-9._~+/=-]{16,}")),
    (
        "an api-key assignment",
        re.compile(
            r"(?i)\b(?:api[_-]?key|secret[_-]?key|access[_-]?token|auth[_-]?token)"
            r"[\"']?\s*[:=]\s*[\"']?[A-Za-z0-9._~+/=-]{16,}"
        ),
    ),
    ("a GitHub token", re.compile(r"\bgh[pousr]_[A-Za-z0-9]{30,}")),
    ("an AWS access key", re.compile(r"\bAKIA[0-9A-Z]{16}\b")),
)
# What the screen stands for besides detect-secrets' detectors.
_KEY_REGEXES = tuple(pattern for _, pattern in KEY_PATTERNS)
_MIN_LITERAL = 8
_MAX_FILE = 32 * 1024 * 1024
# More suspicious values than this in one file is a refusal in itself; stopping there keeps
# the per-value work (overlap checks, joined-stream lookups, redaction) bounded.
_MAX_FINDINGS = 64


def digest(value: str) -> str:
    """``sha256:<hex>`` of a flagged value: how findings and the allow-list name it."""
    return "sha256:" + hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True, slots=True)
class KeyFinding:
    """One suspicious value: where it is and what it looks like, never the value itself.

    Attributes:
        path: the file (absolute), or the file it would be once published.
        line: 1-based line (0 when the finding is about the file as a whole).
        kind: what it looks like.
        hash: ``sha256:…`` of the value ("" for a file-level finding).
        length: characters in the value.
        file: ``path`` relative to the scanned folder, as ``secrets_allowlist`` names it.
    """

    path: Path
    line: int
    kind: str
    hash: str = ""
    length: int = 0
    file: str = ""

    def __str__(self) -> str:
        if not self.hash:
            return f"{self.path}: {self.kind}"
        return (
            f"{self.path}:{self.line}: looks like {self.kind} (value masked: {self.length} "
            f"characters, {self.hash}); never commit keys in fixtures. A false positive is "
            f"allow-listed in snapshot.yml: secrets_allowlist: [{{file: {self.file}, "
            f"hash: {self.hash}, reason: …}}]"
        )


def _literals(extra: Iterable[str]) -> tuple[tuple[str, str], ...]:
    """``(kind, value)`` of every secret value to look for: each provider's key variables,
    then the caller's literals (the live key a recording runs with)."""
    named = [(f"the value of {name}", os.environ.get(name, "")) for name in secret_env_names()]
    values = [*named, *(("the value of the live API key", value) for value in extra)]
    return tuple((k, v.strip()) for k, v in values if len(v.strip()) >= _MIN_LITERAL)


def _hits(view: str, literals: Sequence[tuple[str, str]]) -> Iterator[tuple[str, str]]:
    for kind, value in literals:
        if value in view:
            yield kind, value
    # A detector's hit may be a placeholder or a variable name (see _keyscan_rules); the
    # literals above never are.
    for kind, pattern in KEY_PATTERNS:
        for match in pattern.finditer(view):
            if not not_a_secret(match.group(0)):
                yield kind, match.group(0)
    screen, every, rest = screened(_KEY_REGEXES)
    for kind, find in every if screen is None or screen.search(view) is not None else rest:
        for value in find(view):
            if not not_a_secret(value):
                yield kind, value


class _TooMany(Exception):
    """More than ``_MAX_FINDINGS`` values in one file: the scan stops there."""


def _record(found: dict[tuple[int, str], KeyFinding], key: tuple[int, str], f: KeyFinding) -> None:
    found[key] = f
    if len(found) > _MAX_FINDINGS:
        raise _TooMany


def _quiet(text: str, keys: Sequence[tuple[str, str]]) -> bool:
    """Whether nothing in any view of ``text`` (pieces joined by "\n") can be a hit: then no
    view of any one piece has one, and the piece-by-piece pass is skipped.

    Most files hold no key-shaped value at all: a few searches over the whole text's views
    then stand for ~5 per view of every line (two thirds of a first scan's CPU).

    Why a view of a piece is part of the same view of the whole: no escape, percent sequence,
    base64 or hex run holds a "\n" (nor does decoding one make a "\n" join two), so undoing
    them over the whole text undoes each piece's alike, and a decoded run is decoded the same.
    Why a hit in a piece is a hit in the whole: the hit's characters are the same; at the
    piece's start and end, "\n" is what ``\b``, ``(?<![A-Za-z0-9])`` and the screen's
    multi-line ``^`` and ``$`` expect there. The test builds pieces that meet at every kind of
    boundary and checks it.
    """
    screen, _every, rest = screened(_KEY_REGEXES)
    if screen is None or rest:
        return False  # no screen stands for every detector: scan every piece
    for view in line_views(text):
        if any(value in view for _, value in keys) or screen.search(view) is not None:
            return False
    return True


def _scan(text: str, path: Path, file: str, keys: Sequence[tuple[str, str]]) -> list[KeyFinding]:
    found: dict[tuple[int, str], KeyFinding] = {}
    lines = text.splitlines()
    for number, line in enumerate([] if _quiet("\n".join(lines), keys) else lines, 1):
        values: list[str] = []
        for view in line_views(line):
            for kind, value in _hits(view, keys):
                # Two detectors flagging overlapping text (``api_key = "X"`` and ``X``) are
                # one finding, named by the first.
                if not any(value in v or v in value for v in values):
                    values.append(value)
                    f = KeyFinding(path, number, kind, digest(value), len(value), file)
                    _record(found, (number, value), f)
    whole = {value for (_, value) in found}
    streams = split_views(text)
    if _quiet("\n".join(joined for _, joined in streams), keys):
        streams = []
    for starts, joined in streams:
        for view in line_views(joined):
            for kind, value in _hits(view, keys):
                if value not in whole:
                    whole.add(value)
                    number = line_at(starts, max(joined.find(value), 0))
                    f = KeyFinding(
                        path,
                        number,
                        f"{kind}, split across streamed chunks from this line on",
                        digest(value),
                        len(value),
                        file,
                    )
                    _record(found, (number, value), f)
    return sorted(found.values(), key=lambda f: (f.line, f.kind, f.hash))


def _too_many(path: Path, file: str) -> KeyFinding:
    return KeyFinding(
        path,
        0,
        f"more than {_MAX_FINDINGS} values that look like secrets: the scan stopped there",
        file=file,
    )


def scan_text(
    text: str, path: Path, file: str = "", literals: Iterable[str] = ()
) -> list[KeyFinding]:
    """Findings in one text: every decoded view of every line, then the joined streams.

    One finding per (line, value); the first detector to name a value names its kind. A
    value seen only once its stream is joined is reported at the stream's first line as
    split across chunks. Past ``_MAX_FINDINGS`` values the scan stops with one file-level
    finding (the text is refused either way). Linear in the text: see ``_detect``.
    """
    try:
        return _scan(text, path, file, _literals(literals))
    except _TooMany:
        return [_too_many(path, file)]


def _scan_bytes(
    data: bytes, path: Path, name: str, keys: tuple[tuple[str, str], ...]
) -> list[KeyFinding]:
    findings: dict[tuple[int, str], KeyFinding] = {}
    try:
        for text in file_texts(data):
            for finding in _scan(text, path, name, keys):
                findings.setdefault((finding.line, finding.hash), finding)
                if len(findings) > _MAX_FINDINGS:
                    raise _TooMany
    except _TooMany:
        return [_too_many(path, name)]
    return sorted(findings.values(), key=lambda f: (f.line, f.kind, f.hash))


def scan_file(
    path: Path, file: str = "", literals: Iterable[str] = (), *, base: Path | None = None
) -> list[KeyFinding]:
    """Every finding in one regular file, read in each plausible encoding.

    With ``base`` (the folder being scanned, ``path`` inside it) the file is read through the
    one confined open (:mod:`dsh_snapshot._fsafe`): no link on the way from ``base`` is
    followed at the moment it is opened, whatever the walk saw before.

    Files already scanned with the same content and the same secrets to look for are
    answered from ``_scancache`` (in memory, and in ``DSH_SCAN_CACHE_DIR`` when set).
    """
    return _scan_path(path, file or path.name, _literals(literals), base)


def _scan_path(
    path: Path, name: str, keys: tuple[tuple[str, str], ...], base: Path | None
) -> list[KeyFinding]:
    try:
        info = path.stat()
        if not stat.S_ISREG(info.st_mode):
            return [KeyFinding(path, 0, "not a regular file: a scenario holds only files")]
        if info.st_size > _MAX_FILE:
            return [KeyFinding(path, 0, f"larger than {_MAX_FILE} bytes: too large to scan")]
        if base is None:
            data = path.read_bytes()
        else:
            data = read_bytes(base, path.relative_to(base).as_posix(), _MAX_FILE)
    except ConfinedPathError as exc:
        return [KeyFinding(path, 0, f"cannot be read for the key scan ({exc})")]
    except OSError as exc:
        return [KeyFinding(path, 0, f"cannot be read for the key scan ({exc.strerror})")]
    key = cache_key(data, [value for _, value in keys])
    cached = lookup(key)
    if cached is None:
        found = _scan_bytes(data, path, name, keys)
        store(key, [(f.line, f.kind, f.hash, f.length) for f in found])
        return found
    return [
        KeyFinding(path, line, kind, hash_, length, name) for line, kind, hash_, length in cached
    ]


def _entries(folder: Path) -> Iterator[tuple[Path, str, Path | KeyFinding]]:
    """``(path, relative name, real file or problem)`` for every file under ``folder``.

    Hidden entries are included. A symlink is followed when its target stays inside the
    folder (each real directory is walked once, so a loop ends); one that leads out, dangles
    or loops is a finding, never read.
    """
    root = folder.resolve()
    seen: set[Path] = {root}
    stack: list[tuple[Path, str]] = [(folder, "")]
    while stack:
        directory, prefix = stack.pop()
        try:
            names = sorted(os.listdir(directory))
        except OSError as exc:
            yield directory, prefix, KeyFinding(directory, 0, f"cannot be listed ({exc.strerror})")
            continue
        for name in names:
            entry, rel = directory / name, f"{prefix}{name}"
            try:
                real = entry.resolve(strict=True)
            except (OSError, RuntimeError):
                yield entry, rel, KeyFinding(entry, 0, "a symlink that dangles or loops")
                continue
            if not inside(real, root):
                yield (
                    entry,
                    rel,
                    KeyFinding(
                        entry, 0, f"a symlink leading outside the scenario folder (to {real})"
                    ),
                )
            elif real.is_dir():
                if real not in seen:
                    seen.add(real)
                    stack.append((entry, f"{rel}/"))
            else:
                yield entry, rel, real


def scan_folder(
    folder: Path,
    allowlist: Sequence[AllowEntry] = (),
    literals: Iterable[str] = (),
    display: Path | None = None,
    *,
    report_stale: bool = True,
    timeout: float | None = None,
) -> list[KeyFinding]:
    """Every finding under a scenario folder that ``allowlist`` does not name.

    Args:
        folder: the folder to scan (a scenario, or a staging folder).
        allowlist: reviewed false positives (``snapshot.yml``'s ``secrets_allowlist``).
        literals: values that must not appear anywhere (the live key of a record run).
        display: the folder to name in findings instead of ``folder`` (a staging folder's
            files are reported where they would be published).
        report_stale: also report allow-list entries that match no finding (a stale entry
            must be looked at again); off for a staging folder, which holds only part of
            the scenario.
        timeout: seconds the whole scan may take (the run's ``--timeout``); past it the scan
            stops with one finding, so an unscanned folder is never run.
    """
    deadline = None if timeout is None else time.monotonic() + timeout
    # Pinned to the value's hash, not its line: a line added above must not unpin an entry.
    # A second entry for the same value is stale: the first one already covers it.
    allowed: dict[tuple[str, str], int] = {}
    for i, e in enumerate(allowlist):
        allowed.setdefault((e.file, e.hash), i)
    used: set[int] = set()
    shown = display or folder
    # The secret values looked for, read once per folder (every provider's key variables).
    keys = _literals(literals)
    real = folder.resolve()
    out: list[KeyFinding] = []
    for _entry, rel, target in _entries(folder):
        if deadline is not None and time.monotonic() > deadline:
            out.append(
                KeyFinding(
                    shown / rel,
                    0,
                    f"the key scan did not finish within --timeout {timeout:g} s; "
                    "nothing of the folder was run",
                    file=rel,
                )
            )
            return out
        if isinstance(target, KeyFinding):
            out.append(KeyFinding(shown / rel, 0, target.kind, file=rel))
            continue
        for f in _scan_path(target, rel, keys, real):
            # A pending output (``.pending/<store>/session.jsonl``) is the fixture it
            # would become, so the fixture's reviewed false positives cover it too.
            pending = rel.split("/", 2)
            fixture = (
                pending[2] if len(pending) == 3 and pending[0] == ScenarioFiles.PENDING else rel
            )
            index = allowed.get((fixture, f.hash))
            if index is None:
                out.append(KeyFinding(shown / rel, f.line, f.kind, f.hash, f.length, rel))
            else:
                used.add(index)
    if report_stale:
        out.extend(
            KeyFinding(
                shown / ScenarioFiles.META,
                0,
                f"field 'secrets_allowlist.{index}' ({entry.file}, {entry.hash}) matches "
                "no finding of the key scan: remove or correct the entry",
                file=ScenarioFiles.META,
            )
            for entry, index in zip(allowlist, range(len(allowlist)), strict=True)
            if index not in used
        )
    return out


# A run of the characters encodings of a key are made of (base64, hex, percent, JSON escapes):
# each is decoded as the scan decodes a line, and masked whole when a decoded form is flagged.
_ENCODED_RUN = re.compile(r"[A-Za-z0-9%\\+/=_.~-]{16,}")


def _mask(value: str, encoded: bool = False) -> str:
    how = "encoded " if encoded else ""
    return f"<masked {how}{len(value)} chars {digest(value)[:19]}…>"


def redact(text: str, literals: Iterable[str] = ()) -> str:
    """``text`` with every value the detectors flag replaced by a masked marker, raw or in
    any form the key scan decodes (base64, hex, percent-encoding, JSON escapes).

    The one function every artefact the tool prints or writes for a person passes through:
    failure messages, the HTML report, review diffs, the CLI's whole output. Linear in the
    text (the detectors are; each encoded run is decoded once).
    """
    keys = _literals(literals)
    values = {value for _, value in _hits(text, keys)}
    for value in sorted(values, key=len, reverse=True):
        text = text.replace(value, _mask(value))

    def encoded(match: re.Match[str]) -> str:
        run = match.group(0)
        for view in line_views(run)[1:]:
            for _kind, value in _hits(view, keys):
                return _mask(value, encoded=True)
        return run

    return _ENCODED_RUN.sub(encoded, text)


_MARKER = re.compile(r"<(masked [^<>\n]*)>")


def redact_html(page: str, literals: Iterable[str] = ()) -> str:
    """:func:`redact` for an HTML page: the masked markers are shown as text, not tags."""
    return _MARKER.sub(r"&lt;\1&gt;", redact(page, literals))
