"""Test helpers of the wire, for any profile: settings a test can build without the environment.

``settings_factory(DeepSeekSettings)`` (or ``ChatSettings``, or any profile) returns a factory
``make(base_url, **overrides)`` whose settings have short timeouts and retry waits (a test of a
retry or an idle stream takes milliseconds, not minutes) and a fake key built at run time. Every
field is given explicitly, so nothing the caller happens to have exported (``OPENAI_MODEL``, a
profile's key …) leaks into a test: pydantic-settings reads the environment only for a
field the constructor was not given.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from pydantic import SecretStr

from dsh_llm_openai._settings import ChatSettings

__all__ = ["TEST_KEY", "SHORT_WAITS", "settings_factory"]

# Built at run time: no key-shaped string is committed (HELPERS.md).
TEST_KEY = "sk-" + "dsh-wire-test-" + "0" * 12
"""The fake key :func:`settings_factory` puts in every settings object."""

SHORT_WAITS: dict[str, Any] = {
    "connect_timeout": 2.0,
    "stream_idle_timeout": 5.0,
    "send_session_id": True,
    "max_retries": 2,
    "retry_base_wait": 0.01,
    "retry_max_wait": 0.05,
    "max_retry_after": 2.0,
}
"""The timeouts and waits :func:`settings_factory` sets (``send_session_id`` too: the scripted
model server routes by the session header)."""

S = TypeVar("S", bound=ChatSettings)


def settings_factory(cls: type[S], key: str = TEST_KEY) -> Callable[..., S]:
    """A factory of ``cls`` settings for tests: ``make(base_url, **overrides)``.

    Args:
        cls: :class:`~dsh_llm_openai.ChatSettings` or a profile's subclass.
        key: the API key every settings object gets (:data:`TEST_KEY` by default).

    Returns:
        ``make(base_url, **overrides)``: ``cls`` with ``key``, ``base_url``,
        :data:`SHORT_WAITS`, every other field at its default, then ``overrides``; no field is
        read from the environment.
    """

    def make(base_url: str, **overrides: Any) -> S:
        values: dict[str, Any] = {
            name: info.get_default(call_default_factory=True)
            for name, info in cls.model_fields.items()
            if not info.is_required()
        }
        values |= {"api_key": SecretStr(key), "base_url": base_url, **SHORT_WAITS, **overrides}
        return cls(**values)

    return make
