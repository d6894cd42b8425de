"""``dsh_core.plugins``: lookup by entry point, and every way a plugin can be missing or broken.

Each test installs a real distribution (a ``.dist-info`` folder with ``entry_points.txt`` and
a module beside it) on ``sys.path``, which is exactly what ``importlib.metadata`` reads for an
installed package; nothing is patched inside the registry.
"""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from pydantic_settings import BaseSettings

from dsh_core import CreateOptions, SessionMeta, render_log
from dsh_core import plugins as registry
from dsh_core.plugins import (
    DEFAULT_STORE_BACKEND,
    MODEL_GROUP,
    STORE_GROUP,
    BrokenPluginError,
    UnknownPluginError,
    create_model,
    default_store_backend_names,
    env_prefix,
    model_env_prefixes,
    model_provider,
    model_provider_names,
    open_store,
    secret_env_names,
    store_backend,
    store_backend_names,
    store_env_prefixes,
    store_run,
)
from dsh_core.testing import ScriptedModel

_MODULE = """
from pathlib import Path

from pydantic_settings import BaseSettings, SettingsConfigDict

from dsh_core import SessionNotFoundError, render_log
from dsh_core.testing import InMemorySessionStore, ScriptedModel

STORES = {}


class FakeSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="FAKE_MODEL_")

    api_key: str | None = None
    steps: int = 1


class Backend:
    settings_model = None

    def __init__(self, name, made=None, embedded=True, env_prefixes=()):
        self.name = name
        self._made = made
        self.embedded = embedded
        self.env_prefixes = env_prefixes
        self.discarded = []

    def open(self, root):
        if self._made is not None:
            return self._made
        return STORES.setdefault(Path(root), InMemorySessionStore())

    def list_sessions(self, root):
        store = STORES.get(Path(root))
        return [] if store is None else store.list_sessions()

    def export_log(self, root, session_id):
        store = STORES.get(Path(root))
        if store is None:
            raise SessionNotFoundError(session_id)
        log = store.load(session_id)
        return render_log(log.header, log.events)

    def discard(self, root):
        self.discarded.append(Path(root))
        STORES.pop(Path(root), None)


class Provider:
    settings_model = FakeSettings
    secret_env_names = ("FAKE_MODEL_API_KEY",)

    def __init__(self, name, made=None):
        self.name = name
        self._made = made

    def create(self):
        FakeSettings()
        return self._made if self._made is not None else ScriptedModel([])


GOOD_STORE = Backend("good")
SERVER_STORE = Backend("server", embedded=False, env_prefixes=("FAKE_SERVER_", "FAKEPG"))
GOOD_MODEL = Provider("good")
WRONG_NAME = Backend("another-name")
NOT_A_FACTORY = "a string is no factory"
STORE_MAKES_A_LIST = Backend("store-makes-a-list", made=[])
MODEL_MAKES_AN_INT = Provider("model-makes-an-int", made=42)
"""

_ENTRY_POINTS = {
    STORE_GROUP: {
        "good": "fake_dsh_plugins:GOOD_STORE",
        "server": "fake_dsh_plugins:SERVER_STORE",
        "fails-to-import": "fake_dsh_plugins_missing_module:GOOD_STORE",
        "raises-on-import": "fake_dsh_plugins_raising:ANYTHING",
        "missing-attribute": "fake_dsh_plugins:NO_SUCH_NAME",
        "not-a-factory": "fake_dsh_plugins:NOT_A_FACTORY",
        "wrong-name": "fake_dsh_plugins:WRONG_NAME",
        "store-makes-a-list": "fake_dsh_plugins:STORE_MAKES_A_LIST",
        "lazy": "fake_dsh_plugins_lazy:LAZY_STORE",
    },
    MODEL_GROUP: {
        "good": "fake_dsh_plugins:GOOD_MODEL",
        "model-makes-an-int": "fake_dsh_plugins:MODEL_MAKES_AN_INT",
        "a-store-here": "fake_dsh_plugins:GOOD_STORE",
        "fails-to-import": "fake_dsh_plugins_missing_module:GOOD_MODEL",
        "lazy-model": "fake_dsh_plugins_lazy:LAZY_MODEL",
    },
}


def _clear_caches() -> None:
    registry._entries.cache_clear()
    registry._load.cache_clear()
    registry._checked.clear()


