"""Builders for hostile-scenario tests: a watched sandbox, fake keys made at run time, and
recorded model calls.

``Sandbox`` lays out the world outside a run (sentinel files, a fake ``$HOME``, the runner's
``TMPDIR``) and builds scenario folders; :func:`tree_state` fingerprints a tree so a test can
prove nothing in it changed; :func:`tool_call`, :func:`said` and :func:`session_log` write the
model side of a recording. Used by this package's hostile catalogue and open to any package
that tests what a scenario may do (SECURITY.md). This module does not import pytest.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import secrets
import shutil
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dsh_core import ScenarioFiles

__all__ = [
    "INPUT",
    "META",
    "Sandbox",
    "copy_scenario",
    "encoded_forms",
    "fake_key",
    "full_state",
    "said",
    "session_log",
    "tool_call",
    "tree_state",
    "write",
]

META = "version: 1\nprofile: sdk\nstore: jsonl\nrecording: scripted\n"
INPUT = {"steps": [{"op": "initialize"}, {"op": "newSession"}, {"op": "prompt", "text": "go"}]}


def fake_key() -> str:
    """A DeepSeek-shaped key, new every run: ``sk-`` and 32 hex digits."""
    return "sk-" + secrets.token_hex(16)


@dataclass(frozen=True)
class Sandbox:
    """The world outside the run: sentinel files, a fake ``$HOME``, the runner's ``TMPDIR``.

    Attributes:
        root: the test's tmp dir; everything below is watched.
        sentinel: files no scenario may change (one holds ``outside_key``).
        home: the fake ``$HOME``.
        tmpdir: the runner's temp dir (must be empty again after a run).
        scenarios: where the case's scenario folder is built.
        key: the fake key of the live provider in the environment (its ``API_KEY`` variable).
        other_key: a second credential in the environment (``OPENAI_API_KEY``).
        outside_key: the key stored in a sentinel file outside the run.
    """

    root: Path
    sentinel: Path
    home: Path
    tmpdir: Path
    scenarios: Path
    key: str
    other_key: str
    outside_key: str

    @classmethod
    def create(cls, root: Path) -> Sandbox:
        box = cls(
            root,
            root / "sentinel",
            root / "home",
            root / "tmpdir",
            root / "scenarios",
            fake_key(),
            fake_key(),
            fake_key(),
        )
        for folder in (box.sentinel / "dir", box.home / ".ssh", box.tmpdir, box.scenarios):
            folder.mkdir(parents=True)
        (box.sentinel / "victim.txt").write_text("precious bytes\n")
        (box.sentinel / "secret.txt").write_text(f"API_KEY={box.outside_key}\n")
        (box.sentinel / "dir" / "key.txt").write_text(f"{box.outside_key}\n")
        (box.home / ".bashrc").write_text("# fake home\n")
        (box.home / ".ssh" / "id_ed25519").write_text(f"{box.outside_key}\n")
        os.chmod(box.home / ".ssh" / "id_ed25519", 0o600)
        # An xattr to watch, where the file system keeps user attributes.
        with contextlib.suppress(OSError):
            os.setxattr(box.sentinel / "victim.txt", "user.dsh.sentinel", b"1")
        return box

    @property
    def keys(self) -> tuple[str, ...]:
        return (self.key, self.other_key, self.outside_key)

    def scenario(self, name: str, files: Mapping[str, str | bytes] | None = None) -> Path:
        """A minimal scenario folder (input.json, snapshot.yml) plus ``files``."""
        folder = self.scenarios / "sdk" / name
        folder.mkdir(parents=True)
        write(folder / ScenarioFiles.INPUT, json.dumps(INPUT))
        write(folder / ScenarioFiles.META, META)
        for rel, content in (files or {}).items():
            write(folder / rel, content)
        return folder

    def leaks(self, data: bytes) -> list[str]:
        """Which keys ``data`` holds, raw (UTF-8, UTF-16) or encoded (:func:`encoded_forms`)."""
        return [key[:5] + "…" for key in self.keys if any(f in data for f in encoded_forms(key))]


def encoded_forms(key: str) -> list[bytes]:
    """Byte strings whose presence means ``key`` leaked: its body as UTF-8 and UTF-16, hex,
    percent-encoded, and base64 (standard and URL-safe) at each of the three alignments a key
    can have inside a longer encoded text (only the characters that depend on the key alone)."""
    body = key.removeprefix("sk-").encode()
    forms = [
        body,
        body.decode().encode("utf-16-le"),
        body.hex().encode(),
        key.encode().hex().encode(),
    ]
    forms.append("".join(f"%{b:02X}" for b in body).encode())
    for shift in range(3):
        for encode in (base64.b64encode, base64.urlsafe_b64encode):
            text = encode(b"\0" * shift + body)
            start, end = (shift + 2) // 3 * 4, (shift + len(body)) // 3 * 4
            forms.append(text[start:end])
    return [f for f in forms if len(f) >= 16]


def copy_scenario(source: Path, root: Path) -> Path:
    """Copy the scenario folder ``source`` to ``root/<profile>/<name>`` (its parent folder's
    name and its own, as committed under ``snapshots/``); returns the copy.

    Links are copied as links, never followed (a scenario's links are the runner's to judge).

    Raises:
        FileNotFoundError: ``source`` holds no ``input.json``.
    """
    if not ScenarioFiles(source).input.is_file():
        raise FileNotFoundError(f"{source}: not a scenario folder (no {ScenarioFiles.INPUT})")
    target = root / source.parent.name / source.name
    shutil.copytree(source, target, symlinks=True)
    return target


def write(path: Path, content: str | bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")


def full_state(root: Path) -> dict[str, str]:
    """:func:`tree_state` plus what a metadata write changes: each entry's mtime and
    extended attributes (``chmod``/``touch``/``setfattr`` outside the run show up here)."""
    state = tree_state(root)
    for rel in list(state):
        path = root / rel
        info = path.lstat()
        try:
            names = sorted(os.listxattr(path, follow_symlinks=False))
            attrs = {n: os.getxattr(path, n, follow_symlinks=False).hex() for n in names}
        except OSError:
            attrs = {}
        state[rel] += f":mtime={info.st_mtime_ns}:xattr={attrs}"
    return state


def tree_state(root: Path) -> dict[str, str]:
    """Everything about a tree that a write could change: kind, mode, bytes, link targets."""
    state: dict[str, str] = {}
    for directory, dirs, files in os.walk(root, followlinks=False):
        for name in sorted(dirs + files):
            path = Path(directory) / name
            info = path.lstat()
            rel = path.relative_to(root).as_posix()
            if stat.S_ISLNK(info.st_mode):
                state[rel] = f"link:{os.readlink(path)}"
            elif stat.S_ISDIR(info.st_mode):
                state[rel] = f"dir:{oct(info.st_mode)}"
            elif not stat.S_ISREG(info.st_mode):  # a FIFO or device: its kind, never its bytes
                state[rel] = f"special:{oct(info.st_mode)}"
            else:
                digest = hashlib.sha256(path.read_bytes()).hexdigest()
                state[rel] = f"file:{oct(info.st_mode)}:{digest}"
    return state


# --- recorded sessions -------------------------------------------------------------------------


def tool_call(command: str, call_id: str = "call_1") -> list[dict[str, Any]]:
    """The chunks of one model call that asks for ``bash`` with ``command``."""
    arguments = json.dumps({"command": command, "description": "hostile"})
    return [
        {"type": "block-start", "index": 0, "blockType": "tool-call"},
        {
            "type": "tool-call-delta",
            "index": 0,
            "id": call_id,
            "name": "bash",
            "argumentsDelta": arguments,
        },
        {
            "type": "block-end",
            "index": 0,
            "block": {"type": "tool-call", "id": call_id, "name": "bash", "arguments": arguments},
        },
        {"type": "finish", "reason": {"kind": "tool-calls"}},
    ]


def said(*pieces: str) -> list[dict[str, Any]]:
    """The chunks of one model call that answers with ``pieces`` as separate text deltas."""
    return [
        {"type": "block-start", "index": 0, "blockType": "text"},
        *({"type": "text-delta", "index": 0, "text": p} for p in pieces),
        {"type": "block-end", "index": 0, "block": {"type": "text", "text": "".join(pieces)}},
        {"type": "finish", "reason": {"kind": "stop"}},
    ]


def session_log(*calls: list[dict[str, Any]]) -> str:
    """A recorded ``session.jsonl`` holding the model calls of turn 1 (replay reads only the
    ``assistant/chunk`` events; the comparison will differ, which is not what is tested)."""
    rows: list[dict[str, Any]] = [
        {"type": "session", "version": 0, "id": "{{sessionId}}", "createdAt": 0}
    ]
    for step, chunks in enumerate(calls, 1):
        rows += [
            {"type": "assistant/chunk", "data": {"turn": 1, "step": step, "chunk": c}}
            for c in chunks
        ]
    return "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in rows)
