"""What an OpenAI-compatible endpoint says about itself: the context window per request, and how many requests it
serves at once (llama.cpp's ``/props`` ``total_slots``; vLLM and hosted APIs do not say: configure their limits).

* ``GET {base}/models`` — vLLM and SGLang give ``max_model_len`` per model; llama.cpp ``meta.n_ctx``
  (per slot); OpenRouter-like services ``context_length``;
* ``GET {root}/props`` — llama.cpp's ``default_generation_settings.n_ctx`` (per slot: ``ctx / parallel``).

Hosted APIs that report neither (OpenAI, DeepSeek, DashScope…) leave the window unknown: set the role's
``context_window`` for them.
"""

from __future__ import annotations

import json
import logging
import urllib.error
import urllib.request
from typing import Any

from backends.config import mask_url
from backends.llm.counters import server_root

log = logging.getLogger(__name__)


class _NoKeyOnRedirect(urllib.request.HTTPRedirectHandler):
    """Follows a redirect without the key: the ``Authorization`` header goes only to the URL it was configured for
    (urllib would copy it to wherever the endpoint points, another host included)."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):  # urllib's signature
        new = super().redirect_request(req, fp, code, msg, headers, newurl)
        if new is not None:
            for name in [k for k in new.headers if k.lower() == "authorization"]:
                del new.headers[name]
            new.unredirected_hdrs.pop("Authorization", None)
        return new


_OPENER = urllib.request.build_opener(_NoKeyOnRedirect())
MAX_ANSWER_BYTES = 8 * 1024**2  # a /models or /props answer; anything larger is not one


def _get(url: str, api_key: str | None, timeout: float) -> Any:
    request = urllib.request.Request(url, headers={"accept": "application/json"})
    if api_key:
        request.add_unredirected_header("Authorization", f"Bearer {api_key}")
    with _OPENER.open(request, timeout=timeout) as r:
        return json.loads(r.read(MAX_ANSWER_BYTES))


def window_from_models(data: Any, model: str) -> int | None:
    """The window of ``model`` in a ``/v1/models`` answer (the only model listed also counts)."""
    entries = data.get("data") if isinstance(data, dict) else None
    if not isinstance(entries, list) or not entries:
        return None
    chosen = next((e for e in entries if isinstance(e, dict) and e.get("id") == model), None)
    if chosen is None and len(entries) == 1 and isinstance(entries[0], dict):
        chosen = entries[0]
    if chosen is None:
        return None
    meta: dict = chosen["meta"] if isinstance(chosen.get("meta"), dict) else {}
    for value in (chosen.get("max_model_len"), meta.get("n_ctx"), chosen.get("context_length"),
                  chosen.get("context_window")):
        if isinstance(value, int) and value > 0:
            return value
    return None


def window_from_props(data: Any) -> int | None:
    if not isinstance(data, dict):
        return None
    settings = data.get("default_generation_settings")
    value = settings.get("n_ctx") if isinstance(settings, dict) else data.get("n_ctx")
    return value if isinstance(value, int) and value > 0 else None


def probe_window(base_url: str, model: str, api_key: str | None = None, timeout: float = 5.0) -> tuple[int | None, str]:
    """(tokens per request, where it was read) — ``(None, "not reported")`` when the endpoint says nothing."""
    base = base_url.rstrip("/")
    for url, read, source in ((f"{base}/models", lambda d: window_from_models(d, model), "/v1/models"),
                              (f"{server_root(base)}/props", window_from_props, "llama.cpp /props")):
        try:
            window = read(_get(url, api_key, timeout))
        except (OSError, ValueError, urllib.error.HTTPError) as e:
            log.info("no context window at %s (%s)", mask_url(url), type(e).__name__)  # no URL credentials logged
            continue
        if window:
            return window, f"endpoint {source}"
    return None, "not reported"


def probe_slots(base_url: str, api_key: str | None = None, timeout: float = 5.0) -> int | None:
    """Requests the server serves at once — llama.cpp's ``GET {root}/props`` ``total_slots`` — or None."""
    url = f"{server_root(base_url.rstrip('/'))}/props"
    try:
        data = _get(url, api_key, timeout)
    except (OSError, ValueError, urllib.error.HTTPError):
        log.info("no slot count at %s", url, exc_info=True)
        return None
    value = data.get("total_slots") if isinstance(data, dict) else None
    return value if isinstance(value, int) and value > 0 else None
