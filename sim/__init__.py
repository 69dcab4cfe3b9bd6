"""Live multi-turn simulation: a User-LLM plays a synthetic user against a memory-equipped assistant."""
