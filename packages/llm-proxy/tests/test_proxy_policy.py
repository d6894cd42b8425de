"""The recording proxy's policy over real HTTP (red team 4 F11): the agent writes every request
the key is spent on, so calls in flight, calls per run, ``n``, ``max_tokens`` and the model are
bounded; a call outside the policy is refused naming the limit and never reaches the upstream,
and a run within it records as before."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from dsh_core import Chunk
from dsh_llm_proxy import PolicyRefusal, ProxyHub, ProxyServer, RecordPolicy, main
from dsh_llm_proxy._app import RecordEngine
from dsh_persistence_jsonl import JsonlSessionStore
from dsh_scripted_server import Pause, Response, ScriptedModelServer

MODEL = "policy-model"
_WAIT_S = 30.0  # a bound on waiting for the upstream, not a timing assertion


@dataclass
class Upstream:
    """A scripted upstream answering 'ok' to any call; ``seen`` holds every body it got."""

    server: ScriptedModelServer
    seen: list[dict[str, Any]] = field(default_factory=list[dict[str, Any]])
    pause: Pause | None = None
    arrived: threading.Condition = field(default_factory=threading.Condition)

    def wait_seen(self, count: int) -> None:
        with self.arrived:
            assert self.arrived.wait_for(lambda: len(self.seen) >= count, _WAIT_S), self.seen


@pytest.fixture
def upstream(upstream_key: str, make_text: Callable[..., list[Chunk]]) -> Iterator[Upstream]:
    made: list[Upstream] = []

    def route(body: dict[str, Any] | None) -> tuple[Response | None, str | None]:
        up = made[0]
        with up.arrived:
            up.seen.append(body or {})
            up.arrived.notify_all()
        chunks: list[Chunk | Pause] = list(make_text(["ok"]))
        if up.pause is not None:
            chunks.insert(1, up.pause)  # held after the first chunk until released
        return chunks, None

    with ScriptedModelServer(api_key=upstream_key, router=route) as server:
        made.append(Upstream(server))
        yield made[0]


Recorder = Callable[[RecordPolicy], ProxyServer]


@pytest.fixture
def recorder(tmp_path: Path, upstream: Upstream, upstream_key: str) -> Iterator[Recorder]:
    started: list[ProxyServer] = []

    def start(policy: RecordPolicy) -> ProxyServer:
        proxy = ProxyServer.record(
            tmp_path / "rec",
            upstream=upstream.server.base_url,
            api_key=upstream_key,
            policy=policy,
        )
        started.append(proxy.__enter__())
        return proxy

    yield start
    for proxy in started:
        proxy.__exit__(None, None, None)


def _chat(base_url: str, text: str = "hi", **fields: Any) -> httpx.Response:
    body = {"model": MODEL, "messages": [{"role": "user", "content": text}], **fields}
    return httpx.post(base_url + "/chat/completions", json=body, timeout=_WAIT_S)


def _refusals(proxy: ProxyServer) -> list[PolicyRefusal]:
    assert isinstance(proxy.engine, RecordEngine)
    return proxy.engine.refusals


def _sessions(root: Path) -> int:
    store = JsonlSessionStore(root)
    try:
        return len(store.list_sessions())
    finally:
        store.close()


@pytest.mark.parametrize(
    ("fields", "limit", "says"),
    [
        pytest.param({"n": 64}, "n", "n must be absent or 1", id="n-64"),
        pytest.param({"n": 2}, "n", "got 2", id="n-2"),
        pytest.param({"n": True}, "n", "got True", id="n-bool"),
        pytest.param({"max_tokens": 100000}, "max_tokens", "ceiling of 4096", id="max-tokens"),
        pytest.param(
            {"max_completion_tokens": 4097},
            "max_tokens",
            "max_completion_tokens 4097",
            id="max-completion-tokens",
        ),
        pytest.param({"max_tokens": "10"}, "max_tokens", "'10'", id="max-tokens-string"),
        pytest.param(
            {"model": "expensive-model"}, "model", "not the configured live model", id="model"
        ),
        pytest.param({"model": None}, "model", "None", id="model-missing"),
    ],
)
def test_a_call_outside_the_policy_is_refused_before_the_upstream(
    recorder: Recorder,
    upstream: Upstream,
    tmp_path: Path,
    fields: dict[str, Any],
    limit: str,
    says: str,
) -> None:
    proxy = recorder(RecordPolicy(max_tokens=4096, model=MODEL))
    answer = _chat(proxy.base_url, **fields)
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert error["code"] == f"policy-{limit}"
    assert "record policy refused" in error["message"]
    assert says in error["message"]
    assert answer.headers["x-should-retry"] == "false"
    assert upstream.seen == []
    assert [r.limit for r in _refusals(proxy)] == [limit]
    assert _sessions(tmp_path / "rec") == 0  # the refused call was not recorded


def test_a_call_within_the_policy_records_as_before(
    recorder: Recorder, upstream: Upstream, tmp_path: Path
) -> None:
    proxy = recorder(RecordPolicy(max_tokens=4096, model=MODEL))
    answer = _chat(proxy.base_url, n=1, max_tokens=4096, max_completion_tokens=100)
    assert answer.status_code == 200, answer.text
    assert answer.json()["choices"][0]["message"]["content"] == "ok"
    # Forwarded as the agent wrote it: nothing rewritten but the streaming switch.
    assert [(b["n"], b["max_tokens"], b["model"]) for b in upstream.seen] == [(1, 4096, MODEL)]
    assert _refusals(proxy) == []
    assert _sessions(tmp_path / "rec") == 1


def test_the_default_policy_takes_any_model_and_refuses_n(
    recorder: Recorder, upstream: Upstream
) -> None:
    proxy = recorder(RecordPolicy())
    assert _chat(proxy.base_url, model="whatever").status_code == 200
    assert _chat(proxy.base_url, n=64).status_code == 400
    assert len(upstream.seen) == 1


def test_calls_past_the_run_budget_are_refused(recorder: Recorder, upstream: Upstream) -> None:
    proxy = recorder(RecordPolicy(max_calls=2))
    assert [_chat(proxy.base_url, str(i)).status_code for i in range(2)] == [200, 200]
    refused = _chat(proxy.base_url, "third")
    assert refused.status_code == 429
    assert "max_calls 2" in refused.json()["error"]["message"]
    assert refused.json()["error"]["code"] == "policy-max_calls"
    assert len(upstream.seen) == 2


def test_a_refused_call_does_not_count_against_the_run_budget(
    recorder: Recorder, upstream: Upstream
) -> None:
    proxy = recorder(RecordPolicy(max_calls=1))
    assert _chat(proxy.base_url, n=3).status_code == 400
    assert _chat(proxy.base_url).status_code == 200
    assert len(upstream.seen) == 1


def _in_background(call: Callable[[], httpx.Response]) -> tuple[threading.Thread, list[int]]:
    statuses: list[int] = []
    thread = threading.Thread(target=lambda: statuses.append(call().status_code), daemon=True)
    thread.start()
    return thread, statuses


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_calls_past_the_in_flight_bound_are_refused_until_one_ends(
    recorder: Recorder, upstream: Upstream, stream: bool
) -> None:
    upstream.pause = Pause()
    proxy = recorder(RecordPolicy(max_in_flight=2))
    base = proxy.base_url
    held = [_in_background(lambda i=i: _chat(base, str(i), stream=stream)) for i in range(2)]
    upstream.wait_seen(2)  # both are at the upstream, held mid-answer
    refused = _chat(proxy.base_url, "third", stream=stream)
    assert refused.status_code == 429
    assert "max_in_flight 2" in refused.json()["error"]["message"]
    assert len(upstream.seen) == 2
    upstream.pause.release()
    for thread, statuses in held:
        thread.join(_WAIT_S)
        assert statuses == [200]
    # Their places are free again: the next call goes through.
    assert _chat(proxy.base_url, "fourth", stream=stream).status_code == 200
    assert len(upstream.seen) == 3


def test_an_upstream_error_frees_its_place(
    tmp_path: Path, upstream_key: str, make_text: Callable[..., list[Chunk]]
) -> None:
    with (
        ScriptedModelServer(api_key="another-key") as wrong,  # answers 401 to the proxy's key
        ProxyServer.record(
            tmp_path / "rec",
            upstream=wrong.base_url,
            api_key=upstream_key,
            policy=RecordPolicy(max_in_flight=1, max_calls=3),
        ) as proxy,
    ):
        statuses = [_chat(proxy.base_url, str(i)).status_code for i in range(4)]
    # Three reached the upstream one after another (no place leaked); the fourth is over budget.
    assert statuses == [401, 401, 401, 429]


def test_a_hub_route_refuses_and_reports_what_it_refused(
    tmp_path: Path, upstream: Upstream, upstream_key: str
) -> None:
    hub = ProxyHub().start()
    try:
        with hub.record(
            tmp_path / "rec",
            upstream=upstream.server.base_url,
            api_key=upstream_key,
            policy=RecordPolicy(max_calls=1, model=MODEL),
        ) as route:
            assert _chat(route.base_url).status_code == 200
            assert _chat(route.base_url, model="other").status_code == 400
            assert _chat(route.base_url).status_code == 429
            assert [r.limit for r in route.refusals()] == ["model", "max_calls"]
            assert "max_calls 1" in str(route.refusals()[1])
        assert len(upstream.seen) == 1
    finally:
        hub.close()


@pytest.mark.parametrize(
    "flag", ["--max-calls", "--max-in-flight", "--max-tokens"], ids=lambda f: f.strip("-")
)
@pytest.mark.parametrize("value", ["0", "many"])
def test_the_cli_refuses_a_limit_that_is_not_a_positive_integer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flag: str, value: str
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["record", "--root", str(tmp_path), flag, value])
    assert exited.value.code == 2
    assert "not a positive integer" in capsys.readouterr().err


def test_a_policy_limit_below_one_is_an_error() -> None:
    with pytest.raises(ValueError, match="max_calls must be at least 1"):
        RecordPolicy(max_calls=0)
