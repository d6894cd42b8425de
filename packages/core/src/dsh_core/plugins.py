"""Store backends and model providers as plugins, found by entry point.

A package that adds a session store declares, in its ``pyproject.toml``::

    [project.entry-points."dsh.stores"]
    jsonl = "dsh_persistence_jsonl:STORE_BACKEND"

and a package that adds a model provider::

    [project.entry-points."dsh.models"]
    deepseek = "dsh_llm_deepseek:MODEL_PROVIDER"

Each entry point names a small factory object (:class:`StoreBackend`, :class:`ModelProvider`)
whose ``name`` is the entry point's name. Everything that needs a store or a model (the agent,
the snapshot runner, its CLI and pytest plugin, the compat tool) looks it up here by name, so a
new backend or provider is one new package and no edit elsewhere. The lookup is as
``importlib.metadata.entry_points(group=...)`` is meant to be used (pytest finds its plugins
under ``pytest11`` the same way); a plugin is imported only when it is asked for.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Generator, Iterable
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from typing import Any, Protocol, TypeVar, runtime_checkable

from pydantic_settings import BaseSettings

from dsh_core._errors import DshError
from dsh_core._events import SessionHeader
from dsh_core._model import ModelClient
from dsh_core._session import SessionStore

__all__ = [
    "DEFAULT_MODEL_PROVIDER",
    "DEFAULT_STORE_BACKEND",
    "MODEL_GROUP",
    "STORE_GROUP",
    "BrokenPluginError",
    "ModelProvider",
    "PluginError",
    "StoreBackend",
    "UnknownPluginError",
    "create_model",
    "default_store_backend_names",
    "env_prefix",
    "model_env_prefixes",
    "model_provider",
    "model_provider_names",
    "open_store",
    "preload",
    "secret_env_names",
    "store_backend",
    "store_backend_names",
    "store_env_prefixes",
    "store_run",
]

STORE_GROUP = "dsh.stores"
MODEL_GROUP = "dsh.models"
DEFAULT_STORE_BACKEND = "jsonl"
"""The store an agent uses when nothing is chosen (``DSH_STORE``)."""
DEFAULT_MODEL_PROVIDER = "deepseek"
"""The model provider an agent and a live recording use when nothing is chosen."""


@runtime_checkable
class StoreBackend(Protocol):
    """What a ``dsh.stores`` entry point names: how to open, list and export one kind of store.

    Every method takes the run's sessions root (a directory path); where the backend keeps
    its data for it (one file per session, one database file, a namespace in a server
    database…) is its own business, so nobody else needs a file name.

    Attributes:
        name: the entry point's name (``jsonl``), as users select it (``DSH_STORE``).
        settings_model: the backend's own pydantic-settings class, or ``None`` when it has none.
        embedded: ``True`` when the data lives under the root itself (files), so every
            machine can run it: the gate's default set is the embedded backends. ``False``
            for a store behind a server, run only when asked for (``--store postgres``).
        env_prefixes: prefixes of the environment variables that configure the backend
            (``("DSH_POSTGRES_", "PG")``); an agent's clean environment keeps them, so the
            agent reaches the store its caller configured. Empty when it needs none.
    """

    name: str
    settings_model: type[BaseSettings] | None
    embedded: bool
    env_prefixes: tuple[str, ...]

    def open(self, root: Path) -> SessionStore:
        """A store over ``root`` (created when missing), open for reading and writing."""
        ...

    def list_sessions(self, root: Path) -> list[SessionHeader]:
        """Headers of every session stored under ``root``, ordered by ``(createdAt, id)``;
        empty when nothing is stored there. Writes nothing.

        Raises:
            DshError: stored data cannot be read (the message names where).
        """
        ...

    def export_log(self, root: Path, session_id: str) -> str:
        """One stored session as DSH JSONL text (header line, then one event per line), rows
        exactly as written: an open turn is *not* closed. Writes nothing.

        Raises:
            SessionNotFoundError: no such session; DshError: it cannot be read.
        """
        ...

    def discard(self, root: Path) -> None:
        """Remove everything stored for ``root``, the sessions root of a finished run, so
        nothing of it outlives the run (a file store removes the folder; a server store
        drops the root's namespace). Nothing stored there is not an error.

        Raises:
            DshError: the store cannot be reached (the message names it).
        """
        ...


@runtime_checkable
class ModelProvider(Protocol):
    """What a ``dsh.models`` entry point names: how to make one kind of model client.

    Attributes:
        name: the entry point's name (``deepseek``), as users select it (``DSH_MODEL_CLIENT``).
        settings_model: the provider's pydantic-settings class (its ``env_prefix`` says which
            environment variables configure it), or ``None``.
        secret_env_names: environment variables holding a secret (an API key): never written
            anywhere, scanned for in recordings, the live key a recording reads.
    """

    name: str
    settings_model: type[BaseSettings] | None
    secret_env_names: tuple[str, ...]

    def create(self) -> ModelClient:
        """A client configured from the environment (``settings_model``'s variables).

        Raises:
            pydantic.ValidationError: a setting is invalid (the caller names the variable).
        """
        ...


class PluginError(DshError):
    """A plugin could not be found or used; the message says which and why."""


class UnknownPluginError(PluginError):
    """No installed package registers the name asked for.

    Attributes:
        group: the entry point group (``dsh.stores``).
        name: the name asked for.
        known: the names that are registered.
    """

    def __init__(self, group: str, name: str, known: list[str]) -> None:
        self.group = group
        self.name = name
        self.known = known
        kind = "store backend" if group == STORE_GROUP else "model provider"
        choices = ", ".join(known) if known else "none is installed"
        super().__init__(
            f"unknown {kind} {name!r}: choose one of {choices} "
            f"(packages register them under the entry point group {group!r})"
        )


class BrokenPluginError(PluginError):
    """A registered plugin fails to load or is not what its group promises.

    Attributes:
        group, name: the entry point.
        distribution: the installed distribution that declares it (``"?"`` when unknown).
        reason: what went wrong.
    """

    def __init__(self, entry: EntryPoint, reason: str) -> None:
        self.group = entry.group
        self.name = entry.name
        self.distribution = _distribution_of(entry)
        self.reason = reason
        super().__init__(
            f"plugin {entry.name!r} ({entry.group} entry point {entry.value!r} of "
            f"distribution {self.distribution}) is broken: {reason}"
        )


def _distribution_of(entry: EntryPoint) -> str:
    dist = entry.dist
    if dist is None:
        return "?"
    return f"{dist.name} {dist.version}"


@functools.cache
def _entries(group: str) -> dict[str, EntryPoint]:
    # Installed distributions do not change while a process runs: their metadata is read
    # once per group (the first read costs ~25 ms, later ones a few: the path caches warm).
    return {entry.name: entry for entry in entry_points(group=group)}


def preload(stores: Iterable[str] | None = None) -> None:
    """Read the installed plugins and import store backends and every model provider now, so
    that processes forked later (the warm agent's children) find them without another lookup
    or import. A broken plugin is left for the lookup that needs it to report.

    Args:
        stores: the store backends to import (default: every installed one). A caller that
            knows which its children open names them: a server store's driver (``psycopg``,
            ~50 ms) is then imported only by a child that uses it.
    """
    for name in store_backend_names() if stores is None else stores:
        with contextlib.suppress(PluginError):
            store_backend(name)
    # A replayed run imports the live provider too (its request settings are compared with
    # the recording's): every provider together costs ~15 ms here, ~8 ms in each child.
    for name in model_provider_names():
        with contextlib.suppress(PluginError):
            model_provider(name)


def _names(group: str) -> list[str]:
    return sorted(_entries(group))


def store_backend_names() -> list[str]:
    """Names of every installed store backend, sorted."""
    return _names(STORE_GROUP)


def default_store_backend_names() -> list[str]:
    """The installed store backends a run uses when none is chosen: the embedded ones (their
    data lives under the sessions root, so they need no server), ``DEFAULT_STORE_BACKEND``
    first, then by name. A backend that fails to load stays in, so that using it reports why.
    """
    names: list[str] = []
    for name in store_backend_names():
        try:
            embedded = store_backend(name).embedded
        except PluginError:
            embedded = True
        if embedded:
            names.append(name)
    return sorted(names, key=lambda name: (name != DEFAULT_STORE_BACKEND, name))


def model_provider_names() -> list[str]:
    """Names of every installed model provider, sorted."""
    return _names(MODEL_GROUP)


_P = TypeVar("_P")


@functools.cache
def _load(group: str, name: str) -> Any:
    entries = _entries(group)
    entry = entries.get(name)
    if entry is None:
        raise UnknownPluginError(group, name, sorted(entries))
    try:
        return entry, entry.load()
    except Exception as exc:  # any import-time failure of a third-party plugin
        raise BrokenPluginError(entry, f"loading it raised {type(exc).__name__}: {exc}") from exc


# The plugin objects already checked, by (group, name): a runtime-checkable Protocol's
# isinstance costs ~40 µs, and a gate looks the same few plugins up many times per run.
_checked: dict[tuple[str, str], object] = {}


def _plugin(group: str, name: str, kind: type[_P], what: str) -> _P:
    entry, plugin = _load(group, name)
    if _checked.get((group, name)) is plugin:
        return plugin
    if not isinstance(plugin, kind):
        raise BrokenPluginError(
            entry, f"it names a {type(plugin).__name__}, not a {what} ({kind.__name__})"
        )
    plugin_name = getattr(plugin, "name", None)
    if plugin_name != name:
        raise BrokenPluginError(entry, f"its factory calls itself {plugin_name!r}, not {name!r}")
    _checked[group, name] = plugin
    return plugin


def store_backend(name: str) -> StoreBackend:
    """The store backend registered as ``name``.

    Raises:
        UnknownPluginError: none is (the message lists the installed ones).
        BrokenPluginError: it fails to import or is not a :class:`StoreBackend`.
    """
    return _plugin(STORE_GROUP, name, StoreBackend, "store backend")


def model_provider(name: str) -> ModelProvider:
    """The model provider registered as ``name``.

    Raises:
        UnknownPluginError: none is (the message lists the installed ones).
        BrokenPluginError: it fails to import or is not a :class:`ModelProvider`.
    """
    return _plugin(MODEL_GROUP, name, ModelProvider, "model provider")


# Structural checks of what a factory hands back: the contracts are Protocols, so a wrong
# object would otherwise fail much later, far from the plugin that made it.
_STORE_METHODS = ("create", "resume", "load", "list_sessions", "close")


def _check_made(name: str, group: str, made: object, methods: tuple[str, ...], what: str) -> None:
    missing = [m for m in methods if not callable(getattr(made, m, None))]
    if missing:
        entry = _entries(group)[name]
        raise BrokenPluginError(
            entry,
            f"its factory returned a {type(made).__name__}, not a {what} "
            f"(missing {', '.join(missing)})",
        )


def open_store(name: str, root: Path) -> SessionStore:
    """Open the store backend ``name`` over the sessions root ``root``.

    Raises:
        UnknownPluginError, BrokenPluginError: as :func:`store_backend`; also when the factory
            returns something that is not a ``SessionStore``.
        DshError, OSError: the store itself cannot be opened.
    """
    store = store_backend(name).open(root)
    _check_made(name, STORE_GROUP, store, _STORE_METHODS, "SessionStore")
    return store


@contextlib.contextmanager
def store_run(name: str, root: Path) -> Generator[StoreBackend]:
    """The store backend ``name`` for one run over the temporary sessions root ``root``: what
    the run stored there is discarded on the way out (:meth:`StoreBackend.discard`), whether
    the run succeeded or not. Harvest the logs inside the block.

    Raises:
        UnknownPluginError, BrokenPluginError: as :func:`store_backend`.
    """
    backend = store_backend(name)
    try:
        yield backend
    finally:
        backend.discard(root)


def create_model(name: str) -> ModelClient:
    """A client of the model provider ``name``, configured from the environment.

    Raises:
        UnknownPluginError, BrokenPluginError: as :func:`model_provider`; also when the factory
            returns something that is not a ``ModelClient``.
        pydantic.ValidationError: one of the provider's settings is invalid.
    """
    client = model_provider(name).create()
    _check_made(name, MODEL_GROUP, client, ("stream", "aclose"), "ModelClient")
    return client


def _loadable_providers() -> list[ModelProvider]:
    # A provider that fails to load is left out (its own lookup reports it): a key scan or
    # a clean test environment must not stop because an unrelated plugin is broken.
    providers: list[ModelProvider] = []
    for name in model_provider_names():
        try:
            providers.append(model_provider(name))
        except PluginError:
            continue
    return providers


def secret_env_names() -> tuple[str, ...]:
    """Every environment variable an installed model provider keeps a secret in, sorted."""
    return tuple(sorted({n for p in _loadable_providers() for n in p.secret_env_names}))


def env_prefix(provider: ModelProvider) -> str:
    """The ``env_prefix`` of the provider's settings (``OPENAI_``): the variables that
    configure it; empty when it has no settings model or its settings name no prefix."""
    if provider.settings_model is None:
        return ""
    return str(provider.settings_model.model_config.get("env_prefix") or "")


def model_env_prefixes() -> tuple[str, ...]:
    """The ``env_prefix`` of every installed model provider's settings (``OPENAI_``…),
    sorted: what a clean environment for a test agent leaves out."""
    prefixes = {env_prefix(p) for p in _loadable_providers()}
    return tuple(sorted(prefix for prefix in prefixes if prefix))


def store_env_prefixes() -> tuple[str, ...]:
    """The ``env_prefixes`` of every installed store backend (``DSH_POSTGRES_``, ``PG``…),
    sorted: what a clean environment for a test agent keeps, so that the agent reaches the
    store its caller configured. A backend that fails to load is left out."""
    prefixes: set[str] = set()
    for name in store_backend_names():
        try:
            prefixes.update(store_backend(name).env_prefixes)
        except PluginError:
            continue
    return tuple(sorted(prefix for prefix in prefixes if prefix))
