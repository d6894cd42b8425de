"""The vendor stays in its package: ``DEEPSEEK_`` and ``dsh_llm_deepseek`` imports live in
``packages/llm-deepseek`` (issue 21: "no ``DEEPSEEK_`` string outside it except fake keys in
tests").

Every other package reaches a provider through ``dsh_core.plugins`` (its ``env_prefix``, its
``secret_env_names``) and tests name a variable by the provider's settings model
(``resolve_profile(DEFAULT_MODEL_PROVIDER).env_name("api_key")``), so a second provider needs no
edit outside its own package. The few places that must name the vendor are listed below with
the reason; in a test, the one thing allowed is the key variable set to a value that says it is
fake.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

_VENDOR = re.compile(
    r"DEEPSEEK_"
    r"|^\s*(?:from|import)\s+dsh_llm_deepseek\b"  # an import statement
    r"|(?:import_module|__import__)\(\s*[\"']dsh_llm_deepseek\b",  # an import by name
    re.MULTILINE,
)

# The key variable given a literal that says it is no key (``fake``, ``not-a-key``,
# ``not-secret``): ``"DEEPSEEK_API_KEY": "test-key-not-secret"``, ``DEEPSEEK_API_KEY=fake``.
_FAKE_KEY = re.compile(
    r"""DEEPSEEK_API_KEY["']?\s*[:=,]\s*["']?[\w.-]*(?:fake|not-a-key|not-secret)[\w.-]*""",
    re.IGNORECASE,
)

# Where the vendor may be named, and why.
_ALLOWED_PREFIXES = (
    "packages/llm-deepseek/",  # the profile itself
    "CHANGELOG.md",  # history says what was
    ".github/workflows/record.yml",  # CI hands the repository secret to the live record
    "tests/test_vendor_names.py",  # this test
)


def _is_test(name: str) -> bool:
    return name.startswith("tests/") or "/tests/" in name


def vendor_names(name: str, text: str) -> list[str]:
    """The lines of the tracked file ``name`` that name the vendor where they may not, as
    ``name:line: text``; a fake key in a test file is not one."""
    found: list[str] = []
    for number, line in enumerate(text.splitlines(), start=1):
        checked = _FAKE_KEY.sub("", line) if _is_test(name) else line
        if _VENDOR.search(checked):
            found.append(f"{name}:{number}: {line.strip()}")
    return found


def _tracked() -> list[str]:
    git = shutil.which("git")
    if git is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: the tracked files are unknown")
    out = subprocess.run(
        [git, "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.decode()
    return [name for name in out.split("\0") if name]


def test_the_vendor_is_named_only_in_its_package() -> None:
    found: list[str] = []
    for name in _tracked():
        if name.startswith(_ALLOWED_PREFIXES):
            continue
        try:
            text = (ROOT / name).read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue  # binary fixtures, or a file the change removed
        found.extend(vendor_names(name, text))
    assert found == [], (
        "DEEPSEEK_ or an import of dsh_llm_deepseek outside packages/llm-deepseek: reach the "
        "provider through dsh_core.plugins (model_provider, env_prefix, secret_env_names) or "
        "name a variable by its settings (dsh_scripted_server.resolve_profile(...).env_name):\n"
        + "\n".join(found)
    )


@pytest.mark.parametrize(
    ("name", "line"),
    [
        ("packages/snapshot/tests/test_x.py", 'monkeypatch.setenv("DEEPSEEK_MODEL", "m")'),
        ("packages/snapshot/tests/test_x.py", 'env = {"DEEPSEEK_API_KEY": key}'),
        ("packages/snapshot/tests/test_x.py", 'env = {"DEEPSEEK_API_KEY": "sk-real-looking"}'),
        ("packages/snapshot/tests/test_x.py", "from dsh_llm_deepseek import DeepSeekSettings"),
        ("tests/test_x.py", "    import dsh_llm_deepseek.testing"),
        ("tests/plugins/dsh-model-acme/tests/test_x.py", "from dsh_llm_deepseek._x import y"),
        ("tools/x.py", 'settings = importlib.import_module("dsh_llm_deepseek")'),
        ("packages/snapshot/src/dsh_snapshot/_x.py", '"DEEPSEEK_API_KEY": "not-a-key",'),
        ("bench/bench_x.py", '{"DEEPSEEK_API_KEY": "bench-not-a-key"}'),
        ("tools/x.py", "DEEPSEEK_API_KEY=fake-key DEEPSEEK_MODEL=m"),
        ("README.md", "export DEEPSEEK_API_KEY=..."),
    ],
)
def test_a_vendor_name_is_caught(name: str, line: str) -> None:
    assert vendor_names(name, f"first line\n{line}\n") == [f"{name}:2: {line.strip()}"]


@pytest.mark.parametrize(
    "line",
    [
        '"DEEPSEEK_API_KEY": "test-key-not-secret",',
        "monkeypatch.setenv('DEEPSEEK_API_KEY', 'fake')",
        'path.write_text("DEEPSEEK_API_KEY=a-fake-key\\n")',
        "# dsh_llm_deepseek is the default provider (a comment, no import)",
        'model = "deepseek-flash"',
    ],
)
def test_a_fake_key_in_a_test_passes(line: str) -> None:
    assert vendor_names("packages/acp-agent/tests/test_x.py", line) == []
