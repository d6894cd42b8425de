"""dsh_llm_deepseek (under construction)."""

__all__: list[str] = []
