"""The expected side of a scenario is parsed once and shared; a rewritten fixture is re-read."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from dsh_snapshot import load_scenario
from dsh_snapshot._harvest import expected_fixtures  # pyright: ignore[reportPrivateUsage]


def test_expected_fixtures_are_parsed_once_and_reread_when_a_file_changes(
    scenario_copy: Callable[[str], Path],
) -> None:
    folder = scenario_copy("subagent-spawn")
    scenario = load_scenario(folder)
    first = expected_fixtures(scenario)
    assert expected_fixtures(load_scenario(folder)) is first  # another backend's run: shared
    logs, frames = first
    assert len(logs) == 2
    assert frames
    assert logs[0][0]["createdAt"] == 0  # normalised
    stdout = scenario.stdout_file
    lines = stdout.read_text(encoding="utf-8").splitlines(keepends=True)
    stdout.write_text("".join(lines[:-1]), encoding="utf-8")
    stat = stdout.stat()
    os.utime(stdout, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    again = expected_fixtures(scenario)
    assert again is not first
    assert again[1] == frames[:-1]
