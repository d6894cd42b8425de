"""pytest plugin: each scenario folder × store backend is one test item.

Inert unless asked: without ``--dsh-snapshots`` it adds one option and collects nothing, so
ordinary runs over ``packages/`` and ``tests/`` are untouched. With it, every folder holding
``input.json`` under the given paths becomes a collector whose items are named by store
backend (a ``dsh.stores`` plugin)::

    pytest --dsh-snapshots snapshots -n auto
    pytest --dsh-snapshots snapshots --splits 2 --group 1      # pytest-split, .test_durations
    DSH_SNAPSHOT=refresh pytest --dsh-snapshots snapshots -n auto

The mode comes from ``DSH_SNAPSHOT`` (``replay`` by default, ``refresh``, ``record``).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import pytest

if TYPE_CHECKING:  # the plugin imports the engine only when a gate runs
    from dsh_snapshot._engine import RecordPreflight
    from dsh_snapshot._result import Verdict

__all__ = ["ScenarioFolder", "ScenarioItem", "ScenarioTree"]

_MODES = ("replay", "refresh", "record")


_OLD_STORE_OPTIONS = ("--dsh-persistence", "--dsh-composition")


def _dest(option: str) -> str:
    return option.lstrip("-").replace("-", "_")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("dsh-snapshot")
    group.addoption(
        "--dsh-snapshots",
        action="store_true",
        default=False,
        help="collect scenario folders (holding input.json) as tests",
    )
    group.addoption(
        "--dsh-store",
        default=None,
        help="comma-separated store backends per scenario (default: every installed "
        "embedded one; a server store only when named)",
    )
    # The option's old names: one concept, one word, "store" (snapshot.yml's key too);
    # deprecated, removed in 0.3.0.
    for old in _OLD_STORE_OPTIONS:
        group.addoption(old, default=None, help=argparse.SUPPRESS)
    group.addoption(
        "--dsh-cold",
        action="store_true",
        default=False,
        help="start every agent as a fresh interpreter instead of forking it from one warm, "
        "pre-imported agent per worker (also DSH_SNAPSHOT_COLD=1)",
    )
    group.addoption(
        "--dsh-timeout",
        type=float,
        default=60.0,
        help="seconds any single wait for the agent may take",
    )


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config) -> None:
    # The scenario tree is data a pull request controls: a conftest.py planted anywhere in it
    # would run in the gate, unsandboxed, the moment pytest collected its folder. A gate run
    # therefore imports no conftest at all (the items need no fixtures).
    if getattr(early_config.known_args_namespace, "dsh_snapshots", False):
        early_config.known_args_namespace.noconftest = True


@pytest.hookimpl(tryfirst=True)
def pytest_collect_directory(path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    if not parent.config.getoption("dsh_snapshots"):
        return None
    tree = parent.config.pluginmanager.get_plugin(_TREE)
    assert isinstance(tree, _ScenarioRoots)  # registered with --dsh-snapshots
    return tree.collector(path, parent)


def _inifile_in_the_tree(config: pytest.Config, roots: _ScenarioRoots) -> Path | None:
    """The configuration file pytest found by itself inside one of the scenario ``roots`` (a
    ``snapshots/pytest.ini`` of a pull request, whose ``addopts`` could deselect a failing
    scenario: red team F13), or ``None``; a file named with ``-c`` is the user's choice."""
    inipath = config.inipath
    if inipath is None or config.option.inifilename:
        return None
    real = inipath.resolve()
    return inipath if any(root in real.parents for root in roots.roots) else None


def pytest_configure(config: pytest.Config) -> None:
    if config.getoption("dsh_snapshots"):
        roots = _ScenarioRoots(config)
        found = _inifile_in_the_tree(config, roots)
        if found is not None:
            raise pytest.UsageError(
                f"pytest took its configuration from {found}, a file inside the scenario tree "
                "(which a pull request controls): name the project's own with -c"
            )
        mode = os.environ.get("DSH_SNAPSHOT", "replay")
        if mode not in _MODES:
            raise pytest.UsageError(f"DSH_SNAPSHOT={mode!r}: choose one of {', '.join(_MODES)}")
        config.pluginmanager.register(roots, _TREE)
        config.pluginmanager.register(_Summary(), "dsh-snapshot-summary")
        for old in _OLD_STORE_OPTIONS:
            if config.getoption(_dest(old)) is not None:
                print(
                    f"dsh-snapshot: {old} is deprecated (removal in 0.3.0), use --dsh-store",
                    file=sys.stderr,
                )
        config.pluginmanager.register(_WarmPool(config), _WARM_POOL)


