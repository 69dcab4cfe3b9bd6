"""AppTest of the Review page: sign-in, the annotator flow (buttons, progress, undo, resume), access control
through crafted query parameters, the local single-admin mode and the admin flow (create a batch, agreement)."""

import pytest

from palset.dataset import dataset_key
from palset.loader import load_dataset
from review.batches import plan_batch, quality_candidates
from tests.conftest import DEMO
from tests.pages.apptest import CookieJar, all_markdown, app_workspace, open_page

PASSWORD = "correct-horse"
JAR = CookieJar()


@pytest.fixture
def team(tmp_path, monkeypatch):
    """Accounts boss (admin), ann1, ann2, ann3 and two quality batches of the demo dataset."""
    monkeypatch.setenv("PAL_HOME", str(tmp_path / "pal"))
    monkeypatch.setenv("PAL_EMBEDDER", "hash")
    monkeypatch.setenv("PAL_AUTH", "accounts")
    JAR.install(monkeypatch)
    accounts = app_workspace().accounts
    accounts.add("boss", "admin", PASSWORD)
    for name in ("ann1", "ann2", "ann3"):
        accounts.add(name, "annotator", PASSWORD)
    store = app_workspace().reviews
    cands = quality_candidates(load_dataset(DEMO))
    shared = store.create_batch(plan_batch("Shared", "quality", dataset_key(DEMO), cands, 4, 5, 2, ["ann1", "ann2"]),
                                "boss")
    split = store.create_batch(plan_batch("Split", "quality", dataset_key(DEMO), cands, 4, 5, 1, ["ann1", "ann3"]),
                               "boss")
    other = store.create_batch(plan_batch("Theirs", "quality", dataset_key(DEMO), cands, 2, 5, 1, ["ann3"]), "boss")
    return store, {"shared": shared, "split": split, "other": other}


def sign_in(name: str, **params: str):
    """The Review page with ``name`` signed in (the session cookie the sign-in route would have set)."""
    JAR.sign_in(name)
    return open_page("review", **params)


def click(at, key: str):
    at.button(key=key).click().run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def progress_text(at) -> str:
    return at.get("progress")[0].proto.text


def test_without_accounts_a_public_server_asks_for_an_account_and_localhost_runs_as_local_admin(tmp_path, monkeypatch):
    monkeypatch.setenv("PAL_HOME", str(tmp_path / "pal"))
    monkeypatch.setenv("PAL_AUTH", "accounts")  # was: bound to a public address
    at = open_page("review")
    assert "pal users add" in at.info[0].value and not at.tabs
    monkeypatch.setenv("PAL_AUTH", "local")  # was: bound to localhost
    at = open_page("review")
    assert "local" in all_markdown(at) and [t.label for t in at.tabs][:2] == ["My assignments", "Batches"]


def test_wrong_password_is_refused(team):
    JAR.sign_in(None)
    at = open_page("review", signin="failed")  # where the sign-in route sends a wrong password back to
    assert at.error and "wrong password" in at.error[0].value
    assert not at.tabs and any('name="pal_password"' in h.value for h in at.html)


def test_annotator_answers_with_buttons_sees_progress_undoes_and_resumes(team):
    store, b = team
    at = sign_in("ann1")
    assert {btn.key for btn in at.button if btn.key and btn.key.startswith("review_open_")} == {
        f"review_open_{b['shared']}", f"review_open_{b['split']}"}  # not ann3's batch
    click(at, f"review_open_{b['shared']}")
    assert "Guidelines" in all_markdown(at)
    click(at, "review_start")
    assert at.query_params["item"] == "1" and progress_text(at) == "0/4 done"
    click(at, "review_logs_3")
    assert store.answers(b["shared"], "ann1") and at.query_params["item"] == "1"  # saved at once
    click(at, "review_dialogue_2")
    assert at.query_params["item"] == "2" and progress_text(at) == "1/4 done"  # complete: moves on
    click(at, "review_logs_1")
    click(at, "review_undo")
    assert at.query_params["item"] == "2" and [a["item_no"] for a in store.answers(b["shared"], "ann1")] == [1, 1]
    click(at, "review_undo")
    assert at.query_params["item"] == "1" and progress_text(at) == "0/4 done"
    click(at, "review_next")
    assert at.query_params["item"] == "2"
    click(at, "review_prev")
    assert at.query_params["item"] == "1"
    # a fresh session resumes at the first unanswered item
    store.answer(b["shared"], 1, "ann1", "dialogue", "3")
    at = sign_in("ann1", batch=b["shared"])
    assert at.query_params["item"] == "2" and progress_text(at) == "1/4 done"
    assert not at.get("download_button") and not any("overview" in e.label for e in at.expander)


