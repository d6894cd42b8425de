"""dsh_persistence_jsonl (under construction)."""

__all__: list[str] = []
