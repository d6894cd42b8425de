"""The declared public API of dsh-llm-proxy, pinned."""

from __future__ import annotations

import pytest

import dsh_llm_proxy
import dsh_llm_proxy.pytest_plugin


def test_public_names() -> None:
    assert sorted(dsh_llm_proxy.__all__) == [
        "MAX_LOG_BYTES",
        "PolicyRefusal",
        "ProxyHub",
        "ProxyRoute",
        "ProxyServer",
        "REPORT_PATH",
        "RecordPolicy",
        "STORE_MARKER",
        "Scrub",
        "SessionBook",
        "SessionConflictError",
        "detect_store",
        "is_recording_root",
        "load_recording",
        "main",
        "open_recording_root",
        "read_log_capped",
        "recorded_logs",
        "shared_hub",
        "upstream_defaults",
    ]
    assert sorted(dsh_llm_proxy.pytest_plugin.__all__) == [
        "MODES",
        "llm_proxy",
        "llm_proxy_key_env",
        "llm_proxy_scrub",
        "llm_proxy_upstream",
        "recording_dir",
    ]
    for module in (dsh_llm_proxy, dsh_llm_proxy.pytest_plugin):
        for name in module.__all__:
            assert getattr(module, name) is not None, name


def test_open_store_is_a_deprecated_alias() -> None:
    # a homonym of dsh_core.plugins.open_store (which opens a sessions root, no marker)
    with pytest.warns(
        DeprecationWarning, match=r"open_store is deprecated, use .*open_recording_root"
    ):
        old = dsh_llm_proxy.open_store  # pyright: ignore[reportAttributeAccessIssue]
    assert old is dsh_llm_proxy.open_recording_root
