"""The platform every feature talks through: LLM providers, embedders, vector store, run store, cache."""
