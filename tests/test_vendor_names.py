"""The vendor stays in its package: ``DEEPSEEK_`` and ``dsh_llm_deepseek`` imports live in
``packages/llm-deepseek`` (issue 21: "no ``DEEPSEEK_`` string outside it").

Every other package reaches a provider through ``dsh_core.plugins`` (its ``env_prefix``, its
``secret_env_names``), so a second provider needs no edit outside its own package. The few
places that must name the vendor are listed below with the reason; tests that still spell the
variables are a ratchet: a file may lose occurrences, never gain one, and no new file may
start.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

_VENDOR = re.compile(r"DEEPSEEK_|^\s*(?:from|import)\s+dsh_llm_deepseek\b", re.MULTILINE)

# Where the vendor may be named, and why.
_ALLOWED_PREFIXES = (
    "packages/llm-deepseek/",  # the profile itself
    "CHANGELOG.md",  # history says what was
    ".github/workflows/record.yml",  # CI hands the repository secret to the live record
    "tests/test_vendor_names.py",  # this test
)

# Test files that still spell DeepSeek's variables, with the most occurrences each may keep.
# TODO(issue 21): derive them from dsh_core.plugins.env_prefix as the source now does; the
# entry goes when its file reaches 0.
_RATCHET = {
    "bench/bench_scale.py": 1,
    "packages/acp-agent/tests/test_acp_e2e_key_redaction.py": 2,
    "packages/acp-agent/tests/test_acp_e2e_sessions.py": 1,
    "packages/acp-agent/tests/test_acp_e2e_turns.py": 2,
    "packages/acp-agent/tests/test_acp_environment.py": 2,
    "packages/acp-agent/tests/test_acp_forkserver.py": 2,
    "packages/acp-agent/tests/test_acp_lazy_schema.py": 1,
    "packages/snapshot/tests/test_snapshot_engine.py": 1,
    "packages/snapshot/tests/test_snapshot_foreign.py": 4,
    "packages/snapshot/tests/test_snapshot_hostile.py": 2,
    "packages/snapshot/tests/test_snapshot_keyscan.py": 2,
    "packages/snapshot/tests/test_snapshot_modes.py": 4,
    "packages/snapshot/tests/test_snapshot_parallel_replay.py": 1,
    "packages/snapshot/tests/test_snapshot_record.py": 12,
    "packages/snapshot/tests/test_snapshot_recorded_settings.py": 8,
    "packages/snapshot/tests/test_snapshot_request_drift.py": 3,
}


def _tracked() -> list[str]:
    git = shutil.which("git")
    if git is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: the tracked files are unknown")
    out = subprocess.run(
        [git, "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.decode()
    return [name for name in out.split("\0") if name]


def _occurrences() -> dict[str, int]:
    found: dict[str, int] = {}
    for name in _tracked():
        if name.startswith(_ALLOWED_PREFIXES):
            continue
        path = ROOT / name
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue  # binary fixtures, or a file the change removed
        count = len(_VENDOR.findall(text))
        if count:
            found[name] = count
    return found


def test_the_vendor_is_named_only_in_its_package() -> None:
    grown = {name: count for name, count in _occurrences().items() if count > _RATCHET.get(name, 0)}
    assert grown == {}, (
        "DEEPSEEK_ or an import of dsh_llm_deepseek outside packages/llm-deepseek (file: "
        "occurrences): reach the provider through dsh_core.plugins (env_prefix, "
        f"secret_env_names, model_provider) instead: {grown}"
    )


def test_the_ratchet_only_tightens() -> None:
    # An entry whose file has fewer occurrences now must be lowered (or removed at 0), so the
    # allowance never hides a new one.
    found = _occurrences()
    loose = {name: (most, found.get(name, 0)) for name, most in _RATCHET.items()}
    loose = {name: pair for name, pair in loose.items() if pair[1] < pair[0]}
    assert loose == {}, f"lower these entries of _RATCHET to the counts now found: {loose}"
