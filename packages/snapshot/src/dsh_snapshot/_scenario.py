"""Scenario folders: the ``snapshot.yml`` model, ``input.json`` steps and discovery.

A scenario is a folder holding ``input.json``. Ours also hold ``snapshot.yml`` and their
``input.json`` is strict (:meth:`~dsh_snapshot._steps.OpRegistry.input_document`); upstream folders
(``stdout.golden.jsonl``, no ``snapshot.yml``) are read as they are, so the same runner replays
both. A folder with neither (see :func:`is_upstream_recording`) is refused: lacking our file
never makes a folder upstream's.
"""

from __future__ import annotations

import json
import os
import re
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Annotated, Any, Literal, cast

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from dsh_core import (
    DEFAULT_LOOP_PROFILE,
    DshError,
    LogFormatError,
    LoopProfile,
    ScenarioFiles,
    loads_bounded,
    read_log,
)
from dsh_llm_replay import ReplayError, load_override
from dsh_snapshot._agentspec import (
    DEFAULT_BASE_URL_ENV,
    AgentArgv,
    EnvName,
    check_agent_env,
    check_base_url_env,
)
from dsh_snapshot._determinism import Determinism, FieldPath, FixedClock, Scrubber, UpdateKind
from dsh_snapshot._expect import PromptExpectation
from dsh_snapshot._fsafe import ConfinedPathError, read_file_text, read_text
from dsh_snapshot._needs import scenario_needs
from dsh_snapshot._provenance import Provenance
from dsh_snapshot._steps import OPS

__all__ = [
    "AllowEntry",
    "Scenario",
    "ScenarioError",
    "SnapshotMeta",
    "Step",
    "detect_loop_profile",
    "is_upstream_recording",
    "load_scenario",
    "path_problem",
    "step_paths",
]

Recording = Literal["live", "scripted", "authored"]


_MAX_META = 1024 * 1024
_MAX_INPUT = 16 * 1024 * 1024


class ScenarioError(DshError):
    """A scenario folder is malformed; the message names the file and the field."""

    def __init__(self, path: Path, field: str | None, reason: str) -> None:
        self.path = path
        self.field = field
        self.reason = reason
        what = f" field {field!r}:" if field else ""
        super().__init__(f"{path}:{what} {reason}")


def _relative_inside(value: str, base: str = "the scenario folder") -> str:
    posix = PurePosixPath(value)
    if posix.is_absolute() or value.startswith("~") or "\\" in value:
        raise ValueError(f"{value!r} must be a path relative to {base}, with /")
    if ".." in posix.parts or "\x00" in value:
        raise ValueError(f"{value!r} must stay inside {base} (no '..')")
    return posix.as_posix()


