"""dsh-llm-proxy: record and replay any OpenAI-compatible agent as DSH sessions.

``ProxyServer.record`` forwards ``POST /chat/completions`` to an upstream API with the proxy's
own key, streams each answer back as it arrives and writes every call into DSH session logs,
inferring sessions, fork children and subagent children from the conversations alone.
``ProxyServer.replay`` answers from those logs keylessly with ``dsh_llm_replay``'s rules.
``ProxyHub`` (one per process: ``shared_hub``) serves many runs at once, each on a route of
its own (the snapshot gate's foreign runs). ``dsh_llm_proxy.pytest_plugin`` is the
``llm_proxy`` fixture; ``main`` is the console script.

The names below are imported on first use (PEP 562): reading a recording root or the default
upstream must not load the server (starlette, httpx, uvicorn), and pytest loads this package
for its plugin in every run.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dsh_core import Deprecated, lazy_exports

if TYPE_CHECKING:
    from dsh_llm_proxy._book import SessionBook, SessionConflictError
    from dsh_llm_proxy._cli import main
    from dsh_llm_proxy._defaults import REPORT_PATH, upstream_defaults
    from dsh_llm_proxy._hub import ProxyHub, ProxyRoute, shared_hub
    from dsh_llm_proxy._policy import PolicyRefusal, RecordPolicy
    from dsh_llm_proxy._root import (
        MAX_LOG_BYTES,
        STORE_MARKER,
        detect_store,
        is_recording_root,
        open_recording_root,
        read_log_capped,
        recorded_logs,
    )
    from dsh_llm_proxy._scrub import Scrub
    from dsh_llm_proxy._server import ProxyServer, load_recording

__all__ = [
    # serving
    "upstream_defaults",
    "REPORT_PATH",
    "ProxyServer",
    "ProxyHub",
    "ProxyRoute",
    "shared_hub",
    "RecordPolicy",
    "PolicyRefusal",
    "Scrub",
    "main",
    # sessions
    "SessionBook",
    "SessionConflictError",
    "load_recording",
    # recording roots
    "MAX_LOG_BYTES",
    "STORE_MARKER",
    "detect_store",
    "is_recording_root",
    "open_recording_root",
    "read_log_capped",
    "recorded_logs",
]

_HOMES = {
    "upstream_defaults": "._defaults",
    "REPORT_PATH": "._defaults",
    "ProxyServer": "._server",
    "ProxyHub": "._hub",
    "ProxyRoute": "._hub",
    "shared_hub": "._hub",
    "RecordPolicy": "._policy",
    "PolicyRefusal": "._policy",
    "Scrub": "._scrub",
    "load_recording": "._server",
    "main": "._cli",
    "SessionBook": "._book",
    "SessionConflictError": "._book",
    "MAX_LOG_BYTES": "._root",
    "STORE_MARKER": "._root",
    "detect_store": "._root",
    "is_recording_root": "._root",
    "open_recording_root": "._root",
    "read_log_capped": "._root",
    "recorded_logs": "._root",
}

__getattr__, __dir__ = lazy_exports(
    __name__,
    _HOMES,
    # a homonym of dsh_core.plugins.open_store (a sessions root, no marker): CHANGELOG.md
    deprecated={"open_store": Deprecated("._root", "open_recording_root", "0.3.0")},
)