def test_crafted_query_params_never_show_someone_elses_item(team):
    store, b = team
    theirs = store.assigned(b["split"], "ann3")[0]
    at = sign_in("ann1", batch=b["other"])
    assert at.error and "not among your assignments" in at.error[0].value and not at.get("progress")
    at = sign_in("ann1", batch=b["split"], item=str(theirs))
    assert at.error and "not one of your assignments" in at.error[0].value
    assert not any(btn.key == "review_logs_1" for btn in at.button)
    assert "Logs" not in all_markdown(at)
    at = sign_in("ann1", batch="b-doesnotexist")
    assert "not among your assignments" in at.error[0].value
    at = sign_in("ann1", batch=b["split"], item="abc")
    assert "not one of your assignments" in at.error[0].value
    with pytest.raises(PermissionError):
        store.answer(b["split"], theirs, "ann1", "logs", "3")


def test_admin_creates_a_batch_and_sees_agreement(team):
    store, b = team
    at = sign_in("boss")
    at.selectbox(key="review_new_task").set_value("quality").run()
    at.multiselect(key="review_new_annotators").select("ann1").select("ann2").run()
    at.number_input(key="review_new_n").set_value(3).run()
    at.number_input(key="review_new_seed").set_value(11).run()
    at.number_input(key="review_new_overlap").set_value(2).run()
    click(at, "review_create")
    assert at.success and "3 items" in at.success[0].value
    new = next(x for x in store.batches() if x["batch_id"] not in b.values())
    assert new["seed"] == 11 and new["overlap"] == 2 and new["created_by"] == "boss"
    assert all(sorted(p) == ["ann1", "ann2"] for p in store.assignments(new["batch_id"]).values())
    for no, (x, y) in enumerate([("3", "3"), ("1", "1"), ("2", "3")], start=1):
        for who, v in (("ann1", x), ("ann2", y)):
            store.answer(new["batch_id"], no, who, "logs", v)
            store.answer(new["batch_id"], no, who, "dialogue", "2")
    at = sign_in("boss", batch=new["batch_id"])
    table = next(d.value for d in at.dataframe if "kappa" in d.value.columns)
    logs = table[table["question"] == "logs"].iloc[0]
    assert logs["method"] == "Cohen" and logs["items"] == 3 and logs["kappa"] == pytest.approx(0.5)  # po 2/3, pe 1/3
    assert "**Disagreements** (1)" in all_markdown(at)
    assert {d.label for d in at.get("download_button")} >= {"Answers CSV", "Answers JSONL"}


def test_local_admin_audits_memory_and_compares_dialogues_with_a_recorded_order(tmp_path, monkeypatch):
    from palset.vocab import Act
    from review.batches import memory_candidates, pairwise_candidates
    from sim.types import RunRecord, RunSpec, Utterance
    from tests.review.conftest import memory_items

    monkeypatch.setenv("PAL_HOME", str(tmp_path / "pal"))
    monkeypatch.setenv("PAL_AUTH", "local")
    store, sims = app_workspace().reviews, app_workspace().sims
    for method in ("x", "y"):
        spec = RunSpec(dataset=dataset_key(DEMO), user_id="1001", sample_id="1001_sample7", topic_key="topic-1",
                       method=method)
        sims.create(RunRecord(run_id=f"run-{method}", spec=spec, status="finished"))
        sims.add_utterance(f"run-{method}", Utterance(turn_no=0, side="assistant", actor="assistant",
                                                      act=Act.TOPIC_INQUIRY, content=f"*reply of {method}*"))
    pairs = pairwise_candidates(sims.list(), "x", "y")
    pair = store.create_batch(plan_batch("P", "pairwise", dataset_key(DEMO), pairs, 1, 3, 1, ["local"]), "local")
    at = open_page("review", batch=pair)
    click(at, "review_start")
    text = all_markdown(at)
    assert "\\*reply of x\\*" in text and "\\*reply of y\\*" in text  # data text escaped
    first = "x" if text.index("reply of x") < text.index("reply of y") else "y"
    swap = store.item(pair, 1)["payload"]["swap"]
    assert first == ("y" if swap else "x")
    click(at, "review_requirement_A")
    click(at, "review_preference_tie")
    assert progress_text(at) == "1/1 done" and at.success
    items = [(k, {**p, "user_id": "1001"}) for k, p in memory_items(3)]
    mem = store.create_batch(plan_batch("M", "memory", dataset_key(DEMO), items, 3, 3, 1, ["local"]), "local")
    at = open_page("review", batch=mem)
    click(at, "review_start")
    assert "fact" in all_markdown(at) + "".join(i.value for i in at.info)
    at.text_input(key=f"review_text_{mem}_1_correction").input("a better fact").run()
    click(at, "review_verdict_incorrect")
    assert at.query_params["item"] == "2" and progress_text(at) == "1/3 done"
    assert {a["question"]: a["value"] for a in store.answers(mem, "local", 1)} == {
        "correction": "a better fact", "verdict": "incorrect"}
    assert memory_candidates("b", [], "u") == []