_WARM_POOL = "dsh-snapshot-warm"
_TREE = "dsh-snapshot-tree"


class _ScenarioRoots:
    """The scenario roots of a gate run, and the one discovery the CLI uses below them.

    pytest's own walk would import ``__init__.py``/``test_*.py`` files planted in the tree and
    skip folders its ``norecursedirs`` names (``build``, ``venv``…) or that hold a
    ``pyvenv.cfg``, so a failing scenario could pass here and fail the CLI. Below a root
    every folder is collected by this plugin instead, from
    :func:`~dsh_snapshot._discover.scenario_folders`: exactly the CLI's scenarios, nothing else.
    """

    def __init__(self, config: pytest.Config) -> None:
        from dsh_snapshot._discover import scenario_root  # noqa: PLC0415 - keep the plugin inert and cheap
        from dsh_snapshot._scenario import ScenarioError  # noqa: PLC0415 - ditto

        here = config.invocation_params.dir
        paths = [here / arg.split("::", 1)[0] for arg in config.args]
        try:  # the CLI's refusals too: a root that is (or passes through) a planted link
            self.roots = [scenario_root(p) for p in paths if p.is_dir()]
        except ScenarioError as exc:
            raise pytest.UsageError(str(exc)) from None
        self._scenarios: set[Path] | None = None
        self.timeout = float(str(config.getoption("dsh_timeout")))

    def scenarios(self) -> set[Path]:
        if self._scenarios is None:
            # Bounded by --dsh-timeout as the CLI's discovery is by --timeout: a tree built to
            # be walked for ever fails here too, rather than being walked and then passing.
            from dsh_snapshot._discover import (  # noqa: PLC0415 - keep the plugin inert and cheap
                DiscoveryTimeoutError,
                scenario_folders,
            )

            deadline = time.monotonic() + self.timeout
            try:
                self._scenarios = {
                    f.resolve() for root in self.roots for f in scenario_folders(root, deadline)
                }
            except DiscoveryTimeoutError:
                raise pytest.UsageError(
                    f"discovery did not finish within --dsh-timeout {self.timeout:g} s"
                ) from None
        return self._scenarios

    def collector(self, path: Path, parent: pytest.Collector) -> pytest.Collector | None:
        """This plugin's collector for a folder at, below or on the way to a root (else None)."""
        real = path.resolve()
        rootpath = parent.config.rootpath.resolve()
        if real in self.scenarios():
            kind: type[pytest.Directory] = ScenarioFolder
        elif any(real.is_relative_to(root) for root in self.roots):
            kind = ScenarioTree
        elif real != rootpath and any(root.is_relative_to(real) for root in self.roots):
            kind = ScenarioTree  # a folder on the way down to a root
        else:
            return None  # not the gate's: pytest's own (the checkout itself is pruned to roots)
        name, nodeid = _shown_names(path, parent)
        return kind.from_parent(parent, path=path, name=name, nodeid=nodeid)  # pyright: ignore[reportUnknownMemberType]


def _shown_names(path: Path, parent: pytest.Collector) -> tuple[str, str | None]:
    """A folder's node name and id with control characters escaped: pytest prints both raw."""
    from dsh_snapshot._safeout import clean  # noqa: PLC0415 - keep the plugin inert and cheap

    try:
        nodeid = path.relative_to(parent.config.rootpath).as_posix()
    except ValueError:
        return clean(path.name), None  # outside the rootdir: pytest's own id
    return clean(path.name), clean(nodeid)


