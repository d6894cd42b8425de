"""The ``llm_proxy`` pytest fixture: record a test's model calls once, replay them forever.

``llm_proxy`` starts the proxy for one test and yields its base URL (give it to the SDK as
``base_url``). The recording lives next to the test file, one folder per test:
``<test dir>/llm_recordings/<module>/<test name>/``. The mode comes from ``--llm-proxy-mode``
(like pytest-recording's ``--record-mode``):

- ``replay`` (default): keyless; a test without a recording fails, saying how to make one.
- ``once``: replay when the test has a recording, record it when not.
- ``record``: record again; the test's folder is replaced only once the new recording is
  complete and clean (the test passed): a failing test, or a missing key, leaves the old one.
- ``accept``: keyless; take a request-side change (a new prompt, system prompt, tools or
  model settings) and keep the recorded answers: the test's new requests are recorded with
  the old answers, which are NOT asked again. The folder is replaced only when the test passed
  and used the recorded calls exactly (a change that needs more, fewer or other calls needs
  ``record``).

Scrubbers (``llm_proxy_scrub`` in the ini file, one ``{{name}}=REGEX`` a line, or the
``llm_proxy_scrub`` fixture returning a :class:`dsh_llm_proxy.Scrub`) turn run-specific text
(a temp path, a date) into placeholders before it is written and before a replayed request is
compared with the recorded one.

Recording needs the upstream key in the environment variable ``--llm-proxy-key-env`` names
(default: the default model provider's, see ``upstream_defaults``) and goes to
``--llm-proxy-upstream`` (the same provider's API root unless given); a project can override the
``llm_proxy_upstream`` / ``llm_proxy_key_env`` fixtures instead. A replay that did not use the
recording exactly (a script never bound, a session that made fewer or more calls, a call from
an unrecorded session) fails the test at teardown, naming each problem.
"""

from __future__ import annotations

import re
from collections.abc import Generator, Iterator
from pathlib import Path

import pytest

from dsh_core import DshError

# Every pytest run with this package installed loads the plugin: the server (starlette, httpx,
# uvicorn) is imported only by a test that asks for the fixture.
from dsh_llm_proxy._defaults import upstream_defaults
from dsh_llm_proxy._publish import publish_recording, scratch_root
from dsh_llm_proxy._scrub import Scrub, parse_assignment

__all__ = [
    "MODES",
    "llm_proxy",
    "llm_proxy_key_env",
    "llm_proxy_scrub",
    "llm_proxy_upstream",
    "recording_dir",
]

MODES = ("replay", "once", "record", "accept")
RECORDINGS = "llm_recordings"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("dsh-llm-proxy", "record and replay model calls through the proxy")
    group.addoption(
        "--llm-proxy-mode",
        choices=MODES,
        default="replay",
        help="replay (default, keyless), once (record what has no recording), record, or "
        "accept (keyless: new requests, the recorded answers kept)",
    )
    group.addoption(
        "--llm-proxy-upstream",
        help="upstream API root when recording (default: the default model provider's)",
    )
    group.addoption(
        "--llm-proxy-key-env",
        help="environment variable holding the upstream key when recording (default: the "
        "default model provider's key variable)",
    )
    parser.addini(
        "llm_proxy_scrub",
        type="linelist",
        default=[],
        help="scrubbers, one {{name}}=REGEX a line: matches become {{name}} before a recording "
        "is written and before a replayed request is compared",
    )


