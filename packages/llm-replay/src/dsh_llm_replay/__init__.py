"""dsh_llm_replay (under construction)."""

__all__: list[str] = []
