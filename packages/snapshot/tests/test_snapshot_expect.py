"""Record-time expectations: the ``expect:`` schema, and checking it against recordings."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from dsh_snapshot import ScenarioError, discover, load_scenario
from dsh_snapshot._expect import PromptExpectation, check_expectations, turn_facts


def _logs(folder: Path) -> list[list[Any]]:
    scenario = load_scenario(folder)
    return [
        [json.loads(line) for line in p.read_text().splitlines() if line.strip()]
        for p in scenario.session_files
    ]


def test_every_committed_scenario_states_expectations_that_its_fixtures_meet(
    committed: Path,
) -> None:
    scenarios = discover([committed])
    assert len(scenarios) >= 9
    for scenario in scenarios:
        assert scenario.meta is not None, scenario.name
        assert scenario.meta.expect, scenario.name
        assert check_expectations(scenario.meta.expect, _logs(scenario.path)) == [], scenario.name


def test_the_fork_scenario_demands_the_codeword_back_through_a_fork_child(committed: Path) -> None:
    scenario = load_scenario(committed / "subagent-fork-in-process")
    assert scenario.meta is not None
    assert scenario.meta.expect
    second = next(e for e in scenario.meta.expect if e.prompt == 2)
    assert second.children is not None
    assert [(c.seedLength, c.message) for c in second.children] == [(True, "MARMALADE")]
    facts = turn_facts(_logs(scenario.path))[1]
    assert [(c.tool, c.seed_length > 0, c.returned) for c in facts.children] == [
        ("subagent_fork", True, "MARMALADE")
    ]


def test_a_fork_recording_whose_child_came_back_fresh_or_wrong_is_a_miss(committed: Path) -> None:
    logs = _logs(committed / "subagent-fork-in-process")
    # The same recording with the child's seedLength gone: a fresh child cannot know the codeword.
    fresh = [logs[0], [{k: v for k, v in logs[1][0].items() if k != "seedLength"}, *logs[1][1:]]]
    want = [
        PromptExpectation.model_validate(
            {"prompt": 2, "children": [{"seedLength": True, "message": "MARMALADE"}]}
        )
    ]
    (miss,) = check_expectations(want, fresh)
    assert miss.startswith("prompt 2: expected fork child (seedLength) returning /MARMALADE/")
    assert "came: final message 'PARENT_DONE'" in miss
    assert "subagent_fork child seedLength=0 returning 'MARMALADE'" in miss
    wrong = [
        PromptExpectation.model_validate(
            {"prompt": 2, "children": [{"seedLength": True, "message": "^APRICOT$"}]}
        )
    ]
    assert len(check_expectations(wrong, logs)) == 1


@pytest.mark.parametrize(
    ("expect", "fragment"),
    [
        ({"prompt": 1, "message": "^PING$"}, "final message matching /^PING$/"),
        ({"prompt": 1, "tools": ["bash"]}, "tools ['bash']"),
        ({"prompt": 1, "end": "error"}, "turn end 'error'"),
        ({"prompt": 1, "children": [{"seedLength": False}]}, "fresh child (no seedLength)"),
        ({"prompt": 2, "message": "."}, "the recording has only 1 turns"),
    ],
)
def test_each_kind_of_miss_says_what_was_expected_and_what_came(
    committed: Path, expect: dict[str, Any], fragment: str
) -> None:
    (miss,) = check_expectations(
        [PromptExpectation.model_validate(expect)], _logs(committed / "text-turn")
    )
    assert fragment in miss
    assert "came: " in miss


def _folder(tmp_path: Path, expect_yaml: str) -> Path:
    folder = tmp_path / "sdk" / "s"
    folder.mkdir(parents=True)
    steps = [{"op": "initialize"}, {"op": "newSession"}, {"op": "prompt", "text": "hi"}]
    (folder / "input.json").write_text(json.dumps({"steps": steps}))
    (folder / "snapshot.yml").write_text(
        "version: 1\nprofile: sdk\nrecording: scripted\nexpect:\n" + expect_yaml
    )
    return folder


@pytest.mark.parametrize(
    ("expect_yaml", "field", "reason"),
    [
        ("  - prompt: 1\n    mesage: x\n", "expect.0.mesage", "Extra inputs are not permitted"),
        ("  - prompt: 1\n    message: '('\n", "expect.0.message", "not a regular expression"),
        # A back-reference needs a backtracking engine: refused, as RE2 cannot run it.
        ("  - prompt: 1\n    message: '(a)\\1'\n", "expect.0.message", "(RE2) accepts"),
        ("  - prompt: 0\n", "expect.0.prompt", "greater than or equal to 1"),
        ("  - prompt: 2\n", "expect.0.prompt", "input.json has 1 prompt steps"),
        ("  - prompt: 1\n  - prompt: 1\n", "expect.1.prompt", "prompt 1 twice"),
        ("  - prompt: 1\n    end: done\n", "expect.0.end", "Input should be"),
        (
            "  - prompt: 1\n    children: [{seedLength: true, kind: fork}]\n",
            "expect.0.children.0.kind",
            "Extra inputs",
        ),
    ],
)
def test_a_bad_expectation_is_an_error_naming_file_and_field(
    tmp_path: Path, expect_yaml: str, field: str, reason: str
) -> None:
    folder = _folder(tmp_path, expect_yaml)
    with pytest.raises(ScenarioError) as info:
        load_scenario(folder)
    assert info.value.path == folder.resolve() / "snapshot.yml"
    assert info.value.field == field
    assert reason in info.value.reason
