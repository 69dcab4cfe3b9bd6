"""Datasets known by name: the bundled demo and those named in ``PAL_DATASETS`` (``name=path;name=path``).

The app opens datasets by name (never by a path taken from a URL), and a workspace bundle names its
dataset the same way, so a bundle made on one machine finds the same dataset on another by its name
(see :mod:`studio.bundle`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent
DEMO_PATH = PROJECT_ROOT / "data" / "demo"
DEFAULT_DATASET = "demo"


def is_bundled_demo(root: Path) -> bool:
    """Whether ``root`` is the demo dataset shipped with the app (the Memory page opens it with the gold memory)."""
    return Path(root).resolve() == DEMO_PATH.resolve()


def configured_datasets(env: Mapping[str, str] | None = None) -> dict[str, Path]:
    """The bundled demo plus those named in ``PAL_DATASETS``."""
    env = os.environ if env is None else env
    known = {DEFAULT_DATASET: DEMO_PATH}
    for item in env.get("PAL_DATASETS", "").split(";"):
        name, sep, path = item.partition("=")
        if sep and name.strip() and path.strip():
            known[name.strip()] = Path(path.strip()).expanduser()
    return known


def name_of(root: Path, known: Mapping[str, Path] | None = None) -> str:
    """The name a dataset folder is known by (a configured name, else the folder's name)."""
    resolved = Path(root).resolve()
    for name, path in (configured_datasets() if known is None else known).items():
        if Path(path).expanduser().resolve() == resolved:
            return name
    return resolved.name or "dataset"
