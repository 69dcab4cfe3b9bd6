"""Typed LLM errors. Messages name the role and endpoint host, never a key or a full URL with credentials."""

from __future__ import annotations


class LLMError(Exception):
    """Base of every failure to get an answer from an endpoint."""

    retryable = False

    def __init__(self, message: str, *, status: int | None = None, retry_after: float | None = None):
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after


class EndpointUnavailable(LLMError):
    """Connection refused, DNS failure, server not running."""

    retryable = True


class RateLimited(LLMError):
    """HTTP 429; ``retry_after`` holds the server's Retry-After in seconds when given."""

    retryable = True


class ServerError(LLMError):
    """HTTP 5xx."""

    retryable = True


class LLMTimeout(LLMError):
    """No answer within the call's deadline, or no token within the idle limit (:mod:`backends.llm.deadline`)."""

    retryable = True
    after_patience = False  # set when the work around the call already asked again with longer deadlines


class BadRequest(LLMError):
    """HTTP 4xx other than 429: retrying the same request cannot help (bad model name, bad key…)."""


class BadResponse(LLMError):
    """The endpoint answered 200 with something that is not a chat completion (e.g. broken JSON)."""

    retryable = True


class Cancelled(LLMError):
    """The caller cancelled (Stop button, closed run)."""


class ContextOverflow(BadRequest):
    """The prompt does not fit the role's context window; raised before anything is sent (never retried)."""
