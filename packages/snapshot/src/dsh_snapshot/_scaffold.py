"""``dsh-snapshot new``: a scenario folder to start from, valid as written.

It holds ``snapshot.yml`` (``recording: scripted``, ``loop: current``), an ``input.json`` that
initializes, opens a session and sends one prompt, and a ``model.script.json`` answering that
prompt with one text block, so ``dsh-snapshot record --scripted`` works on it at once.

``--foreign CMD`` scaffolds a scenario of an ACP agent we did not write: ``snapshot.yml`` names
the agent and its OpenAI-compatible settings (a placeholder key; the gate points
``OPENAI_BASE_URL`` at ``dsh-llm-proxy``), lists the determinism settings to fill in as
comments, and a ``.gitignore`` keeps the outputs of a failed replay (``.pending/``) out of the
user's repository.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from dsh_core import LoopProfile, ScenarioFiles
from dsh_snapshot._discover import scenario_folders, scenario_root
from dsh_snapshot._foreign import ForeignAgent
from dsh_snapshot._fsafe import ConfinedPathError, write_bytes, write_user_file
from dsh_snapshot._scenario import ScenarioError, is_upstream_recording

__all__ = ["add_new_parser", "mark_scripted", "meta_text", "run_new", "scaffold_scenario"]

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def meta_text(profile: str, description: str | None = None, loop: LoopProfile = "current") -> str:
    """A minimal ``snapshot.yml`` of a scripted recording."""
    text = f"version: 1\nprofile: {profile}\nstore: default\nrecording: scripted\n"
    text += f"loop: {loop}\n"
    return text + (f"description: {json.dumps(description)}\n" if description else "")


def _script() -> dict[str, Any]:
    text = [
        {"type": "block-start", "index": 0, "blockType": "text"},
        {"type": "text-delta", "index": 0, "text": "Hello!"},
        {"type": "block-end", "index": 0, "block": {"type": "text", "text": "Hello!"}},
        {
            "type": "usage",
            "usage": {
                "inputTokens": 10,
                "outputTokens": 2,
                "cacheReadTokens": 0,
                "reasoningTokens": 0,
            },
        },
        {"type": "finish", "reason": {"kind": "stop"}},
    ]
    return {"sessions": [[{"chunks": text}]]}


def _foreign_meta(agent: ForeignAgent) -> str:
    """``snapshot.yml`` of a foreign scenario: the agent, then what to fill in, commented."""
    argv = json.dumps(list(agent.command))
    return f"""version: 1
profile: foreign
store: default
recording: scripted
description: "One prompt to {shlex.join(agent.command)}, answered by the scripted model."
agent: {argv}
# The gate points this variable at dsh-llm-proxy; the key is a placeholder (never a real one).
agent_base_url_env: {agent.base_url_env}
agent_env:
  OPENAI_API_KEY: "placeholder"
  OPENAI_MODEL: "deepseek-flash"
# After the first record, replay it twice; what differs between runs goes here:
# scrub: [{{pattern: 'build-[0-9a-f]{{8}}', placeholder: '{{{{build}}}}'}}]   # regex -> placeholder
# ignore_fields: ["_meta.durationMs"]                  # values not compared
# unordered_updates: ["available_commands_update"]     # compared as a set
# ignore_updates: ["available_commands_update"]        # not compared at all
# clock: "2026-01-15T09:00:00"                         # the date in its prompt stays fixed
expect:
  - prompt: 1
    message: "Hello"
    end: completed