_OUTCOME = pytest.StashKey[bool]()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Remember whether the test body passed: a recording is kept only then."""
    report = yield
    if report.when == "call":
        item.stash[_OUTCOME] = report.passed
    return report


def recording_dir(node: pytest.Item) -> Path:
    """``<test dir>/llm_recordings/<module>/<test name>``, the name made filesystem-safe."""
    path = node.path
    name = re.sub(r"[^A-Za-z0-9_.-]+", "-", node.name).strip("-")
    return path.parent / RECORDINGS / path.stem / name


@pytest.fixture
def llm_proxy_upstream(request: pytest.FixtureRequest) -> str:
    """The upstream the proxy records against (``--llm-proxy-upstream``)."""
    given = request.config.getoption("--llm-proxy-upstream")
    return str(given) if given else upstream_defaults()[0]


@pytest.fixture
def llm_proxy_key_env(request: pytest.FixtureRequest) -> str:
    """The environment variable holding the upstream key (``--llm-proxy-key-env``)."""
    given = request.config.getoption("--llm-proxy-key-env")
    return str(given) if given else upstream_defaults()[1]


@pytest.fixture
def llm_proxy_scrub(request: pytest.FixtureRequest) -> Scrub:
    """The scrubbers of the ini option ``llm_proxy_scrub`` (override for others)."""
    lines = [str(line) for line in request.config.getini("llm_proxy_scrub")]
    try:
        return Scrub.build(patterns=[parse_assignment(line, "llm_proxy_scrub") for line in lines])
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from None


@pytest.fixture
def llm_proxy(request: pytest.FixtureRequest) -> Iterator[str]:
    """The base URL of a proxy recording or replaying this test's model calls."""
    from dsh_llm_proxy._server import ProxyServer  # noqa: PLC0415 - see the imports above

    mode = str(request.config.getoption("--llm-proxy-mode"))
    node = request.node
    assert isinstance(node, pytest.Item)
    folder = recording_dir(node)
    scrub = request.getfixturevalue("llm_proxy_scrub")
    assert isinstance(scrub, Scrub)
    if mode == "once":
        mode = "replay" if folder.is_dir() else "record"
    if mode == "replay":
        if not folder.is_dir():
            pytest.fail(
                f"no recording for this test in {folder}: run it once with "
                "--llm-proxy-mode=once (or record) and the upstream key set",
                pytrace=False,
            )
        with ProxyServer.replay(folder, scrub=scrub) as server:
            yield server.base_url
            problems = server.problems()
        if problems:
            pytest.fail(
                "the recording was not consumed exactly:\n  " + "\n  ".join(problems),
                pytrace=False,
            )
        return
    if mode == "accept":
        yield from _accept(folder, scrub, node)
        return
    # Record into a scratch folder beside the recording: the old one stays until the new one
    # is complete and clean. Only recording needs an upstream and a key.
    scratch = scratch_root(folder)
    try:
        server = ProxyServer.record(
            scratch,
            upstream=str(request.getfixturevalue("llm_proxy_upstream")),
            api_key_env=str(request.getfixturevalue("llm_proxy_key_env")),
            scrub=scrub,
        )
    except DshError as exc:
        pytest.fail(f"{exc}; the recording in {folder} is kept as it was", pytrace=False)
    with server:
        yield server.base_url
    # A failed test's recording is dropped (its failure is the report); the old one stays.
    publish_recording(scratch, folder, keep=node.stash.get(_OUTCOME, False))


def _accept(folder: Path, scrub: Scrub, node: pytest.Item) -> Iterator[str]:
    """``--llm-proxy-mode=accept``: record the test's requests into a scratch folder against
    a replay of its recording that answers changed requests anyway; publish only when the
    test passed and the recording was used exactly."""
    from dsh_llm_proxy._server import ProxyServer  # noqa: PLC0415 - see the imports above

    if not folder.is_dir():
        pytest.fail(
            f"no recording for this test in {folder}: accept keeps recorded answers, so "
            "record one first (--llm-proxy-mode=once with the upstream key set)",
            pytrace=False,
        )
    scratch = scratch_root(folder)
    with ProxyServer.replay(folder, scrub=scrub, accept_drift=True) as upstream:
        recorder = ProxyServer.record(
            scratch, upstream=upstream.base_url, api_key="recorded-answers", scrub=scrub
        )
        with recorder:
            yield recorder.base_url
        problems = upstream.problems()
        engine = upstream.engine
        accepted = list(getattr(engine, "accepted", []))
    passed = node.stash.get(_OUTCOME, False)
    publish_recording(scratch, folder, keep=passed and not problems)
    if problems:
        pytest.fail(
            f"accept: the recorded answers do not fit the new requests, {folder} is kept as "
            "it was (record again: --llm-proxy-mode=record):\n  " + "\n  ".join(problems),
            pytrace=False,
        )
    if passed:
        # Said plainly in the test's output: these answers were not asked for again.
        print(
            f"dsh-llm-proxy accept: {folder}: the new requests are recorded with the recorded "
            f"answers; the model was NOT asked again ({len(accepted)} changed request(s))"
        )
