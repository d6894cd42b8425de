"""The proxy's fixed addresses, in a module that imports nothing: the pytest plugin and the
snapshot gate read them without loading the server (starlette, httpx, uvicorn)."""

from __future__ import annotations

__all__ = ["DEFAULT_UPSTREAM", "REPORT_PATH"]

DEFAULT_UPSTREAM = "https://api.deepseek.com"
REPORT_PATH = "/_dsh/report"
"""``GET`` it in replay mode for the consumption report (``ok``, ``problems``, bindings)."""
