"""Pure functions over a job's graph of units (no database): what the store reads is handed in as ids and edges."""

from __future__ import annotations

from collections.abc import Iterable


def chain_heights(units: Iterable[str], edges: Iterable[tuple[str, str]]) -> dict[str, int]:
    """The height of each unit given ``edges`` (unit, a unit it depends on): 0 for a unit nothing depends on, else
    one more than the highest of its dependants. Worked out from the last units back (no recursion: a build's chain
    of sessions may be long); a unit on a cycle, which can never run, keeps 0."""
    height = dict.fromkeys(units, 0)
    deps: dict[str, list[str]] = {}
    dependants = dict.fromkeys(height, 0)
    for unit, dep in edges:
        if unit in height and dep in height:
            deps.setdefault(unit, []).append(dep)
            dependants[dep] += 1
    ready = [u for u, n in dependants.items() if n == 0]
    while ready:
        unit = ready.pop()
        for dep in deps.get(unit, ()):
            height[dep] = max(height[dep], height[unit] + 1)
            dependants[dep] -= 1
            if dependants[dep] == 0:
                ready.append(dep)
    return height