def test_admin_overview_of_a_pairwise_batch_shows_judge_human_agreement(tmp_path, monkeypatch):
    from evaluation.faireval import Judgment
    from review.batches import pairwise_candidates, shown_order
    from sim.types import RunRecord, RunSpec

    monkeypatch.setenv("PAL_HOME", str(tmp_path / "pal"))
    monkeypatch.setenv("PAL_AUTH", "local")
    store, sims = app_workspace().reviews, app_workspace().sims
    for method in ("x", "y"):
        spec = RunSpec(dataset=dataset_key(DEMO), user_id="1001", sample_id="1001_sample7", topic_key="topic-1",
                       method=method)
        sims.create(RunRecord(run_id=f"run-{method}", spec=spec, status="finished"))
    pair = store.create_batch(plan_batch("P", "pairwise", dataset_key(DEMO), pairwise_candidates(sims.list(), "x", "y"),
                                         1, 3, 1, ["local"]), "local")
    store.answer(pair, 1, "local", "requirement", "A" if shown_order(store.item(pair, 1)["payload"])[0] == "y" else "B")
    app_workspace().evals.save_judgment(Judgment(
        judgment_key="jdg-1", dataset=dataset_key(DEMO), user_id="1001", sample_id="1001_sample7", topic_key="topic-1",
        aspect="requirement", method_a="y", method_b="x", run_a="run-y", run_b="run-x", k=1, judge_model="m",
        prompt_name="p", prompt_version="1", texts={}, samples=[], decision="win"))  # y better: agrees
    at = open_page("review", batch=pair)
    table = next(d.value for d in at.dataframe if "human win" in d.value.columns)
    assert table.loc["judge lose", "human lose"] == 1  # from x's side (the batch's method 1)
    assert "Judge–human agreement" in all_markdown(at)
    assert {m.label: m.value for m in at.metric}["Matched items"] == "1"


def test_annotators_are_blinded_on_pairwise_items(team, monkeypatch):
    from review.batches import pairwise_candidates
    from sim.types import RunRecord, RunSpec, Utterance

    store, _ = team
    sims = app_workspace().sims
    for method in ("h2memory", "memorybank"):
        spec = RunSpec(dataset=dataset_key(DEMO), user_id="1001", sample_id="1001_sample7", topic_key="topic-1",
                       method=method)
        sims.create(RunRecord(run_id=f"run-{method}", spec=spec, status="finished"))
        from palset.vocab import Act
        sims.add_utterance(f"run-{method}", Utterance(turn_no=0, side="assistant", actor="assistant",
                                                      act=Act.TOPIC_INQUIRY, content=f"answer number {len(method)}"))
    pair = store.create_batch(plan_batch("P", "pairwise", dataset_key(DEMO),
                                         pairwise_candidates(sims.list(), "h2memory", "memorybank"), 1, 3, 2,
                                         ["ann1", "ann2"]), "boss")
    store.answer(pair, 1, "ann2", "requirement", "A")  # someone else's answer
    at = sign_in("ann1", batch=pair)
    click(at, "review_start")
    shown = "\n".join([all_markdown(at), *(e.label for e in at.expander), *(b.label for b in at.button),
                       *(t.label for t in at.tabs)])
    assert "Response A" in shown and "Response B" in shown
    for secret in ("h2memory", "memorybank", "H²Memory", "MemoryBank", "ann2", "judge", "majority"):
        assert secret.lower() not in shown.lower(), secret
    assert not at.dataframe and not at.get("download_button") and not at.metric


