"""Fixtures of the wire's tests: a scripted server playing the generic API and short-timeout
settings of the generic client, shared with every profile's tests
(``dsh_scripted_server.testing``; a profile's conftest overrides ``chat_profile``)."""

from __future__ import annotations

from dsh_scripted_server.testing import (
    anyio_backend,
    chat_profile,
    make_settings,
    server,
    test_key,
)

__all__ = ["anyio_backend", "chat_profile", "make_settings", "server", "test_key"]
