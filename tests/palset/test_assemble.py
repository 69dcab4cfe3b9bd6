from palset.assemble import assemble_user, write_release
from palset.loader import load_dataset
from testkit.release import make_bundle


def test_assembly_numbers_sessions_and_partitions_logs():
    bundle = make_bundle("0042", sessions=5, logs_per_session=7, query_sessions=2)
    bundle.situations[1].kept = None  # a dropped situation: its logs fold into the next session
    out = assemble_user(bundle)
    history, query = out["samples"]["history"], out["samples"]["query"]
    assert [s["sample_id"] for s in history + query] == [f"0042_sample{i}" for i in range(4)]
    assert len(history[1]["logs"]) == 14 and len(history[0]["logs"]) == 7
    assert len(out["situations"]) == 5 and len(out["requirement_framework"]) == 4
    topic = history[0]["topics"]["topic-1"]
    labels = [c["feedback"] for c in topic["candidate_solutions"]]
    assert labels.count("pos") == 2 and labels.count("neg") == 2
    assert set(topic["solution"]["pos"]) == {c["solution"] for c in topic["candidate_solutions"] if c["feedback"] == "pos"}


def test_write_release_merges_users_into_existing_files(tmp_path):
    write_release(tmp_path, [make_bundle("0001", sessions=3)])
    write_release(tmp_path, [make_bundle("0000", sessions=3)])
    ds = load_dataset(tmp_path)
    assert list(ds.users) == ["0000", "0001"] and ds.errors == []


def test_a_repeated_candidate_text_is_labelled_once():
    bundle = make_bundle("0043", sessions=3, query_sessions=1)
    topic = bundle.situations[0].topics[0]
    neg = topic.neg_list[0].solution
    others = [c for c in topic.candidate_solutions if c != neg]
    topic.candidate_solutions = [neg, *others[:6], neg]  # the generator repeated a disliked candidate
    labels = [c["feedback"] for c in assemble_user(bundle)["samples"]["history"][0]["topics"]["topic-1"]["candidate_solutions"]]
    assert labels.count("pos") == 2 and labels.count("neg") == 2 and labels[0] == "neg" and labels[-1] == "neu"
