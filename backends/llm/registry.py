"""Providers by name. SDKs are imported only when a provider is built."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from backends.config import PlatformConfig, RoleConfig

if TYPE_CHECKING:
    from backends.llm.local_server import LocalServers

PROBE_TIMEOUT = 60.0  # a provider's own requests (window, slots); each chat request carries its own deadline


class ChatProvider(Protocol):
    name: str

    @property
    def endpoint(self) -> str: ...

    def complete(self, req: Any) -> Any: ...

    def stream(self, req: Any) -> Any: ...


def _local(role: RoleConfig, platform: PlatformConfig, servers: LocalServers | None) -> ChatProvider:
    from backends.llm.local import LocalProvider

    if servers is None:
        raise ValueError("the 'local' provider needs the workspace's local servers (LLMClient(servers=...))")
    return LocalProvider(platform.local, servers, timeout=role.timeout or PROBE_TIMEOUT, model=role.model)


def _openai(role: RoleConfig, platform: PlatformConfig, servers: LocalServers | None) -> ChatProvider:
    from backends.llm.openai_compat import OpenAICompatProvider

    key = role.api_key.get_secret_value() if role.api_key else None
    return OpenAICompatProvider(role.base_url, key, timeout=role.timeout or PROBE_TIMEOUT)


def _fake(role: RoleConfig, platform: PlatformConfig, servers: LocalServers | None) -> ChatProvider:
    raise ValueError("the 'fake' provider is for tests: pass a ScriptedLLM to LLMClient(providers=...)")


ProviderFactory = Callable[[RoleConfig, PlatformConfig, "LocalServers | None"], ChatProvider]

PROVIDERS: dict[str, ProviderFactory] = {
    "local": _local,
    "openai": _openai,
    "fake": _fake,
}


def build_provider(role: RoleConfig, platform: PlatformConfig, servers: LocalServers | None = None) -> ChatProvider:
    try:
        factory = PROVIDERS[role.provider]
    except KeyError:
        raise ValueError(f"unknown provider {role.provider!r} (known: {', '.join(PROVIDERS)})") from None
    return factory(role, platform, servers)
