"""The ``llm_proxy`` pytest fixture: record a test's model calls once, replay them forever.

``llm_proxy`` starts the proxy for one test and yields its base URL (give it to the SDK as
``base_url``). The recording lives next to the test file, one folder per test:
``<test dir>/llm_recordings/<module>/<test name>/``. The mode comes from ``--llm-proxy-mode``
(like pytest-recording's ``--record-mode``):

- ``replay`` (default): keyless; a test without a recording fails, saying how to make one.
- ``once``: replay when the test has a recording, record it when not.
- ``record``: record again, replacing the test's folder.

Recording needs the upstream key in the environment variable ``--llm-proxy-key-env`` names
(default ``DEEPSEEK_API_KEY``) and goes to ``--llm-proxy-upstream``; a project can override the
``llm_proxy_upstream`` / ``llm_proxy_key_env`` fixtures instead. A replay that did not use the
recording exactly (a script never bound, a session that made fewer or more calls, a call from
an unrecorded session) fails the test at teardown, naming each problem.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

# Every pytest run with this package installed loads the plugin: the server (starlette, httpx,
# uvicorn) is imported only by a test that asks for the fixture.
from dsh_llm_proxy._defaults import DEFAULT_UPSTREAM

__all__ = ["MODES", "llm_proxy", "llm_proxy_key_env", "llm_proxy_upstream", "recording_dir"]

MODES = ("replay", "once", "record")
RECORDINGS = "llm_recordings"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("dsh-llm-proxy", "record and replay model calls through the proxy")
    group.addoption(
        "--llm-proxy-mode",
        choices=MODES,
        default="replay",
        help="replay (default, keyless), once (record what has no recording) or record",
    )
    group.addoption(
        "--llm-proxy-upstream",
        default=DEFAULT_UPSTREAM,
        help=f"upstream API root when recording (default {DEFAULT_UPSTREAM})",
    )
    group.addoption(
        "--llm-proxy-key-env",
        default="DEEPSEEK_API_KEY",
        help="environment variable holding the upstream key when recording",
    )


def recording_dir(node: pytest.Item) -> Path:
    """``<test dir>/llm_recordings/<module>/<test name>``, the name made filesystem-safe."""
    path = node.path
    name = re.sub(r"[^A-Za-z0-9_.-]+", "-", node.name).strip("-")
    return path.parent / RECORDINGS / path.stem / name


@pytest.fixture
def llm_proxy_upstream(request: pytest.FixtureRequest) -> str:
    """The upstream the proxy records against (``--llm-proxy-upstream``)."""
    return str(request.config.getoption("--llm-proxy-upstream"))


@pytest.fixture
def llm_proxy_key_env(request: pytest.FixtureRequest) -> str:
    """The environment variable holding the upstream key (``--llm-proxy-key-env``)."""
    return str(request.config.getoption("--llm-proxy-key-env"))


@pytest.fixture
def llm_proxy(request: pytest.FixtureRequest) -> Iterator[str]:
    """The base URL of a proxy recording or replaying this test's model calls."""
    from dsh_llm_proxy._server import ProxyServer  # noqa: PLC0415 - see the imports above

    mode = str(request.config.getoption("--llm-proxy-mode"))
    node = request.node
    assert isinstance(node, pytest.Item)
    folder = recording_dir(node)
    if mode == "once":
        mode = "replay" if folder.is_dir() else "record"
    if mode == "replay":
        if not folder.is_dir():
            pytest.fail(
                f"no recording for this test in {folder}: run it once with "
                "--llm-proxy-mode=once (or record) and the upstream key set",
                pytrace=False,
            )
        server = ProxyServer.replay(folder)
    else:
        if folder.exists():
            shutil.rmtree(folder)
        # Only recording needs an upstream and a key: replay never asks for them.
        server = ProxyServer.record(
            folder,
            upstream=str(request.getfixturevalue("llm_proxy_upstream")),
            api_key_env=str(request.getfixturevalue("llm_proxy_key_env")),
        )
    with server:
        yield server.base_url
        problems = server.problems()
    if problems:
        pytest.fail(
            "the recording was not consumed exactly:\n  " + "\n  ".join(problems), pytrace=False
        )
