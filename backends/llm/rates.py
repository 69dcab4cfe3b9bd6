"""The speed of a llama.cpp server with every slot busy, measured once and remembered per endpoint and model.

Call deadlines (:mod:`backends.llm.deadline`) need two rates of one request while the server is as busy as the
work makes it: prompt tokens per second and answer tokens per second. :func:`measure_llamacpp` measures them the
way ``bench/model_throughput.py`` does — one fresh prompt per slot at once (one answer token: the prompt rate, by
wall time), then the same prompts again, kept in their slots, each decoding :data:`DECODE_TOKENS` tokens at once
(the decode rate from the server's own ``timings``) — a few seconds on the bundled model, once.

:class:`RateBook` keeps the rates in the run store's capabilities (``llm_capabilities``: every process and role
that talks to the same model shares them). The bundled server (a provider with ``measure_rates``) is measured on
its first call, and again when its rates are older than :data:`MAX_AGE_S` or a call ran past a deadline they gave
(the machine got busier). Another llama.cpp server is measured only when asked (:meth:`RateBook.measure`, e.g.
``bench/generation_defaults.py --measure``): a lab's shared server gets no calibration requests unasked. An endpoint
with no rates remembered gets :data:`~backends.llm.deadline.ASSUMED_RATES`.
"""

from __future__ import annotations

import json
import logging
import random
import threading
import time
import urllib.request
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from backends.llm.deadline import ASSUMED_RATES, Rates
from backends.store.capabilities import CapabilityStore

log = logging.getLogger(__name__)

PROMPT_TOKENS = 256  # about the length of the prompts measured (a rate depends on the context a bit)
DECODE_TOKENS = 24  # answer tokens each slot decodes while measuring
MEASURE_TIMEOUT_S = 300.0  # one calibration request on a very slow machine
MAX_AGE_S = 24 * 3600.0  # rates older than this are measured again
RETRY_FAILED_S = 600.0  # a measurement that failed is tried again after this long (the assumed rates meanwhile)
ROW_TTL_S = 5.0  # a capabilities row read for rates is reused this long (another process's measurement shows after it)
_WORDS = "time sleep work family walk dinner train music garden doctor report friend weekend coffee".split()


class RateError(RuntimeError):
    """The server's answer to a calibration request lacks the timings the rates come from."""


