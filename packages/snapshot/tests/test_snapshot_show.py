"""``dsh-snapshot show``: the text tree of every committed scenario and of the upstream corpus,
pinned by expected text files; its error paths; what a terminal gets; hostile log text.

The expected files live in ``show_expected/<profile>/<name>.txt``. After a deliberate change to
the tree's text, regenerate them with ``DSH_SHOW_UPDATE=1 pytest packages/snapshot/tests/
test_snapshot_show.py`` and review the diff; without that variable a difference fails.
"""

from __future__ import annotations

import io
import json
import os
import pty
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from dsh_core.testing import corpus_unavailable, upstream_corpus
from dsh_snapshot._discover import scenario_folders
from dsh_snapshot._html import trees_page
from dsh_snapshot._show import render_lines, run_show, safe_text, tree_lines
from dsh_snapshot._treeload import find_recordings, load_tree
from dsh_snapshot.cli import main

ROOT = Path(__file__).resolve().parents[3]
SNAPSHOTS = ROOT / "snapshots"
EXPECTED = Path(__file__).parent / "show_expected"
CORPUS = upstream_corpus(__file__)
UPDATE = os.environ.get("DSH_SHOW_UPDATE") == "1"
SCRIPT = str(Path(sys.executable).parent / "dsh-snapshot")


def _ours() -> list[Path]:
    return list(scenario_folders(SNAPSHOTS)) if SNAPSHOTS.is_dir() else []


def _corpus() -> list[Path]:
    if CORPUS is None:
        return []
    return [f for era in ("june", "head") for f in scenario_folders(CORPUS / era)]


def _check_expected(folder: Path) -> None:
    tree = load_tree(folder)
    text = render_lines(tree_lines(tree))
    expected = EXPECTED / f"{tree.name}.txt"
    if UPDATE:
        expected.parent.mkdir(parents=True, exist_ok=True)
        expected.write_text(text, encoding="utf-8")
        return
    assert expected.is_file(), (
        f"no expected tree {expected}: run with DSH_SHOW_UPDATE=1 to write it, then review it"
    )
    assert text == expected.read_text(encoding="utf-8"), (
        f"the tree of {folder} differs from {expected} (DSH_SHOW_UPDATE=1 rewrites it)"
    )


@pytest.mark.parametrize("folder", _ours(), ids=lambda p: p.name)
def test_show_text_of_every_committed_scenario(folder: Path) -> None:
    _check_expected(folder)


@pytest.mark.parametrize(
    "folder",
    _corpus() or [None],
    ids=lambda p: "none" if p is None else f"{p.parent.name}/{p.name}",
)
def test_show_text_of_the_upstream_corpus(folder: Path | None) -> None:
    if folder is None:
        corpus_unavailable("upstream corpus not found")
    _check_expected(folder)


def test_every_expected_tree_has_its_recording() -> None:
    """A stale expected file (its scenario gone or renamed) is an error, not dead weight."""
    known = {f"{load_tree(f).name}.txt" for f in _ours()}
    eras = {"sdk"}
    if CORPUS is not None:
        known |= {f"{f.parent.name}/{f.name}.txt" for f in _corpus()}
        eras |= {"june", "head"}
    files = {p.relative_to(EXPECTED).as_posix() for p in EXPECTED.rglob("*.txt")}
    stale = sorted(f for f in files - known if f.split("/")[0] in eras)
    assert stale == [], f"expected trees without a recording: {stale}"


def test_the_fork_tree_marks_its_seed_and_links_the_call() -> None:
    folder = SNAPSHOTS / "sdk" / "subagent-fork-in-process"
    if not folder.is_dir():
        pytest.skip("subagent-fork-in-process is not committed")
    tree = load_tree(folder)
    (primary,) = tree.roots
    (child,) = primary.children
    assert child.kind == "fork"
    assert child.seed_length > 0
    assert child.origin is not None
    assert child.origin.tool == "subagent_fork"
    linked = [c for t in primary.turns for c in t.tool_calls if c.child == child.label]
    assert [c.call_id for c in linked] == [child.origin.call_id]
    inherited = [t for t in child.turns if t.inherited]
    own = [t for t in child.turns if not t.inherited]
    assert inherited
    assert own
    assert all(c.inherited for t in inherited for c in t.calls)
    # The inherited calls are the parent's: they do not count as the child's own.
    assert child.own_calls == [c for t in own for c in t.calls]
    text = render_lines(tree_lines(tree))
    assert f"seedLength {child.seed_length}" in text
    assert "seed boundary" in text