class ScenarioTree(pytest.Directory):
    """A folder of the scenario tree with scenarios further down; its files are never read."""

    def collect(self) -> Iterator[pytest.Collector]:
        tree = self.config.pluginmanager.get_plugin(_TREE)
        assert isinstance(tree, _ScenarioRoots)  # registered with --dsh-snapshots
        real = self.path.resolve()
        below = {
            s.relative_to(real).parts[0]
            for s in tree.scenarios()
            if s.is_relative_to(real) and s != real
        }
        for name in sorted(below):
            node = tree.collector(self.path / name, self)
            if node is not None:
                yield node


class _WarmPool:
    """One warm agent per pytest process (so one per xdist worker), started on first use.

    Each scenario still runs in its own forked process with its own pipes, cwd, environment
    and temporary home; ``--dsh-cold`` (or ``DSH_SNAPSHOT_COLD=1``) starts a fresh
    interpreter per run instead.
    """

    def __init__(self, config: pytest.Config) -> None:
        from dsh_snapshot._warm import cold_by_default  # noqa: PLC0415 - keep the plugin inert and cheap

        self.cold = bool(config.getoption("dsh_cold")) or cold_by_default()
        self._agents: Any = None

    def agents(self) -> Any:
        """The process's :class:`~dsh_snapshot._warm.WarmAgents`, or ``None`` when cold."""
        if self.cold:
            return None
        if self._agents is None:
            from dsh_snapshot._warm import WarmAgents  # noqa: PLC0415 - keep the plugin inert and cheap

            self._agents = WarmAgents(1)  # items run one at a time per process
        return self._agents

    def pytest_unconfigure(self) -> None:
        if self._agents is not None:
            self._agents.close()


class _Summary:
    """Adds up every run into the engine's :class:`~dsh_snapshot._engine.Tally` and prints its
    summary line at the end, as the CLI does.

    ``pytest_runtest_logreport`` runs in the controller under xdist too (with each report's
    ``user_properties``), so the summary covers every worker.
    """

    def __init__(self) -> None:
        from dsh_snapshot._engine import Tally  # noqa: PLC0415 - keep the plugin inert and cheap

        self.tally = Tally()

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        props = dict(report.user_properties)
        if report.when != "call" or "verdict" not in props:
            return
        self.tally.add(
            report.nodeid.split("::", 1)[0],
            cast("Verdict", props["verdict"]),  # set by ScenarioItem
            int(str(props["sessions"])),
            int(str(props["calls_replayed"])),
            props.get("mode") in ("replay", "refresh"),
        )

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        terminalreporter.write_line(f"dsh-snapshot: {self.tally.line()}")


class ScenarioFolder(pytest.Directory):
    """A scenario folder; yields one :class:`ScenarioItem` per store backend."""

    def collect(self) -> Iterator[pytest.Item]:
        from dsh_snapshot._scenario import load_scenario  # noqa: PLC0415 - keep the plugin inert and cheap

        scenario = load_scenario(self.path)
        mode = os.environ.get("DSH_SNAPSHOT", "replay")
        from dsh_core.plugins import (  # noqa: PLC0415 - keep the plugin inert and cheap
            DEFAULT_STORE_BACKEND,
            default_store_backend_names,
            store_backend_names,
        )

        known = store_backend_names()
        # a server store (postgres) runs only when asked for: the default needs no server
        chosen = _chosen_stores(self.config) or default_store_backend_names()
        if mode != "replay":
            chosen = [DEFAULT_STORE_BACKEND]  # outputs are written once, from one run
        for store in scenario.stores(chosen):
            if store not in known:
                raise pytest.UsageError(
                    f"--dsh-store: unknown store backend {store!r}; choose from {', '.join(known)}"
                )
            yield ScenarioItem.from_parent(  # pyright: ignore[reportUnknownMemberType]
                self,
                # pytest prints item names raw (failure headers, the summary): a profile from
                # snapshot.yml could retitle or clear the terminal (red team F12).
                name=_shown_item(f"{scenario.name}[{store}]"),
                scenario=scenario,
                store=store,
                mode=mode,
            )


