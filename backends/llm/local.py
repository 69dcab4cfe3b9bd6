"""Provider ``local``: a local model (the role's ``model``: a catalog model or the ``[local] model_path`` GGUF)
behind the same OpenAI-compatible code path as remote endpoints.

Every request asks llama.cpp to keep and reuse its prompt (``cache_prompt``): a prompt that starts like one a slot
(or the server's host-memory prompt cache) holds is only computed from where they differ. The server serves
``parallel`` requests at once (:meth:`LocalProvider.slots`: the width of :mod:`backends.llm.fanout`).

Every answer is read as a stream, structured ones too (:meth:`OpenAICompatProvider.complete_streamed`): a long answer
on a busy CPU takes minutes by construction, so a call is given up when the server stops sending, not when a fixed
time has passed; its speed with every slot busy is measured once (:meth:`LocalProvider.measure_rates`) for the
deadlines of :mod:`backends.llm.deadline`."""

from __future__ import annotations

from collections.abc import Iterator

from backends.config import LocalServerConfig
from backends.llm.counters import server_root
from backends.llm.deadline import Rates
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

    def slots(self) -> int:
        """Requests the server serves at once (its configuration's ``parallel``)."""
        return self.server.cfg.parallel

    def _sent(self, req: ChatRequest) -> ChatRequest:
        """``req`` as the server gets it: under the served model's name, asking to keep and reuse its prompt."""
        return req.model_copy(update={"model": self.server.alias, "extra": {**req.extra, "cache_prompt": True}})

    def measure_rates(self, model: str) -> Rates:
        """The server's prompt and decode rates of one request with all its slots busy (:mod:`backends.llm.rates`)."""
        from backends.llm.rates import measure_llamacpp

        return measure_llamacpp(server_root(self._provider().base_url), self.server.alias, self.server.cfg.parallel)

    def complete(self, req: ChatRequest) -> ChatResult:
        return self._provider().complete_streamed(self._sent(req)).model_copy(update={"model": self.server.alias})

    def stream(self, req: ChatRequest) -> Iterator[str | ChatResult]:
        req = self._sent(req)
        for chunk in self._provider().stream(req):
            yield chunk.model_copy(update={"model": self.server.alias}) if isinstance(chunk, ChatResult) else chunk
