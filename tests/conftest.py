"""Shared fixtures. Real PAL-Set files are read from ../shared/data (CC BY-NC 4.0, Huang et al., Mem-PAL)."""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SHARED_DATA = ROOT.parent / "shared" / "data"
PALSET = SHARED_DATA / "palset"
DEMO = ROOT / "data" / "demo"

# One BLAS and OpenMP thread per test process (set before numpy or torch is first imported; xdist workers, the app
# servers and CLI processes a test starts inherit it). The suite runs at least a process per core already: a second
# thread only spins while another worker holds the core — a fidelity computation cost 2–3 s of CPU instead of 0.3–0.4 s
# (OpenBLAS), the real-embedder padding test 37 s instead of 31 s (torch's OpenMP). Explicit thread counts
# (llama.cpp's ``--threads``: its two threads stay busy; ``torch.set_num_threads``) are not affected.
for _threads in ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "OMP_NUM_THREADS"):
    os.environ.setdefault(_threads, "1")

# The local model of real-model tests (``local_model``). A test that only proves a path runs on SmolLM2-135M (the
# fastest); the default model, Qwen2.5-Coder-0.5B (``DEFAULT_MODEL``), decodes about half as fast, so a test runs on it
# only where it names it: ``local_model_env(DEFAULT_MODEL)``. ``PAL_TEST_LOCAL_MODEL=<catalog name>`` runs every
# real-model test on that model instead (e.g. ``PAL_TEST_LOCAL_MODEL=qwen2.5-coder-0.5b`` to see that each works on it).
PATH_MODEL = "SmolLM2-135M-Instruct-Q4_1"
DEFAULT_MODEL = "Qwen2.5-Coder-0.5B-Instruct-Q4_K_M"


def local_model_env(model: str = PATH_MODEL) -> dict[str, str]:
    """The environment layer (``make_workspace(env=...)``) that puts every role on ``model``."""
    return {"PAL_DEFAULT_MODEL": os.environ.get("PAL_TEST_LOCAL_MODEL") or model}


def expected_seconds(item: pytest.Item) -> float:
    """How long a test is expected to take on one busy core, where it says so: ``@pytest.mark.slow(seconds=N)``."""
    slow = item.get_closest_marker("slow")
    return float(slow.kwargs.get("seconds", 0)) if slow else 0.0


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Browser tests run one after another on one xdist worker (``--dist loadgroup``). Bundled-model tests are
    not grouped: each worker has its own one-thread server (``local_servers``), so they share the cores without
    waiting for each other's slots. xdist hands out the browser group first (the largest), then single tests
    in this order: the longest start first, so the workers finish together instead of one waiting on a
    four-minute test begun last."""
    for item in items:
        if item.get_closest_marker("browser"):
            item.add_marker(pytest.mark.xdist_group("browser"))
    items.sort(key=lambda item: -expected_seconds(item))  # stable: the rest keep their order


@pytest.fixture(scope="session", autouse=True)
def streamlit_components_scanned_once():
    """Each new ``AppTest`` scans every installed distribution for Streamlit components (0.8 s: ~6,000 metadata
    reads), which was over half of a page test's time; the installed packages do not change during a session."""
    from streamlit.components.v2 import manifest_scanner

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(manifest_scanner, "scan_component_manifests",
                      functools.cache(manifest_scanner.scan_component_manifests))
        yield


BCRYPT_TEST_ROUNDS = 4  # bcrypt's lowest cost


@pytest.fixture(scope="session", autouse=True)
def cheap_password_hashes():
    """Passwords are hashed at bcrypt's lowest cost (about 1 ms) instead of its default 12 (0.3 s of CPU a hash and
    as much a check): the sign-in, access and review tests create and check hundreds, and none asserts the cost.
    A hash carries its cost, so checking it — here, in an app server or in a ``pal`` process — is as cheap.
    ``tests/review/test_accounts.py`` checks the product's own cost with the ``bcrypt_default_cost`` fixture."""
    import bcrypt

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(bcrypt, "gensalt", functools.partial(bcrypt.gensalt, BCRYPT_TEST_ROUNDS))
        yield


@pytest.fixture
def bcrypt_default_cost(monkeypatch):
    """bcrypt's own ``gensalt`` (the default cost) for one test."""
    import bcrypt

    monkeypatch.setattr(bcrypt, "gensalt", bcrypt.gensalt.func)


@pytest.fixture(scope="session")
def local_servers(tmp_path_factory):
    """The local-model servers of this test worker (one per model and server configuration), shared by every
    real-model test's workspace. One thread each: the other workers keep the other core busy, and two llama.cpp
    threads that wait for each other on a shared core decode several times slower than one (``bench/local_threads.py``;
    the app's default, ``threads = "auto"``, measures this at each start)."""
    from backends.llm.local_server import LocalServers

    servers = LocalServers(tmp_path_factory.mktemp("local_server"), threads=1)
    yield servers
    servers.stop_all()
@pytest.fixture(autouse=True)
def local_access(monkeypatch):
    """Tests run the app as one local person (``PAL_AUTH=local``) unless they set ``accounts`` themselves."""
    monkeypatch.setenv("PAL_AUTH", "local")


@pytest.fixture(scope="session")
def demo_dataset():
    return _load_demo()


@pytest.fixture
def demo_user(demo_dataset):
    """Demo user 1000 (English, 9 sessions); shared, so tests must not change it."""
    return demo_dataset.users["1000"]


@pytest.fixture(scope="session")
def demo_user_turns(demo_dataset) -> list[tuple[str, str]]:
    """Every user turn of the demo data's dialogues (English and Chinese) with its user's name: what a simulated
    user's turn is measured against."""
    return [(turn.user.content, user.name) for user in demo_dataset.users.values()
            for session in user.sessions for turn in session.turns]


def _load_demo():
    from palset.loader import load_dataset

    return load_dataset(DEMO)


def require_shared(path: Path) -> Path:
    if not path.exists():
        pytest.skip(f"shared reference data not present at {path}")
    return path


@pytest.fixture
def small_release(tmp_path: Path) -> Path:
    """A valid 2-user release (filler text) that a test may corrupt."""
    from testkit.release import make_release

    return make_release(tmp_path / "ds", users=2, sessions=4, logs_per_session=10, turns=8, query_sessions=1)


def read(path: Path):
    return json.loads(path.read_text(encoding="utf-8"))


def write(path: Path, data) -> None:
    path.write_text(json.dumps(data, ensure_ascii=False, indent=1), encoding="utf-8")