def _shown_item(name: str) -> str:
    from dsh_snapshot._safeout import clean  # noqa: PLC0415 - keep the plugin inert and cheap

    return clean(name)


def _chosen_stores(config: pytest.Config) -> list[str]:
    text = config.getoption("dsh_store")
    for old in _OLD_STORE_OPTIONS:
        text = text or config.getoption(_dest(old))
    return [c.strip() for c in str(text or "").split(",") if c.strip()]


_PREFLIGHT: list[RecordPreflight] = []


def _record_preflight(config: pytest.Config) -> RecordPreflight:
    """The engine's record preflight, once per process before its first recording (as the
    CLI runs it once per batch): skip without a key, stop the session when the endpoint
    refuses; the preflight, whose key the run records with."""
    if not _PREFLIGHT:
        from dsh_core.plugins import PluginError  # noqa: PLC0415 - record mode only
        from dsh_snapshot._engine import record_preflight  # noqa: PLC0415 - ditto

        capture = config.pluginmanager.get_plugin("capturemanager")

        def tell(line: str) -> None:
            # Past pytest's capture: the user reads it before the key is first sent.
            with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
                print(f"record: {line}", file=sys.stderr)

        try:
            _PREFLIGHT.append(record_preflight(tell))
        except PluginError as exc:  # DSH_RECORD_PROVIDER names nothing usable
            pytest.exit(f"record: {exc}", pytest.ExitCode.USAGE_ERROR)
    preflight = _PREFLIGHT[0]
    if preflight.skipped is not None:
        pytest.skip(f"record: {preflight.skipped}")
    if preflight.stopped is not None:
        pytest.exit(f"record: {preflight.stopped}", 1)
    return preflight


class ScenarioItem(pytest.Item):
    """Run one scenario with one store backend in the mode ``DSH_SNAPSHOT`` names."""

    def __init__(self, *, scenario: Any, store: str, mode: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)  # pyright: ignore[reportUnknownMemberType]
        self.scenario = scenario
        self.store = store
        self.mode = mode

    def runtest(self) -> None:
        from dsh_snapshot._engine import run  # noqa: PLC0415 - keep the plugin inert and cheap
        from dsh_snapshot._settings import SnapshotSettings  # noqa: PLC0415 - ditto

        preflight = _record_preflight(self.config) if self.mode == "record" else None
        pool = self.config.pluginmanager.get_plugin(_WARM_POOL)
        assert isinstance(pool, _WarmPool)  # registered with --dsh-snapshots, as this item is
        # One item is one engine run of one scenario with one backend; pytest-xdist is the
        # parallelism, and each pytest process forks its items from its own warm agent.
        settings = SnapshotSettings.model_validate(
            {
                "mode": self.mode,
                "stores": (self.store,),
                "timeout": float(str(self.config.getoption("dsh_timeout"))),
                "cold": pool.cold,
            }
        )
        if preflight is not None:
            settings = preflight.settings(settings)
        [result] = run(settings, [self.scenario], agents=pool.agents())
        self.user_properties.append(("agent", "fresh interpreter" if pool.cold else "forked"))
        self.user_properties.append(("sessions", result.sessions))
        self.user_properties.append(("calls_replayed", result.calls))
        self.user_properties.append(("verdict", result.verdict))
        self.user_properties.append(("mode", self.mode))
        # The CLI's verdict, whichever shard runs it: a scenario that needs what we lack was
        # not run, and that is never a pass (nor a skip, which a gate reads as one).
        if result.verdict != "pass":
            raise ScenarioFailure(result.failures or [result.summary])

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:
        from dsh_snapshot._safeout import clean  # noqa: PLC0415 - keep the plugin inert and cheap

        if isinstance(excinfo.value, ScenarioFailure):
            return clean("\n".join(excinfo.value.failures))
        return clean(str(super().repr_failure(excinfo, style=style)))

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, None, f"scenario {self.name}"


class ScenarioFailure(Exception):
    """A scenario run found failures (the message lists them)."""

    def __init__(self, failures: list[str]) -> None:
        self.failures = failures
        super().__init__("\n".join(failures))