def test_an_item_that_cannot_be_shown_names_nothing_and_cannot_be_answered(team):
    """Audit finding 6: an annotator read "no simulation run 'run-1002-vanilla-log-…'" (a method name) and the
    A/Tie/B buttons stayed active for an item that could not be shown."""
    from review.batches import pairwise_candidates
    from sim.types import RunRecord, RunSpec

    store, _ = team
    sims = app_workspace().sims
    for method in ("vanilla-log", "gold"):
        spec = RunSpec(dataset=dataset_key(DEMO), user_id="1001", sample_id="1001_sample7", topic_key="topic-1",
                       method=method)
        sims.create(RunRecord(run_id=f"run-1001-{method}-0123456789", spec=spec, status="finished"))
    pair = store.create_batch(plan_batch("P", "pairwise", dataset_key(DEMO),
                                         pairwise_candidates(sims.list(), "vanilla-log", "gold"), 1, 3, 1, ["ann1"]),
                              "boss")
    with app_workspace().db.write() as conn:  # the runs are gone (another server's batch, a cleaned home)
        conn.execute("DELETE FROM sim_runs")
    at = sign_in("ann1", batch=pair)
    click(at, "review_start")
    errors = " ".join(e.value for e in at.error)
    assert "cannot be shown" in errors
    for secret in ("vanilla", "gold", "run-1001", "no simulation run"):
        assert secret not in errors + all_markdown(at), secret
    answers = [b for b in at.button if b.key and b.key.startswith(("review_requirement_", "review_preference_"))]
    assert answers and all(b.disabled for b in answers)
    assert store.answers(pair, "ann1") == []


def test_guidelines_fetch_no_remote_image_and_show_where_links_go(team):
    """Audit finding 7: guidelines with a disguised link and an external image rendered (the image was requested
    from the outside host)."""
    store, _ = team
    guidelines = ("Read carefully. ![tracker](https://evil.example/pixel.png) See [the rubric](https://evil.example/"
                  "phish \"Rubric\") and [the form][f].\n\n[f]: https://evil.example/form")
    cands = quality_candidates(load_dataset(DEMO))
    batch = store.create_batch(plan_batch("G", "quality", dataset_key(DEMO), cands, 1, 5, 1, ["ann1"], guidelines),
                               "boss")
    at = sign_in("ann1", batch=batch)
    text = all_markdown(at)
    assert "Read carefully" in text and "![" not in text and "](" not in text and "]:" not in text
    assert "image: tracker" in text and "the rubric (https" in text and "the form (https" in text


def test_an_unanswered_batch_can_be_deleted_by_its_admin_behind_a_confirmation_an_answered_one_cannot(team):
    store, b = team
    at = sign_in("boss", batch=b["other"])
    assert at.button(key=f"review_delete_{b['other']}").disabled  # nothing goes without the confirmation
    at.checkbox(key=f"review_delete_sure_{b['other']}").check().run()
    click(at, f"review_delete_{b['other']}")
    assert store.batch(b["other"]) is None and "batch" not in at.query_params
    assert at.success and f"Deleted batch {b['other']} (2 items)" in at.success[0].value
    (entry,) = app_workspace().audit.entries(action="review.batch_delete")
    assert (entry.actor, entry.target, entry.detail["items"]) == ("boss", b["other"], 2)
    no = store.assigned(b["split"], "ann1")[0]
    store.answer(b["split"], no, "ann1", "logs", "2")
    at = sign_in("boss", batch=b["split"])
    assert not [x for x in at.button if x.key == f"review_delete_{b['split']}"]
    assert any("1 answer(s) given in this batch" in c.value for c in at.caption)
    at = sign_in("ann3", batch=b["split"])  # an annotator manages no batch
    assert not [x for x in at.button if (x.key or "").startswith("review_delete_")]
