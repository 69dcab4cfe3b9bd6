"""LLM access: providers by name, retries, cache, accounting and structured output behind one client."""

from backends.llm.client import LLMClient
from backends.llm.errors import LLMError
from backends.llm.types import ChatResult, StructuredFailure, StructuredResult

__all__ = ["ChatResult", "LLMClient", "LLMError", "StructuredFailure", "StructuredResult"]