@pytest.fixture
def installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A distribution ``fake-dsh-plugins 1.0`` registering good and broken plugins."""
    site = tmp_path / "site"
    dist_info = site / "fake_dsh_plugins-1.0.dist-info"
    dist_info.mkdir(parents=True)
    (dist_info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: fake-dsh-plugins\nVersion: 1.0\n", encoding="utf-8"
    )
    sections = [
        f"[{group}]\n" + "".join(f"{name} = {value}\n" for name, value in entries.items())
        for group, entries in _ENTRY_POINTS.items()
    ]
    (dist_info / "entry_points.txt").write_text("\n".join(sections), encoding="utf-8")
    (site / "fake_dsh_plugins.py").write_text(textwrap.dedent(_MODULE), encoding="utf-8")
    (site / "fake_dsh_plugins_lazy.py").write_text(
        "from fake_dsh_plugins import Backend, Provider\n"
        "LAZY_STORE = Backend('lazy')\nLAZY_MODEL = Provider('lazy-model')\n",
        encoding="utf-8",
    )
    (site / "fake_dsh_plugins_raising.py").write_text(
        "raise RuntimeError('this plugin cannot start here')\n", encoding="utf-8"
    )
    monkeypatch.syspath_prepend(str(site))  # pyright: ignore[reportUnknownMemberType]
    _clear_caches()
    yield site
    _clear_caches()


def test_names_come_from_the_installed_entry_points(installed: Path) -> None:
    assert {"good", "fails-to-import", "wrong-name"} <= set(store_backend_names())
    assert store_backend_names() == sorted(store_backend_names())
    assert {"good", "model-makes-an-int"} <= set(model_provider_names())
    assert "FAKE_MODEL_API_KEY" in secret_env_names()
    assert "FAKE_MODEL_" in model_env_prefixes()
    assert env_prefix(model_provider("good")) == "FAKE_MODEL_"


def test_preload_imports_the_named_stores_and_every_model_provider(installed: Path) -> None:
    sys.modules.pop("fake_dsh_plugins_lazy", None)
    registry.preload(["good", "fails-to-import"])  # a broken plugin is skipped, never raised
    # Only the stores named, but every model provider (the lazy module holds one of each).
    assert {name for (group, name) in registry._checked if group == STORE_GROUP} == {"good"}
    assert "lazy-model" in {name for (group, name) in registry._checked if group == MODEL_GROUP}
    assert "fake_dsh_plugins_lazy" in sys.modules
    registry.preload()
    assert (STORE_GROUP, "lazy") in registry._checked


def test_a_provider_without_settings_has_no_env_prefix() -> None:
    class Unconfigured:
        name = "unconfigured"
        settings_model: type[BaseSettings] | None = None
        secret_env_names: tuple[str, ...] = ()

        def create(self) -> ScriptedModel:
            return ScriptedModel([])

    assert env_prefix(Unconfigured()) == ""


def test_a_good_store_backend_opens_lists_and_exports(installed: Path, tmp_path: Path) -> None:
    backend = store_backend("good")
    assert backend is store_backend("good")  # loaded once
    root = tmp_path / "sessions"
    assert backend.list_sessions(root) == []
    store = open_store("good", root)
    session = store.create(CreateOptions("s1", meta=SessionMeta(created_at=5, cwd="/w")))
    session.close()
    [header] = backend.list_sessions(root)
    assert (header.id, header.created_at, header.cwd) == ("s1", 5, "/w")
    log = store.load("s1")
    assert backend.export_log(root, "s1") == render_log(log.header, log.events)


def test_a_good_model_provider_creates_a_client(installed: Path) -> None:
    assert isinstance(create_model("good"), ScriptedModel)
    assert model_provider("good").secret_env_names == ("FAKE_MODEL_API_KEY",)


def test_an_unknown_name_lists_the_known_ones(installed: Path) -> None:
    with pytest.raises(UnknownPluginError) as caught:
        store_backend("no-such-store")
    message = str(caught.value)
    assert message.startswith("unknown store backend 'no-such-store': choose one of ")
    assert f"choose one of {', '.join(store_backend_names())} (" in message
    assert "good" in message
    assert "'dsh.stores'" in message
    assert caught.value.known == store_backend_names()
    with pytest.raises(UnknownPluginError, match=r"unknown model provider 'gpt': .*good"):
        create_model("gpt")


def test_an_unknown_name_with_nothing_installed_says_so() -> None:
    message = str(UnknownPluginError(STORE_GROUP, "jsonl", []))
    assert message.startswith("unknown store backend 'jsonl': choose one of none is installed")


_Lookup = Callable[[str], object]


@pytest.mark.parametrize(
    ("lookup", "name", "reason"),
    [
        (store_backend, "fails-to-import", "loading it raised ModuleNotFoundError: No module"),
        (store_backend, "raises-on-import", "RuntimeError: this plugin cannot start here"),
        (store_backend, "missing-attribute", "AttributeError"),
        (store_backend, "not-a-factory", "it names a str, not a store backend (StoreBackend)"),
        (store_backend, "wrong-name", "its factory calls itself 'another-name', not 'wrong-name'"),
        (model_provider, "a-store-here", "not a model provider (ModelProvider)"),
        (model_provider, "fails-to-import", "ModuleNotFoundError"),
    ],
)
def test_a_broken_plugin_names_its_entry_point_and_distribution(
    installed: Path, lookup: _Lookup, name: str, reason: str
) -> None:
    with pytest.raises(BrokenPluginError) as caught:
        lookup(name)
    message = str(caught.value)
    assert message.startswith(f"plugin {name!r} (")
    assert "of distribution fake-dsh-plugins 1.0) is broken: " in message
    assert reason in message
    assert caught.value.distribution == "fake-dsh-plugins 1.0"
    assert caught.value.name == name


def test_a_factory_that_makes_the_wrong_thing_is_refused(installed: Path, tmp_path: Path) -> None:
    with pytest.raises(BrokenPluginError) as store_error:
        open_store("store-makes-a-list", tmp_path)
    assert "its factory returned a list, not a SessionStore (missing create, resume" in str(
        store_error.value
    )
    with pytest.raises(BrokenPluginError) as model_error:
        create_model("model-makes-an-int")
    assert "returned a int, not a ModelClient (missing stream, aclose)" in str(model_error.value)


def test_a_provider_with_a_bad_setting_raises_the_settings_error(
    installed: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pydantic import ValidationError  # noqa: PLC0415 - this test only

    monkeypatch.setenv("FAKE_MODEL_STEPS", "many")
    with pytest.raises(ValidationError, match="steps"):
        create_model("good")


def test_secret_names_skip_a_broken_provider(installed: Path) -> None:
    # "a-store-here" and "fails-to-import" are broken; the good provider's secret still counts
    assert secret_env_names().count("FAKE_MODEL_API_KEY") == 1


def test_the_default_backends_leave_a_server_store_out(installed: Path) -> None:
    names = default_store_backend_names()
    assert "server" in store_backend_names()
    assert "server" not in names
    assert "good" in names
    # a broken backend stays in: using it is what reports why
    assert "fails-to-import" in names
    # the default one, when installed, comes first (the one outputs are written from)
    assert names[0] == DEFAULT_STORE_BACKEND or DEFAULT_STORE_BACKEND not in names


def test_store_env_prefixes_are_every_loadable_backends(installed: Path) -> None:
    prefixes = store_env_prefixes()
    assert {"FAKE_SERVER_", "FAKEPG"} <= set(prefixes)
    assert list(prefixes) == sorted(prefixes)


def test_a_store_run_discards_its_root_even_when_the_run_fails(
    installed: Path, tmp_path: Path
) -> None:
    root = tmp_path / "run"
    backend = store_backend("server")
    with store_run("server", root) as used:
        assert used is backend
        open_store("server", root).create(CreateOptions("s1")).close()
        assert [h.id for h in backend.list_sessions(root)] == ["s1"]
    assert backend.list_sessions(root) == []
    with pytest.raises(RuntimeError, match="the run broke"), store_run("server", root):
        raise RuntimeError("the run broke")
    discarded: object = getattr(backend, "discarded")  # noqa: B009 - the fake's own record
    assert discarded == [root, root]


def test_a_store_run_of_an_unknown_backend_discards_nothing(installed: Path) -> None:
    with pytest.raises(UnknownPluginError), store_run("nope", Path("/nonexistent")):
        pass