def test_the_cli_prints_the_plain_tree_when_piped(capsys: pytest.CaptureFixture[str]) -> None:
    folder = SNAPSHOTS / "sdk" / "subagent-mixed"
    if not folder.is_dir():
        pytest.skip("subagent-mixed is not committed")
    assert main(["show", str(folder)]) == 0
    out = capsys.readouterr().out
    assert out == render_lines(tree_lines(load_tree(folder)))
    assert "\x1b[" not in out


def test_a_terminal_gets_the_same_lines_styled() -> None:
    """Through a real pseudo-terminal: rich styles (the inherited turns dimmed), same text."""
    folder = SNAPSHOTS / "sdk" / "subagent-fork-in-process"
    if not folder.is_dir():
        pytest.skip("subagent-fork-in-process is not committed")
    leader, follower = pty.openpty()
    env = {**os.environ, "COLUMNS": "400", "TERM": "xterm-256color"}
    env.pop("NO_COLOR", None)
    with subprocess.Popen(
        [SCRIPT, "show", str(folder)], stdout=follower, stderr=subprocess.PIPE, env=env
    ) as process:
        os.close(follower)
        chunks: list[bytes] = []
        while True:
            try:
                data = os.read(leader, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not data:
                break
            chunks.append(data)
        assert process.wait(timeout=60) == 0
    os.close(leader)
    raw = b"".join(chunks).decode("utf-8").replace("\r\n", "\n")
    assert "\x1b[2m" in raw  # dim: the inherited turn and the tree guides
    plain = re.sub(r"\x1b\[[0-9;]*m", "", raw)
    expected = render_lines(tree_lines(load_tree(folder)))
    assert [line.rstrip() for line in plain.splitlines()] == expected.splitlines()


def test_show_walks_a_folder_of_scenarios(capsys: pytest.CaptureFixture[str]) -> None:
    if not _ours():
        pytest.skip("no committed scenarios")
    assert main(["show", str(SNAPSHOTS)]) == 0
    out = capsys.readouterr().out
    titles = [line for line in out.splitlines() if re.match(r"^\S+/\S+  \(", line)]
    assert len(titles) == len(_ours())


# --- error paths ----------------------------------------------------------------------------


def test_a_folder_that_is_no_recording_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "notes.txt").write_text("hello\n", encoding="utf-8")
    assert main(["show", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "not a scenario folder (no input.json) nor a dsh-llm-proxy recording root" in err
    assert str(tmp_path) in err


def test_a_missing_path_and_a_stray_file_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stray = tmp_path / "x.txt"
    stray.write_text("x", encoding="utf-8")
    assert main(["show", str(tmp_path / "gone"), str(stray)]) == 2
    err = capsys.readouterr().err
    assert f"{tmp_path / 'gone'}: no such file or folder" in err
    assert f"{stray}: a file outside any scenario folder" in err


def test_an_unreadable_log_names_its_file_and_line(
    scenario_copy: Callable[[str], Path], capsys: pytest.CaptureFixture[str]
) -> None:
    folder = scenario_copy("subagent-mixed")
    child = folder / "session.2.jsonl"
    lines = child.read_text(encoding="utf-8").splitlines(keepends=True)
    lines[4] = '{"type":"turn/start","seq":4,"data":{"turn":1}\n'  # a brace short
    child.write_text("".join(lines), encoding="utf-8")
    assert main(["show", str(folder)]) == 2
    err = capsys.readouterr().err
    assert f"{child}:5: invalid JSON" in err
    assert "invalid JSON" in err


def test_a_malformed_scenario_names_its_file(
    scenario_copy: Callable[[str], Path], capsys: pytest.CaptureFixture[str]
) -> None:
    folder = scenario_copy("text-turn")
    (folder / "session.3.jsonl").write_text("", encoding="utf-8")
    assert main(["show", str(folder)]) == 2
    err = capsys.readouterr().err
    assert "session.N.jsonl" in err
    assert "without gaps" in err


def test_one_bad_recording_does_not_hide_the_others(
    tmp_path: Path, scenario_copy: Callable[[str], Path], capsys: pytest.CaptureFixture[str]
) -> None:
    good = scenario_copy("text-turn")
    bad = good.parent / "broken"
    shutil.copytree(good, bad)
    (bad / "session.jsonl").write_text('{"type":"session","version":7}\n', encoding="utf-8")
    assert main(["show", str(good.parent)]) == 2
    captured = capsys.readouterr()
    assert "sdk/text-turn" in captured.out
    assert "unsupported log version 7" in captured.err
    assert f"{bad / 'session.jsonl'}" in captured.err


# --- hostile text ---------------------------------------------------------------------------

_HOSTILE = 'pwned</div><script>alert("x")</script>\x1b[31mRED\x1b[0m\u202eevil'


def _hostile_scenario(scenario_copy: Callable[[str], Path]) -> Path:
    folder = scenario_copy("text-turn")
    log = folder / "session.jsonl"
    rows = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
    for row in rows:
        if row["type"] == "assistant/message":
            row["data"]["content"] = [{"type": "text", "text": _HOSTILE}]
        if row["type"] == "turn/end":
            row["data"]["reason"]["kind"] = "\x1b[2Jcleared"
    log.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return folder


def test_show_never_enters_a_directory_link(
    scenario_copy: Callable[[str], Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Red team 4 F5: a committed ``snapshots/x -> ../other-checkout/...`` printed the other
    tree's recordings, and two links to ``.`` ended ``show`` in a traceback."""
    outside = scenario_copy("text-turn")
    tree = tmp_path / "tree"
    mine = tree / "sdk"
    mine.mkdir(parents=True)
    shutil.copytree(outside, mine / "own")
    (mine / "linked").symlink_to(outside, target_is_directory=True)
    (mine / "a").symlink_to(".", target_is_directory=True)
    (mine / "b").symlink_to(".", target_is_directory=True)
    assert [folder.name for folder, _ in find_recordings(tree)] == ["own"]
    assert main(["show", str(tree)]) == 0
    titles = [line for line in capsys.readouterr().out.splitlines() if "  (" in line]
    assert len(titles) == 1
    assert "linked" not in titles[0]


def test_hostile_text_is_escaped_for_a_terminal(scenario_copy: Callable[[str], Path]) -> None:
    folder = _hostile_scenario(scenario_copy)
    text = render_lines(tree_lines(load_tree(folder)))
    assert "\x1b" not in text
    assert "\u202e" not in text
    assert "\\u001b[31mRED" in text
    assert "\\u202eevil" in text
    assert "turn 1 \\u001b[2Jcleared" in text  # every field from the log, not only messages
    assert safe_text("a\nb\tc") == "a\\nb\\tc"
    assert safe_text("x" * 300).endswith("…")
    assert len(safe_text("x" * 300)) == 160


def test_hostile_text_is_escaped_in_html(
    scenario_copy: Callable[[str], Path], tmp_path: Path
) -> None:
    folder = _hostile_scenario(scenario_copy)
    target = tmp_path / "out" / "tree.html"
    assert run_show([folder], target, io.StringIO()) == 0
    page = target.read_text(encoding="utf-8")
    assert "<script" not in page.lower()
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in page
    assert "pwned&lt;/div&gt;" in page
    # No script may run and nothing may be fetched, whatever slips through.
    assert "Content-Security-Policy" in page
    assert "default-src 'none'" in page
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", page)


def test_the_html_page_holds_every_session(tmp_path: Path) -> None:
    folder = SNAPSHOTS / "sdk" / "subagent-mixed"
    if not folder.is_dir():
        pytest.skip("subagent-mixed is not committed")
    tree = load_tree(folder)
    page = trees_page([tree])
    labels = re.findall(r'data-session="([^"]+)"', page)
    assert labels == [n.label for n in tree.walk()]
    assert page.count('class="seed-boundary"') == sum(1 for n in tree.walk() if n.kind == "fork")


def test_find_recordings_tells_kinds_apart(tmp_path: Path) -> None:
    proxy = tmp_path / "proxy"
    proxy.mkdir()
    (proxy / "abc.jsonl").write_text(
        '{"type":"session","version":0,"id":"abc","createdAt":5}\n', encoding="utf-8"
    )
    assert find_recordings(tmp_path) == [(proxy.resolve(), "proxy")]
    tree = load_tree(proxy)
    assert [n.label for n in tree.walk()] == ["abc.jsonl"]
    assert tree.notes == []


def test_a_long_text_is_folded_to_its_first_lines_in_html() -> None:
    # Qwen Code's first message is its whole context (date, OS, cwd, folder listing).
    folder = SNAPSHOTS.parent / "tests" / "third_party" / "scenarios" / "qwen-plain"
    page = trees_page([load_tree(folder)])
    folded = re.search(r'<details class="msg prompt folded"><summary>(.*?)</summary>', page, re.S)
    assert folded is not None
    assert "This is the Qwen Code." in folded.group(1)
    assert "Showing up to 20 items" not in folded.group(1)  # past the first lines
    assert "click to show all" in folded.group(1)
    assert "Showing up to 20 items" in page  # all of it, one click away
    assert '<div class="msg final"><b>final:</b> PONG</div>' in page  # short: as it is
