"""Provider ``local``: a local model (the role's ``model``: a catalog model or the ``[local] model_path`` GGUF)
behind the same OpenAI-compatible code path as remote endpoints."""

from __future__ import annotations

from collections.abc import Iterator

from backends.config import LocalServerConfig
from backends.llm.counters import server_root
from backends.llm.local_server import LocalServers
from backends.llm.openai_compat import OpenAICompatProvider
from backends.llm.types import ChatRequest, ChatResult


class LocalProvider:
    name = "local"

    def __init__(self, cfg: LocalServerConfig, servers: LocalServers, timeout: float = 60.0, model: str | None = None):
        self.server = servers.get(cfg, model)
        self._timeout = timeout
        self._http: OpenAICompatProvider | None = None

    def _provider(self) -> OpenAICompatProvider:
        base_url = self.server.ensure()  # starts or restarts the server when needed
        if self._http is None or self._http.base_url != base_url:
            self._http = OpenAICompatProvider(base_url, None, self._timeout)
        return self._http

    def context_window(self, model: str) -> tuple[int | None, str]:
        """Per request: the server's ``/props`` ``n_ctx`` (``ctx / parallel``), else the same from the config."""
        window, source = self._provider().context_window(model)
        if window:
            return window, source
        return self.server.cfg.ctx // self.server.cfg.parallel, "local server config (ctx / parallel)"

    def tokenizer_root(self) -> str:
        """Where the bundled model's own tokenizer answers (llama.cpp ``/tokenize``)."""
        return server_root(self._provider().base_url)

    @property
    def endpoint(self) -> str:
        return f"local:{self.server.alias}"

    def complete(self, req: ChatRequest) -> ChatResult:
        req = req.model_copy(update={"model": self.server.alias})
        return self._provider().complete(req).model_copy(update={"model": self.server.alias})

    def stream(self, req: ChatRequest) -> Iterator[str | ChatResult]:
        req = req.model_copy(update={"model": self.server.alias})
        for chunk in self._provider().stream(req):
            yield chunk.model_copy(update={"model": self.server.alias}) if isinstance(chunk, ChatResult) else chunk
