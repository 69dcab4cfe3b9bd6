from palset.loader import load_dataset
from palset.stats import dataset_stats


def test_stats_totals_equal_the_sum_per_user(small_release):
    stats = dataset_stats(load_dataset(small_release))
    assert stats["users"] == 2 and stats["sessions"] == 8
    assert stats["history_sessions"] == 6 and stats["query_sessions"] == 2
    assert stats["logs"] == 80 and stats["topics"] == 16
    assert sum(stats["log_types"].values()) == stats["logs"]
    for key in ("sessions", "logs", "dialogue_turns", "topics"):
        assert stats[key] == sum(u[key] for u in stats["per_user"].values())
