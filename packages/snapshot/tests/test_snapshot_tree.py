"""The gate compares the session tree: a child linked to the wrong parent fails."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from dsh_snapshot import SnapshotSettings, load_scenario, run_scenario


def _relink(path: Path, parent: str) -> None:
    header, _, rest = path.read_text(encoding="utf-8").partition("\n")
    fields = json.loads(header)
    fields["parentSession"] = parent
    path.write_text(json.dumps(fields, separators=(",", ":")) + "\n" + rest, encoding="utf-8")


def test_committed_fixtures_name_sessions_by_the_tree_scheme(committed: Path) -> None:
    for folder in sorted(p for p in committed.iterdir() if (p / "input.json").is_file()):
        for index, file in enumerate(load_scenario(folder).session_files):
            header = json.loads(file.read_text(encoding="utf-8").partition("\n")[0])
            assert header["id"] == f"{{{{session:{index}}}}}", file
            if index:  # a child names an earlier session: the primary, or a child (nesting)
                parents = {f"{{{{session:{k}}}}}" for k in range(index)}
                assert header["parentSession"] in parents, file


def test_a_fixture_naming_the_wrong_parent_fails_replay(
    scenario_copy: Callable[[str], Path],
) -> None:
    folder = scenario_copy("subagent-multi")
    assert run_scenario(load_scenario(folder)).ok
    _relink(folder / "session.2.jsonl", "{{session:1}}")
    result = run_scenario(load_scenario(folder), SnapshotSettings())
    assert not result.ok
    assert [str(d) for d in result.differences] == [
        'session.2.jsonl line 1, field parentSession: expected "{{session:1}}", '
        'actual "{{session:0}}"'
    ]
