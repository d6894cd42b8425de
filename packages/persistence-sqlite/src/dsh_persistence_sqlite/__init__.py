"""dsh_persistence_sqlite (under construction)."""

__all__: list[str] = []
