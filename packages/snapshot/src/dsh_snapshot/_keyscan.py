"""The key scan: a committed fixture must never hold anything that looks like an API key."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

__all__ = ["KEY_PATTERNS", "KeyFinding", "scan_file", "scan_folder"]

KEY_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("an sk- API key", re.compile(r"\bsk-(?:proj-|ant-)?[A-Za-z0-9_-]{16,}")),
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
_MIN_ENV_KEY = 8


@dataclass(frozen=True, slots=True)
class KeyFinding:
    """One suspicious string: where it is and what it looks like (never the value itself)."""

    path: Path
    line: int
    kind: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: looks like {self.kind}; never commit keys in fixtures"


def _env_key() -> str | None:
    value = os.environ.get("DEEPSEEK_API_KEY", "").strip()
    return value if len(value) >= _MIN_ENV_KEY else None


def scan_file(path: Path) -> list[KeyFinding]:
    """Every line of one file that holds a key-like string or the live ``DEEPSEEK_API_KEY``."""
    try:
        text = path.read_bytes().decode("utf-8", "replace")
    except OSError:
        return []
    env_key = _env_key()
    findings: list[KeyFinding] = []
    for number, line in enumerate(text.splitlines(), 1):
        if env_key is not None and env_key in line:
            findings.append(KeyFinding(path, number, "the value of DEEPSEEK_API_KEY"))
            continue
        for kind, pattern in KEY_PATTERNS:
            if pattern.search(line):
                findings.append(KeyFinding(path, number, kind))
                break
    return findings


def _files(folder: Path) -> Iterator[Path]:
    for entry in sorted(folder.rglob("*")):
        if entry.is_file() and not any(p.startswith(".") for p in entry.relative_to(folder).parts):
            yield entry


def scan_folder(folder: Path) -> list[KeyFinding]:
    """The findings of every file under a scenario folder (hidden files excepted)."""
    out: list[KeyFinding] = []
    for path in _files(folder):
        out.extend(scan_file(path))
    return out