"""


def scaffold_scenario(name: str, parent: Path, foreign: ForeignAgent | None = None) -> Path:
    """Create ``parent/name`` as a new scenario (of the agent ``foreign`` when given); return
    the folder.

    Raises:
        ScenarioError: ``name`` is not a plain folder name, or the folder already exists.
    """
    folder = parent / name
    if not _NAME.match(name):
        raise ScenarioError(folder, None, f"{name!r} is not a plain folder name ([A-Za-z0-9._-])")
    if os.path.lexists(folder):
        raise ScenarioError(folder, None, "already exists; new never overwrites a scenario")
    steps = [{"op": "initialize"}, {"op": "newSession"}, {"op": "prompt", "text": "Say hello."}]
    description = "One prompt answered by one scripted text block (say what yours proves)."
    files = {
        ScenarioFiles.META: meta_text(parent.name or "sdk", description),
        ScenarioFiles.INPUT: json.dumps({"steps": steps}, indent=1) + "\n",
        ScenarioFiles.SCRIPT: json.dumps(_script(), indent=1) + "\n",
    }
    if foreign is not None:
        files[ScenarioFiles.META] = _foreign_meta(foreign)
        # A failed replay keeps its outputs in .pending/ for review: never to be committed.
        files[".gitignore"] = ".pending/\n"
    try:
        for file, text in files.items():
            write_user_file(folder / file, text.encode("utf-8"))
    except ConfinedPathError as exc:
        raise ScenarioError(folder, None, str(exc)) from None
    return folder


def mark_scripted(paths: Iterable[Path], timeout: float | None = None) -> list[Path]:
    """Give each scenario folder at or below ``paths`` that has neither ``snapshot.yml`` nor
    upstream's golden stdout a ``snapshot.yml`` marking it ``scripted`` (``record --scripted``
    makes the folder ours); return the files written. Upstream folders are left alone.

    The walk is discovery's: a given path that is or passes through a link is not entered (the
    selection that follows names it), and it ends within ``timeout`` seconds.
    """
    deadline = None if timeout is None else time.monotonic() + timeout
    written: list[Path] = []
    for path in paths:
        try:
            root = scenario_root(path)
            folders = list(scenario_folders(root, deadline)) if root.is_dir() else []
        except ScenarioError:  # DiscoveryTimeoutError too
            continue  # discovery names the bad path, or the timeout, in one line
        for folder in folders:
            # lexists: a snapshot.yml link (even dangling) is never written through.
            if os.path.lexists(folder / ScenarioFiles.META) or is_upstream_recording(folder):
                continue
            write_bytes(folder, ScenarioFiles.META, meta_text(folder.parent.name).encode("utf-8"))
            written.append(folder / ScenarioFiles.META)
    return written


def add_new_parser(sub: Any) -> None:
    """The ``new`` subcommand of ``dsh-snapshot`` (``sub`` is its subparsers action)."""
    text = "scaffold a scenario folder (scripted, valid as written) to edit and record"
    cmd = sub.add_parser("new", help=text, description=text)
    cmd.add_argument("name", metavar="NAME", help="the new folder's name")
    cmd.add_argument(
        "--dir",
        type=Path,
        default=None,
        help="the folder to create it in; its name is the profile (default snapshots/sdk, "
        "with --foreign snapshots/foreign)",
    )
    cmd.add_argument(
        "--foreign",
        metavar="CMD",
        default=None,
        help="a scenario of this ACP agent (a shell-quoted command line, e.g. 'qwen --acp') "
        "instead of ours, with a .gitignore for its .pending/ outputs",
    )


def run_new(name: str, parent: Path | None, foreign: str | None = None) -> int:
    """``dsh-snapshot new``: 0 when the folder was created, 2 when refused."""
    try:
        agent = None if foreign is None else ForeignAgent.from_command_line(foreign)
        default = Path("snapshots/foreign" if agent is not None else "snapshots/sdk")
        folder = scaffold_scenario(name, parent or default, agent)
    except (ScenarioError, ValueError) as exc:
        print(f"dsh-snapshot new: {exc}", file=sys.stderr)
        return 2
    print(
        f"created {folder}: edit input.json and {ScenarioFiles.SCRIPT}, then "
        f"`dsh-snapshot record --scripted {folder}`"
    )
    return 0