def _post(root: str, body: dict[str, Any], timeout: float) -> dict[str, Any]:
    req = urllib.request.Request(f"{root}/v1/chat/completions", data=json.dumps(body).encode(),
                                 headers={"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.load(r)


def _all_at_once(root: str, bodies: list[dict[str, Any]], timeout: float) -> list[dict[str, Any]]:
    """Each body's llama.cpp ``timings``, the requests sent together (every slot busy)."""
    with ThreadPoolExecutor(max_workers=len(bodies), thread_name_prefix="rates") as pool:
        answers = list(pool.map(lambda body: _post(root, body, timeout), bodies))
    timings = [a.get("timings") for a in answers]
    if not all(isinstance(t, dict) and t.get("predicted_n") for t in timings):
        raise RateError(f"{root}: the answers carry no llama.cpp timings, so its speed cannot be measured")
    return timings  # type: ignore[return-value]  # checked above: every one is a dict


def measure_llamacpp(root: str, model: str, slots: int, timeout: float = MEASURE_TIMEOUT_S) -> Rates:
    """The rates of one request of the llama.cpp server at ``root`` while all its ``slots`` are busy."""
    rng = random.Random(time.time_ns())
    prompts = [f"{rng.random():.12f} " + " ".join(rng.choice(_WORDS) for _ in range(int(PROMPT_TOKENS / 1.15)))
               for _ in range(slots)]  # a fresh prefix per slot: nothing served from a prompt cache
    started = time.perf_counter()
    prefill = _all_at_once(root, [{"model": model, "messages": [{"role": "user", "content": p}], "max_tokens": 1,
                                   "cache_prompt": True} for p in prompts], timeout)
    prefill_s = time.perf_counter() - started
    decode = _all_at_once(root, [{"model": model, "messages": [{"role": "user", "content": p}],
                                  "max_tokens": DECODE_TOKENS, "ignore_eos": True, "cache_prompt": True}
                                 for p in prompts], timeout)
    prompt_rate = sum(t.get("prompt_n", 0) for t in prefill) / prefill_s / slots
    decode_rate = min(t["predicted_n"] / max(t.get("predicted_ms", 0.0) / 1000, 1e-3) for t in decode)
    if prompt_rate <= 0:
        raise RateError(f"{root}: the calibration prompts were not processed (prompt_n 0)")
    return Rates(prompt=round(prompt_rate, 1), decode=round(decode_rate, 2), slots=slots,
                 source=f"measured {time.strftime('%Y-%m-%d %H:%M', time.localtime())} with {slots} slot"
                        f"{'s' if slots > 1 else ''} busy")


def _slots(provider: Any) -> int | None:
    """Requests the provider's server serves at once, when it says."""
    slots = getattr(provider, "slots", None)
    return slots() if callable(slots) else None


_LOCKS: dict[str, threading.Lock] = {}
_FAILED: dict[tuple[str, str], float] = {}  # (endpoint, model) → when measuring it failed (tried again later)
# (endpoint, model) → (rates, when) measured by this process: another home served by the same server (a test
# worker's shared servers, a second workspace) takes them instead of measuring again
_MEASURED: dict[tuple[str, str], tuple[Rates, float]] = {}
# (store, endpoint, model) → (its capabilities row or None, when read): every call asks for its endpoint's rates, and
# reading the row each time was a transaction and a validation per call; dropped when this process measures again
_ROWS: dict[tuple[str, str, str], tuple[Any, float]] = {}
_GUARD = threading.Lock()


def _lock_for(key: str) -> threading.Lock:
    """One lock per endpoint and model in the process: the calls of every client wait for one measurement."""
    with _GUARD:
        return _LOCKS.setdefault(key, threading.Lock())


class RateBook:
    """Rates per (endpoint, model): remembered in the capabilities store, measured when missing or stale."""

    def __init__(self, capabilities: CapabilityStore, clock: Callable[[], float] = time.time):
        self.capabilities = capabilities
        self.clock = clock

    def remembered(self, endpoint: str, model: str, slots: int | None = None) -> Rates | None:
        """The stored rates when they are fresh (younger than :data:`MAX_AGE_S`) and, when ``slots`` is given,
        measured with that many slots busy (a server started with another ``parallel`` has other rates); else
        those this process measured of the same endpoint, then remembered here too."""
        row = self._row(endpoint, model)
        if row is None or not (row.prompt_rate and row.decode_rate and row.rates_at) or \
                (slots is not None and row.rate_slots != slots):
            return self._measured_here(endpoint, model, slots)
        if self.clock() - row.rates_at > MAX_AGE_S:
            return self._measured_here(endpoint, model, slots)
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(row.rates_at))
        slots = row.rate_slots or 1
        return Rates(prompt=row.prompt_rate, decode=row.decode_rate, slots=slots,
                     source=f"measured {when} with {slots} slot{'s' if slots > 1 else ''} busy")

    def _key(self, endpoint: str, model: str) -> tuple[str, str, str]:
        db = getattr(self.capabilities, "db", None)
        return (str(db.path) if db is not None else str(id(self.capabilities)), endpoint, model)

    def _row(self, endpoint: str, model: str) -> Any:
        """The endpoint's capabilities row, read at most once per :data:`ROW_TTL_S` (see :data:`_ROWS`)."""
        key, now = self._key(endpoint, model), time.monotonic()
        if (known := _ROWS.get(key)) is not None and now - known[1] < ROW_TTL_S:
            return known[0]
        row = self.capabilities.get(endpoint, model)
        _ROWS[key] = (row, now)
        return row

    def _forget_row(self, endpoint: str, model: str) -> None:
        _ROWS.pop(self._key(endpoint, model), None)

    def _measured_here(self, endpoint: str, model: str, slots: int | None) -> Rates | None:
        known = _MEASURED.get((endpoint, model))
        if known is None or self.clock() - known[1] > MAX_AGE_S or (slots is not None and known[0].slots != slots):
            return None
        self.capabilities.update(endpoint, model, prompt_rate=known[0].prompt, decode_rate=known[0].decode,
                                 rate_slots=known[0].slots, rates_at=known[1])
        self._forget_row(endpoint, model)
        return known[0]

    def rates(self, provider: Any, model: str) -> Rates:
        """The endpoint's rates: remembered, else measured now (once, however many calls ask together), else
        :data:`ASSUMED_RATES` — a failed measurement is logged and the call goes on with the assumed ones."""
        endpoint = provider.endpoint
        measure = getattr(provider, "measure_rates", None)
        failed = _FAILED.get((endpoint, model))
        if not callable(measure) or (failed is not None and self.clock() - failed < RETRY_FAILED_S):
            return self.remembered(endpoint, model) or ASSUMED_RATES
        slots = _slots(provider)
        if (known := self.remembered(endpoint, model, slots)) is not None:
            return known
        with _lock_for(f"{endpoint}|{model}"):
            if (known := self.remembered(endpoint, model, slots)) is not None:
                return known  # another call measured while this one waited
            if (failed := _FAILED.get((endpoint, model))) is not None and self.clock() - failed < RETRY_FAILED_S:
                return ASSUMED_RATES  # another call's measurement failed while this one waited: not again at once
            try:
                measured = measure(model)
            except (OSError, ValueError, RateError) as e:
                log.warning("%s: could not measure the speed of %s (%s); deadlines use %s for %.0f s", endpoint,
                            model, e, ASSUMED_RATES.describe(), RETRY_FAILED_S)
                _FAILED[(endpoint, model)] = self.clock()
                return ASSUMED_RATES
            if measured is None:
                return ASSUMED_RATES
            log.info("%s: %s measured: %s", endpoint, model, measured.describe())
            self.remember(endpoint, model, measured)
            return measured

    def measure(self, provider: Any, model: str) -> Rates | None:
        """Measure an endpoint that can be measured (the bundled server, a llama.cpp server) now and remember its
        rates; None when it cannot be (a hosted API)."""
        measure = getattr(provider, "measure_rates", None) or getattr(provider, "measure_server_rates", None)
        measured = measure(model) if callable(measure) else None
        if measured is not None:
            self.remember(provider.endpoint, model, measured)
        return measured

    def remember(self, endpoint: str, model: str, rates: Rates) -> None:
        _MEASURED[(endpoint, model)] = (rates, self.clock())
        self.capabilities.update(endpoint, model, prompt_rate=rates.prompt, decode_rate=rates.decode,
                                 rate_slots=rates.slots, rates_at=self.clock())
        self._forget_row(endpoint, model)

    def outdated(self, endpoint: str, model: str) -> None:
        """A call ran past the deadline these rates gave: measure again on the next call."""
        _MEASURED.pop((endpoint, model), None)
        if self.capabilities.get(endpoint, model) is not None:
            self.capabilities.update(endpoint, model, rates_at=None)
        self._forget_row(endpoint, model)