class AllowEntry(BaseModel):
    """One reviewed false positive of the key scan, as ``snapshot.yml`` lists it.

    Attributes:
        file: the file, relative to the scenario folder (``workspace/notes.txt``).
        line: the 1-based line the scan reported (optional, informative only: an entry is
            pinned to its file and hash, so a line added above does not unpin it).
        hash: ``sha256:<64 hex>`` of the flagged value, as the scan printed it (never the
            value itself).
        reason: why this is not a secret; a reviewer reads it.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    file: Annotated[str, Field(min_length=1), AfterValidator(_relative_inside)]
    line: int | None = Field(default=None, ge=1)
    hash: str = Field(pattern=r"^sha256:[0-9a-f]{64}$")
    reason: str = Field(min_length=8, pattern=r"\S")


_OLD_STORE_KEYS = ("persistence", "composition")


class SnapshotMeta(BaseModel):
    """The contents of ``snapshot.yml``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    version: Literal[1]
    profile: str = Field(min_length=1)
    store: str = Field(default="default", pattern=r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")
    """``default`` (every store backend asked for) or one backend's name, which pins it. A
    name, never a path: it names the folder of the store's pending outputs."""
    recording: Recording
    loop: LoopProfile = DEFAULT_LOOP_PROFILE
    """The agent loop the scenario was recorded with (``DSH_LOOP_PROFILE``)."""
    max_delegation_depth: int | None = Field(default=None, ge=0)
    """The deepest child the subagent tools may create (``DSH_MAX_DELEGATION_DEPTH``); unset
    takes the loop profile's (upstream's tool-subagent ``maxDepth``, composed per agent
    config: a scenario that records a refusal at a lower cap says so here)."""
    description: str | None = None
    expect: list[PromptExpectation] | None = None
    provenance: Provenance | None = None
    secrets_allowlist: tuple[AllowEntry, ...] = ()
    agent: AgentArgv | None = None
    """Run this ACP agent (argv; ``{python}``, ``{scenario}`` expanded) instead of ours, its
    model calls recorded and replayed through ``dsh-llm-proxy``."""
    agent_base_url_env: EnvName | None = None
    """The variable through which ``agent`` takes its model base URL (``OPENAI_BASE_URL``)."""
    agent_env: dict[EnvName, str] | None = None
    """Fixed variables ``agent`` needs (a placeholder key its SDK insists on); start-up hooks
    (``LD_*``, ``PYTHON*``, ``NODE_OPTIONS``, ``BASH_ENV``, ``GIT_*``…) are refused."""
    bash_network: bool = False
    """Live ``record`` only, and only when the user also sets ``DSH_BASH_NETWORK=1``: the
    agent's ``bash`` commands may reach the network while recording. A scenario asks; the
    user decides (replay, refresh and scripted record never give it)."""
    scrub: tuple[Scrubber, ...] = ()
    """User scrubbers, regex → placeholder (see :mod:`dsh_snapshot._determinism`)."""
    ignore_fields: tuple[FieldPath, ...] = ()
    """Key chains of output whose values are not compared (``_meta.durationMs``)."""
    unordered_updates: tuple[UpdateKind, ...] = ()
    """``session/update`` kinds compared without their position."""
    ignore_updates: tuple[UpdateKind, ...] = ()
    """``session/update`` kinds not compared at all (sent on the agent's own schedule)."""
    clock: FixedClock | None = None
    """A fixed start time for the agent process (``faketime``), ``2026-01-15T09:00:00``."""

    @property
    def determinism(self) -> Determinism:
        """The scenario's determinism settings."""
        return Determinism(
            scrub=self.scrub,
            ignore_fields=self.ignore_fields,
            unordered_updates=self.unordered_updates,
            ignore_updates=self.ignore_updates,
            clock=self.clock,
        )

    @model_validator(mode="before")
    @classmethod
    def _old_store_key(cls, data: Any) -> Any:
        # One concept, one word: the key was ``persistence`` (before that ``composition``);
        # both are read until 0.3.0, with a warning, and ``store`` wins over them.
        if not isinstance(data, dict):
            return data
        raw = cast(dict[str, Any], data)
        old = [key for key in _OLD_STORE_KEYS if key in raw]
        if not old:
            return raw
        warnings.warn(
            f"snapshot.yml: {old[0]!r} is deprecated, write 'store' (removal in 0.3.0)",
            DeprecationWarning,
            stacklevel=2,
        )
        fixed = {k: v for k, v in raw.items() if k not in _OLD_STORE_KEYS}
        fixed.setdefault("store", raw[old[0]])
        return fixed

    @field_validator("agent_base_url_env", "agent_env")
    @classmethod
    def _only_with_agent(cls, value: Any, info: ValidationInfo) -> Any:
        if "agent" in info.data and info.data["agent"] is None:
            raise ValueError(f"{info.field_name} is set but agent is not: it configures agent only")
        if info.field_name == "agent_env":
            check_agent_env(info.data.get("agent_base_url_env") or DEFAULT_BASE_URL_ENV, value)
        elif value is not None:
            check_base_url_env(value)
        return value


class Step(BaseModel):
    """One step of ``input.json``.

    ``op`` may name an op this runner does not drive (later upstream harnesses have more);
    such a scenario is reported as needing it (:meth:`Scenario.needs`), not rejected here.
    """

    model_config = ConfigDict(extra="allow", frozen=True, populate_by_name=True)

    op: str = Field(min_length=1)
    text: str | None = None
    terminal_output: bool = Field(default=False, alias="terminalOutput")
    additional_directories: list[str] | None = Field(default=None, alias="additionalDirectories")

    @property
    def raw(self) -> dict[str, Any]:
        """The step as written in ``input.json`` (its own field names, set fields only)."""
        return self.model_dump(by_alias=True, exclude_unset=True)


# A step field whose name ends like one of these names a path (``cwd``, ``waitForFile.path``,
# ``additionalDirectories``, ``readyFile``): whatever the op, it must stay inside the run.
_PATH_FIELD = re.compile(r"(?i)(cwd|path|paths|file|files|dir|dirs|directory|directories)$")


def step_paths(step: Step) -> list[tuple[str, str]]:
    """``(field, value)`` for every path a step names, at any depth of its extra fields.

    ``field`` is the dotted location inside the step (``waitForFile.path``,
    ``additionalDirectories.0``); a non-string value under a path-like name is returned as its
    ``repr`` so the check refuses it.
    """
    found: list[tuple[str, str]] = []

    def walk(value: Any, where: str, pathish: bool) -> None:
        if isinstance(value, dict):
            obj: dict[str, Any] = value  # pyright: ignore[reportUnknownVariableType]
            for key, item in obj.items():
                walk(item, f"{where}.{key}" if where else key, bool(_PATH_FIELD.search(key)))
        elif isinstance(value, list):
            items: list[Any] = value  # pyright: ignore[reportUnknownVariableType]
            for index, item in enumerate(items):
                walk(item, f"{where}.{index}", pathish)
        elif pathish:
            found.append((where, value if isinstance(value, str) else repr(value)))

    fields = step.raw
    if step.op == "newSessionExpectError":
        # Sent to the agent only to be refused (the step fails if it is accepted); the run
        # never opens them, so they need not lie inside it (upstream's reject-extra-dirs
        # names "/extra-dir").
        fields.pop("additionalDirectories", None)
    walk(fields, "", False)
    return found


def path_problem(value: str) -> str | None:
    """Why a path named by a scenario cannot stay inside the run, or ``None``."""
    try:
        _relative_inside(value, "the run's working directory")
    except ValueError as exc:
        return f"{exc}: a scenario may only name paths inside its run"
    return None


class _Input(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)

    steps: list[Step] = Field(min_length=1)


def _field_of(error: ValidationError) -> tuple[str, str]:
    first = error.errors()[0]
    loc = ".".join(str(part) for part in first["loc"]) or None
    return (loc or "", first["msg"])


@dataclass(frozen=True, slots=True)
class Scenario:
    """A scenario folder, validated.

    Attributes:
        path: the folder (absolute).
        name: ``profile/folder`` (profile from ``snapshot.yml``, else the parent folder name).
        meta: ``snapshot.yml`` contents, or ``None`` for an upstream folder.
        steps: the ``input.json`` steps.
        stdout_file: the expected stdout fixture (may not exist yet before a first recording).
        session_files: ``session.jsonl`` then ``session.1.jsonl`` … (existing ones only).
    """

    path: Path
    name: str
    meta: SnapshotMeta | None
    steps: tuple[Step, ...]
    stdout_file: Path
    session_files: tuple[Path, ...]

    @property
    def loop(self) -> LoopProfile:
        """The loop profile to run: ``snapshot.yml``'s, or an upstream folder's detected era."""
        if self.meta is not None:
            return self.meta.loop
        return detect_loop_profile(self.session_files)

    def stores(self, requested: Sequence[str]) -> list[str]:
        """The store backends to run: ``requested``, unless ``snapshot.yml`` pins one."""
        if self.meta is None or self.meta.store == "default":
            return list(requested)
        return [self.meta.store]

    def persistences(self, requested: Sequence[str]) -> list[str]:
        """Deprecated name of :meth:`stores` (removal in 0.3.0)."""
        warnings.warn(
            "Scenario.persistences is deprecated, use Scenario.stores (removal in 0.3.0)",
            DeprecationWarning,
            stacklevel=2,
        )
        return self.stores(requested)

    def needs(self, *, recordings: bool = True, foreign: bool = False) -> list[str]:
        """What this scenario needs that we do not implement (``op X``, ``tool Y``, …);
        empty when it can run. ``recordings=False`` skips the tools the recorded logs call
        (a new recording overwrites them); so does ``foreign`` (another agent runs, whose
        tools and subagents are its own: it is judged by what it recorded).

        Raises:
            DshError: a recorded log cannot be read.
        """
        files = self.session_files if recordings and not foreign else ()
        return scenario_needs([s.raw for s in self.steps], files, self.workspace)

    @property
    def files(self) -> ScenarioFiles:
        """The folder's file layout (every fixture name)."""
        return ScenarioFiles(self.path)

    @property
    def override_file(self) -> Path | None:
        """``replay.override.json`` when present."""
        path = self.files.override
        return path if path.is_file() else None

    @property
    def script_file(self) -> Path | None:
        """``model.script.json`` (the scripted model server's script) when present."""
        path = self.files.script
        return path if path.is_file() else None

    @property
    def workspace(self) -> Path | None:
        """``workspace/`` to copy into the temporary cwd, when present."""
        path = self.path / "workspace"
        return path if path.is_dir() else None

    @property
    def primary_file(self) -> Path:
        """``session.jsonl`` (it may not exist yet before a first recording)."""
        return self.files.session(0)

    @property
    def child_files(self) -> tuple[Path, ...]:
        """``session.1.jsonl`` … in order."""
        return self.session_files[1:]

    @property
    def authored(self) -> bool:
        """True when the override is a bare array: the script is authored, not recorded."""
        override = self.override_file
        if override is None:
            return False
        try:
            return load_override(override).replace is not None
        except ReplayError:
            return False  # not an override at all: the replay reports it, naming the field

    @property
    def fork_children(self) -> tuple[Path, ...]:
        """Child fixtures whose header carries a non-zero ``seedLength``."""
        out: list[Path] = []
        for child in self.child_files:
            first = read_file_text(child).partition("\n")[0]
            try:
                header = read_log([first], str(child)).header
            except LogFormatError:
                continue  # an unreadable child is reported by the run, naming its line
            if header.effective_seed_length > 0:
                out.append(child)
        return tuple(out)


# Event types only upstream's later agent writes; the June-era agent never did.
_CURRENT_ERA_EVENTS = frozenset(
    {"request/header", "session/end-seed", "subagent/descriptor", "agent/inbox/spliced"}
)


def detect_loop_profile(session_files: Sequence[Path]) -> LoopProfile:
    """The era of an upstream folder's recording, from its session logs.

    ``current`` when a log holds an event type only the later agent writes (``request/header``,
    ``session/end-seed``, ``subagent/descriptor``, ``agent/inbox/spliced``) or the primary's
    header carries ``delegationDepth`` (the June agent wrote it on children only); ``june``
    otherwise, including when there is no log at all. Unreadable lines are skipped: the
    scenario run reports them properly.
    """
    for index, path in enumerate(session_files):
        try:
            # Through the one confined open, capped: this runs at discovery, before --timeout
            # bounds anything, on files a pull request wrote.
            lines = read_text(path.parent, path.name).splitlines()
        except (ConfinedPathError, OSError, UnicodeDecodeError):
            continue
        for number, line in enumerate(lines):
            try:
                row: Any = json.loads(line)
            except ValueError:
                continue
            if not isinstance(row, dict):
                continue
            if number == 0 and index == 0 and "delegationDepth" in row:
                return "current"
            if row.get("type") in _CURRENT_ERA_EVENTS:  # pyright: ignore[reportUnknownMemberType]
                return "current"
    return "june"


def _read_confined(path: Path, limit: int) -> str:
    """A scenario file's text through the one confined open (no link followed)."""
    try:
        return read_text(path.parent, path.name, limit)
    except (ConfinedPathError, OSError, UnicodeDecodeError) as exc:
        reason = exc.reason if isinstance(exc, UnicodeDecodeError) else str(exc)
        raise ScenarioError(path, None, f"cannot be read: {reason}") from None


def _load_meta(path: Path) -> SnapshotMeta:
    text = _read_confined(path, _MAX_META)
    try:
        raw: Any = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        # Where, never what: the problem and its line/column, not the quoted source line.
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or type(exc).__name__
        raise ScenarioError(path, None, f"invalid YAML{where}: {problem}") from None
    except RecursionError:
        raise ScenarioError(path, None, "invalid YAML: nested too deeply") from None
    if not isinstance(raw, dict):
        raise ScenarioError(path, None, "snapshot.yml must be a mapping")
    try:
        return SnapshotMeta.model_validate(raw)
    except ValidationError as exc:
        field, msg = _field_of(exc)
        raise ScenarioError(path, field, msg) from None


def _check_strict(path: Path, raw: Any) -> None:
    try:
        OPS.input_document().model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        # A tagged union puts the op between the step index and the field: drop it.
        loc = [p for i, p in enumerate(first["loc"]) if not (i == 2 and p in OPS)]
        if first["type"] in {"union_tag_not_found", "union_tag_invalid"}:
            loc.append("op")  # a missing or unknown op: name the field
        raise ScenarioError(path, ".".join(str(p) for p in loc) or None, first["msg"]) from None


def _load_steps(path: Path, *, strict: bool) -> tuple[Step, ...]:
    text = _read_confined(path, _MAX_INPUT)
    try:
        raw: Any = loads_bounded(text)
    except ValueError as exc:
        raise ScenarioError(path, None, f"invalid JSON: {exc}") from None
    if strict:
        _check_strict(path, raw)
    try:
        steps = _Input.model_validate(raw).steps
    except ValidationError as exc:
        field, msg = _field_of(exc)
        raise ScenarioError(path, field, msg) from None
    for index, step in enumerate(steps):
        if step.op in OPS.prompt_ops and step.text is None:
            raise ScenarioError(path, f"steps.{index}.text", f"a {step.op} step needs a text")
        for field, value in step_paths(step):
            problem = path_problem(value)
            if problem is not None:
                raise ScenarioError(path, f"steps.{index}.{field}", problem)
    return tuple(steps)


def _check_expect_prompts(path: Path, meta: SnapshotMeta, steps: Sequence[Step]) -> None:
    prompt_ops = OPS.prompt_ops
    prompts = sum(1 for s in steps if s.op in prompt_ops)
    seen: set[int] = set()
    for index, exp in enumerate(meta.expect or []):
        if exp.prompt > prompts:
            raise ScenarioError(
                path,
                f"expect.{index}.prompt",
                f"prompt {exp.prompt} does not exist: input.json has {prompts} prompt steps",
            )
        if exp.prompt in seen:
            raise ScenarioError(path, f"expect.{index}.prompt", f"prompt {exp.prompt} twice")
        seen.add(exp.prompt)


def _session_files(folder: Path) -> tuple[Path, ...]:
    files = ScenarioFiles(folder)
    numbers = files.child_numbers()
    if numbers != list(range(1, len(numbers) + 1)):
        raise ScenarioError(
            folder,
            "session.N.jsonl",
            f"child fixtures must be numbered 1..N without gaps, found {numbers}",
        )
    primary = files.session(0)
    if numbers and not primary.is_file():
        raise ScenarioError(primary, None, f"child fixtures exist but {primary.name} is missing")
    found = [primary] if primary.is_file() else []
    found += [files.session(n) for n in numbers]
    return tuple(found)


def is_upstream_recording(folder: Path) -> bool:
    """Whether a folder holds upstream's recorded files: the June harness's
    ``stdout.golden.jsonl``, or the later one's ``stdout.expected.jsonl`` beside a
    ``session.jsonl``, and never our ``model.script.json``. Lacking ``snapshot.yml`` alone never
    makes a folder upstream's."""
    files = ScenarioFiles(folder)
    if (folder / files.UPSTREAM_STDOUT).is_file():
        return True
    recorded = (folder / files.STDOUT).is_file() and files.session(0).is_file()
    return recorded and not files.script.exists()


def load_scenario(folder: Path) -> Scenario:
    """Read and validate one scenario folder.

    Raises:
        ScenarioError: naming the file and field at fault.
    """
    folder = folder.resolve()
    files = ScenarioFiles(folder)
    if not os.path.lexists(files.input):
        raise ScenarioError(files.input, None, f"not a scenario folder: {files.INPUT} missing")
    meta_file = files.meta
    # lexists: a snapshot.yml that is a link (even a dangling one) is read, and refused, by
    # the confined open; it never counts as absent.
    meta = _load_meta(meta_file) if os.path.lexists(meta_file) else None
    if meta is None and not is_upstream_recording(folder):
        raise ScenarioError(
            meta_file,
            None,
            f"missing: a scenario of ours needs {files.META} (write one with "
            f"`dsh-snapshot new`, or see the snapshot README); an upstream recording has "
            f"{files.UPSTREAM_STDOUT}, or {files.STDOUT} with {files.PRIMARY} and no "
            f"{files.SCRIPT}, and this folder has neither",
        )
    steps = _load_steps(files.input, strict=meta is not None)
    if meta is not None:
        _check_expect_prompts(meta_file, meta, steps)
    stdout = files.stdout()
    profile = meta.profile if meta is not None else folder.parent.name
    return Scenario(folder, f"{profile}/{folder.name}", meta, steps, stdout, _session_files(folder))
