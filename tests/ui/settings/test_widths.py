"""Settings' calls-in-flight table: one row per endpoint, the roles that use it, its width and where it comes from."""

from backends.config import EndpointLimits
from backends.llm.limits import DEFAULT_CONCURRENCY, Limiters
from ui.settings.widths import SOURCES, widths_frame


def test_roles_sharing_an_endpoint_share_a_row_and_the_source_is_named():
    limiters = Limiters({"http://lab/v1": EndpointLimits(concurrency=3)})
    widths = {"assistant": limiters.describe("http://vllm/v1"), "judge": limiters.describe("http://vllm/v1"),
              "user_simulator": limiters.describe("local:qwen", slots=2),
              "memory_builder": limiters.describe("http://lab/v1")}
    frame = widths_frame(widths).set_index("roles")
    assert list(frame.index) == ["assistant, judge", "user_simulator", "memory_builder"]
    assert frame.loc["assistant, judge", "in flight together"] == DEFAULT_CONCURRENCY
    assert frame.loc["assistant, judge", "from"] == SOURCES["default"]
    assert frame.loc["user_simulator", "in flight together"] == 2
    assert frame.loc["user_simulator", "from"] == SOURCES["server slots"]
    assert frame.loc["memory_builder", "in flight together"] == 3
    assert frame.loc["memory_builder", "from"] == SOURCES["configured"]


def test_a_429_shows_as_a_halved_width_and_a_count():
    limiters = Limiters()
    lim = limiters.limiter("https://api.example/v1")
    assert lim is not None
    lim.release(lim.acquire(5), 5, rate_limited=True, retry_after=0.0)
    row = widths_frame({"judge": limiters.describe("https://api.example/v1")}).iloc[0]
    assert row["in flight together"] == DEFAULT_CONCURRENCY // 2 and row["429s"] == 1
    assert row["ceiling"] == DEFAULT_CONCURRENCY
