"""Folders the app may open or write: only inside configured roots.

``PAL_DATA_ROOTS`` lists them (separated by ``:``, the OS path separator); unset, they are the project's
``data/`` folder and ``PAL_HOME``. A path is resolved (``~``, ``..`` and symbolic links followed) before
it is compared, so neither ``data/../..`` nor a link out of a root gets through. Used by the sidebar's
"open a folder", the Generate target and every export written to disk.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from backends.paths import PROJECT_ROOT, default_home


class OutsideRoots(ValueError):
    """A folder outside every configured root; the message names the folder and the roots."""


def data_roots(env: Mapping[str, str] | None = None) -> list[Path]:
    env = os.environ if env is None else env
    raw = env.get("PAL_DATA_ROOTS", "").strip()
    if raw:
        return [Path(p).expanduser().resolve() for p in raw.split(os.pathsep) if p.strip()]
    return [(PROJECT_ROOT / "data").resolve(), default_home().resolve()]


def inside_roots(path: str | Path, roots: list[Path] | None = None) -> Path:
    """``path`` resolved, when it lies inside one of ``roots`` (default :func:`data_roots`); else :class:`OutsideRoots`."""
    roots = data_roots() if roots is None else roots
    text = str(path).strip()
    if not text:
        raise OutsideRoots("no folder given")
    resolved = Path(text).expanduser().resolve()
    if any(resolved == root or resolved.is_relative_to(root) for root in roots):
        return resolved
    shown = ", ".join(str(r) for r in roots) or "(none configured)"
    raise OutsideRoots(f"{text} is outside the folders this server may use ({shown}); "
                       "an admin can add roots with PAL_DATA_ROOTS")
