"""dsh-llm-proxy: record and replay any OpenAI-compatible agent as DSH sessions.

``ProxyServer.record`` forwards ``POST /chat/completions`` to an upstream API with the proxy's
own key, streams each answer back as it arrives and writes every call into DSH session logs,
inferring sessions, fork children and subagent children from the conversations alone.
``ProxyServer.replay`` answers from those logs keylessly with ``dsh_llm_replay``'s rules.
``dsh_llm_proxy.pytest_plugin`` is the ``llm_proxy`` fixture; ``main`` is the console script.
"""

from dsh_llm_proxy._app import DEFAULT_UPSTREAM, REPORT_PATH
from dsh_llm_proxy._book import SessionBook, SessionConflictError
from dsh_llm_proxy._cli import main
from dsh_llm_proxy._root import (
    STORE_MARKER,
    detect_store,
    is_recording_root,
    open_store,
    recorded_logs,
)
from dsh_llm_proxy._server import ProxyServer, load_recording

__all__ = [
    # serving
    "DEFAULT_UPSTREAM",
    "REPORT_PATH",
    "ProxyServer",
    "main",
    # sessions
    "SessionBook",
    "SessionConflictError",
    "load_recording",
    # recording roots
    "STORE_MARKER",
    "detect_store",
    "is_recording_root",
    "open_store",
    "recorded_logs",
]
