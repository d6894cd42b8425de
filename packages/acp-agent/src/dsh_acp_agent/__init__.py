"""dsh_acp_agent (under construction)."""

__all__: list[str] = []
def main() -> None:
    raise SystemExit("dsh-acp-agent: not built yet")
