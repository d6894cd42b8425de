"""The noxfile is the one command surface: every session says what it does."""

from __future__ import annotations

import ast
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

ROOT = Path(__file__).resolve().parent.parent

REQUIRED = {
    "tests",
    "lint",
    "typecheck",
    "build",
    "release_check",
    "crash",
    "bench",
    "snapshot",
    "snapshot_refresh",
    "snapshot_record",
    "snapshot_proof",
    "compat",
    "third_party_agents",
    "tests_slow",
}


def sessions() -> dict[str, ast.FunctionDef]:
    tree = ast.parse((ROOT / "noxfile.py").read_text())
    found: dict[str, ast.FunctionDef] = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and any(
            "session" in ast.unparse(d) for d in node.decorator_list
        ):
            found[node.name] = node
    return found


def test_noxfile_defines_every_session_the_project_documents() -> None:
    assert set(sessions()) >= REQUIRED


def test_every_nox_session_has_a_one_line_docstring() -> None:
    for name, node in sessions().items():
        doc = ast.get_docstring(node)
        assert doc, f"nox session {name} has no docstring"
        assert "\n" not in doc.strip(), f"nox session {name}: keep the docstring to one line"


def test_readme_commands_exist_as_sessions() -> None:
    readme = (ROOT / "README.md").read_text()
    assert "python3 tools/bootstrap.py -s snapshot" in readme
    assert "python3 tools/bootstrap.py -s tests" in readme
    ci = (ROOT / ".ci" / "run").read_text()
    assert "tools/bootstrap.py" in ci
    assert " tests " in ci
    assert " tests_slow " in ci  # the slow tests the test command leaves out still run in CI


def test_snapshot_sessions_pass_paths_and_k_through() -> None:
    # nox -s snapshot_refresh -- snapshots/sdk/x, and nox -s snapshot -- -k text. The test
    # environment has no nox to import the noxfile with: run its helper's own source instead.
    tree = ast.parse((ROOT / "noxfile.py").read_text())
    wanted: list[ast.stmt] = [
        node
        for node in tree.body
        if (isinstance(node, ast.FunctionDef) and node.name == "_snapshot_args")
        or (isinstance(node, ast.Assign) and "_SNAPSHOT_VALUED" in ast.unparse(node.targets[0]))
    ]
    assert len(wanted) == 2
    namespace: dict[str, Any] = {}
    exec(compile(ast.Module(wanted, []), "noxfile.py", "exec"), namespace)
    snapshot_args = cast(Callable[[list[str]], list[str]], namespace["_snapshot_args"])
    assert snapshot_args([]) == ["snapshots"]
    assert snapshot_args(["-k", "text"]) == ["snapshots", "-k", "text"]
    assert snapshot_args(["snapshots/sdk/x"]) == ["snapshots/sdk/x"]
    assert snapshot_args(["-k", "a", "snapshots/sdk/x", "--jobs", "2"]) == [
        "-k",
        "a",
        "snapshots/sdk/x",
        "--jobs",
        "2",
    ]
    assert snapshot_args(["--timeout", "5"]) == ["snapshots", "--timeout", "5"]


def test_the_dev_group_installs_no_test_plugin() -> None:
    # An installed store backend joins the gate's default set: with the test plugins in the
    # dev environment, its gate ran 32 runs where the README says 22.
    groups = tomllib.loads((ROOT / "pyproject.toml").read_text())["dependency-groups"]
    dev = cast(list[Any], groups["dev"])
    included = {cast(dict[str, str], d)["include-group"] for d in dev if isinstance(d, dict)}
    assert "test-plugins" not in included
    assert not set(cast(list[str], groups["test-plugins"])) & {d for d in dev if isinstance(d, str)}
