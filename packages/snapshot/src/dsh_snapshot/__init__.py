"""dsh_snapshot (under construction)."""

__all__: list[str] = []
