"""dsh_subagent_fork (under construction)."""

__all__: list[str] = []
