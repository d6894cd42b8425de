"""dsh_subagent_spawn (under construction)."""

__all__: list[str] = []
