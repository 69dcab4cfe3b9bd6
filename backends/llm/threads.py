"""How many threads a local model server gets: chosen by measuring how busy the machine is when it starts.

llama.cpp's decoding threads wait for each other at every layer, so a thread that shares its core with other
work holds up the rest: on a busy 2-core machine two threads decode about 10× slower than one (1.44 vs 14.45
tokens/s for Qwen2.5-Coder-0.5B, ``bench/local_threads.py``), while on a quiet one two threads are up to twice
as fast. ``[local] threads = "auto"`` (the default) therefore measures, over half a second before each start,
how much CPU the *other* processes use on the cores this process may run on (``/proc/stat`` per core, minus
this process's own use from ``/proc/self/stat``; our other model servers count as other work), and gives the
server one thread per core that is at least 75 % idle, never fewer than one. An integer ``threads`` is used as
given. The choice and its reason are logged and shown in the server's status.
"""

from __future__ import annotations

import logging
import math
import os
import time

from pydantic import BaseModel, ConfigDict

log = logging.getLogger(__name__)

IDLE_ENOUGH = 0.75  # a core counts as free when at least this share of it is idle
PROBE_S = 0.5


class CpuLoad(BaseModel):
    """CPU use over a short window, in cores (1.0 = one core fully busy)."""

    model_config = ConfigDict(extra="forbid")

    cores: int  # the cores this process may run on
    busy: float  # used by every process on those cores
    own: float  # used by this process
    window_s: float

    @property
    def others(self) -> float:
        return max(0.0, self.busy - self.own)


def choose_threads(cores: int, others_busy: float) -> tuple[int, str]:
    """(threads, why) for a server on ``cores`` cores while other processes keep ``others_busy`` cores busy."""
    cores = max(1, cores)
    free = math.floor(max(0.0, cores - others_busy) + (1 - IDLE_ENOUGH))  # cores at least IDLE_ENOUGH idle
    threads = max(1, min(cores, free))
    if free >= cores:
        why = f"{'the core is' if cores == 1 else f'all {cores} cores are'} free; other processes use {others_busy:.2f}"
    elif free == 0:
        why = (f"machine busy: other processes use {others_busy:.2f} of {cores} cores; one thread, since threads that "
               f"share a core with other work hold each other up")
    else:
        why = f"other processes use {others_busy:.2f} of {cores} cores: {free} free"
    return threads, f"auto: {threads} thread{'s' if threads > 1 else ''} ({why})"


def _allowed_cpus() -> set[int] | None:
    try:
        return set(os.sched_getaffinity(0))
    except (AttributeError, OSError) as e:  # not Linux
        log.info("CPU affinity unknown (%s): counting every core", e)
        return None


def _cpu_times(cpus: set[int] | None) -> tuple[int, int] | None:
    """(busy, total) clock ticks of ``cpus`` (every core when None) since boot, from /proc/stat."""
    busy = total = 0
    try:
        with open("/proc/stat", encoding="ascii") as f:
            for line in f:
                if not line.startswith("cpu") or line.startswith("cpu "):
                    continue
                name, *fields = line.split()
                if cpus is not None and int(name[3:]) not in cpus:
                    continue
                ticks = [int(x) for x in fields[:8]]  # user nice system idle iowait irq softirq steal
                total += sum(ticks)
                busy += sum(ticks) - ticks[3] - ticks[4]
    except (OSError, ValueError) as e:
        log.info("/proc/stat unreadable (%s)", e)
        return None
    return busy, total


def _own_ticks() -> int | None:
    try:
        with open("/proc/self/stat", encoding="ascii") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of proc(5))
    except (OSError, ValueError, IndexError) as e:
        log.info("/proc/self/stat unreadable (%s)", e)
        return None


def measure_load(window_s: float = PROBE_S) -> CpuLoad | None:
    """CPU use of the cores this process may run on over ``window_s`` (None where /proc is missing)."""
    cpus = _allowed_cpus()
    before, own_before = _cpu_times(cpus), _own_ticks()
    started = time.monotonic()
    time.sleep(window_s)
    after, own_after = _cpu_times(cpus), _own_ticks()
    elapsed = time.monotonic() - started
    if before is None or after is None or after[1] <= before[1]:
        return None
    cores = len(cpus) if cpus else (os.cpu_count() or 1)
    share = (after[0] - before[0]) / (after[1] - before[1])  # busy share of all the ticks of those cores
    hz = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    own = ((own_after - own_before) / hz / elapsed) if own_before is not None and own_after is not None else 0.0
    return CpuLoad(cores=cores, busy=round(share * cores, 3), own=round(min(own, share * cores), 3),
                   window_s=round(elapsed, 3))


def resolve_threads(setting: int | str) -> tuple[int, str]:
    """The thread count for a server about to start, and why (logged by the caller)."""
    if isinstance(setting, int):
        return setting, f"configured: {setting} thread{'s' if setting > 1 else ''}"
    load = measure_load()
    if load is None:
        cores = len(_allowed_cpus() or ()) or os.cpu_count() or 1
        threads = max(1, min(cores, 2))
        return threads, f"auto: {threads} thread{'s' if threads > 1 else ''} (CPU load unknown on this system)"
    return choose_threads(load.cores, load.others)
