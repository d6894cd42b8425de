"""The agent process's exit codes: defined here once, imported by whoever checks them.

A module without imports, so the snapshot runner can read a code without loading the agent.
"""

from __future__ import annotations

__all__ = ["EXIT_OK", "EXIT_REPLAY_NOT_CONSUMED", "EXIT_USAGE"]

EXIT_OK = 0
"""A clean stop (stdin closed, or SIGTERM / SIGINT)."""
EXIT_USAGE = 2
"""A setting is invalid or a component could not be set up (nothing was served)."""
EXIT_REPLAY_NOT_CONSUMED = 3
"""The replay client's recorded scripts were not consumed exactly."""
