"""Deprecated alias of :mod:`dsh_scripted_server` (removal in 0.3.0), whose server plays
DeepSeek's profile unless told otherwise, as this module's did.

Import from ``dsh_scripted_server`` and pass ``profile="deepseek"`` (or
``profile=DeepSeekSettings``) instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dsh_llm_deepseek._settings import DeepSeekSettings
from dsh_scripted_server import (
    ChunkEncoder,
    Fault,
    Pause,
    Profile,
    RecordedRequest,
    Response,
    Router,
    ScriptDocument,
    ScriptError,
    ScriptItem,
    ScriptLibrary,
    load_script_file,
    main,
    parse_script_document,
    validate_script,
)
from dsh_scripted_server import ScriptedModelServer as _ScriptedModelServer

__all__ = [
    "ChunkEncoder",
    "Fault",
    "Pause",
    "RecordedRequest",
    "Response",
    "Router",
    "ScriptDocument",
    "ScriptError",
    "ScriptItem",
    "ScriptLibrary",
    "ScriptedModelServer",
    "load_script_file",
    "main",
    "parse_script_document",
    "validate_script",
]


class ScriptedModelServer(_ScriptedModelServer):
    """``dsh_scripted_server.ScriptedModelServer`` playing DeepSeek's profile by default."""

    def __init__(
        self,
        sessions: Sequence[Sequence[ScriptItem]] = (),
        *,
        profile: Profile = DeepSeekSettings,
        **options: Any,
    ) -> None:
        super().__init__(sessions, profile=profile, **options)
