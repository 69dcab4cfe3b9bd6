"""PersonaMem-v2 files opened as the dataset publishes them: the raw persona file wrapped in its id, the
benchmark CSV splits (dict-literal ``user_query``, JSON-string ``incorrect_answers``, True/False flags),
``null`` distractors, unusable items skipped with a counted reason, and a persona file with no profile.

Small files are written here in each released layout; one test rebuilds the raw-file layout from the real
excerpt in ../shared/data/personamem (PersonaMem-v2, Jiang et al., arXiv 2512.06688, CC BY 4.0)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from cli import personamem_cmds
from cli.main import main
from evaluation.personamem.loader import PersonaMemError, load_persona, load_questions, read_questions
from tests.conftest import SHARED_DATA, require_shared

PERSONA = {"short_persona": "A night-shift nurse who paints.", "name": "Ada Obi", "age": 34, "gender": "female",
           "stereotypical_preferences": ["Likes jollof rice"], "neutral_preferences": ["Paints on Sundays"]}


def qa(k: int, **kw) -> dict:
    return {"preference": f"pref {k}", "pref_type": "neutral_preferences", "who": "self", "updated": False,
            "user_query": f"question {k}?", "correct_answer": f"gold {k}",
            "incorrect_answers": [f"wrong {k}a", f"wrong {k}b", f"wrong {k}c"], **kw}


def raw_file(tmp_path: Path, personas: dict[str, dict], name="raw_data_250815_143643_persona0.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(personas), encoding="utf-8")
    return path


def test_raw_persona_file_wrapped_in_its_id_opens_as_persona_and_as_questions(tmp_path):
    conversations = {"personal_email": [qa(0), {"preference": "plants only", "conversations": []}],
                     "translation": [qa(1, incorrect_answers=["w1", None, "w2", "w3"])]}  # a null distractor
    path = raw_file(tmp_path, {"0": {**PERSONA, "conversations": conversations}})
    assert load_persona(path).name == "Ada Obi"
    qf = read_questions(path)
    assert qf.layout == "raw persona file" and qf.persona_id == "0" and not qf.skipped
    assert [i.conversation_scenario for i in qf.items] == ["personal_email", "personal_email", "translation"]
    assert len(qf.evaluable) == 2 and qf.planting == 1
    assert qf.items[2].incorrect_answers == ["w1", "w2", "w3"]  # null dropped, the item is usable


def test_a_file_of_several_personas_is_chosen_by_id(tmp_path):
    path = raw_file(tmp_path, {"0": {**PERSONA, "conversations": {"translation": [qa(0)]}},
                               "7": {**PERSONA, "name": "Bo", "conversations": {"chat_message": [qa(7), qa(8)]}}})
    with pytest.raises(PersonaMemError, match=r"persona0\.json: holds 2 personas \(0, 7\).*--persona-id"):
        load_persona(path)
    assert load_persona(path, "7").name == "Bo"
    assert [i.user_query for i in read_questions(path, "7").items] == ["question 7?", "question 8?"]
    with pytest.raises(PersonaMemError, match=r"no persona '3' \(it holds 0, 7\)"):
        read_questions(path, "3")


def test_a_persona_file_that_yields_no_profile_is_an_error_naming_the_file(tmp_path):
    for data in ({"conversations": {"translation": [qa(0)]}}, {"0": {"conversations": {}}}, {"something": "else"}):
        path = raw_file(tmp_path, data, name="odd.json")
        with pytest.raises(PersonaMemError, match=r"odd\.json: no persona profile"):
            load_persona(path)


def test_unusable_items_are_skipped_and_counted_not_fatal(tmp_path):
    items = [qa(0), qa(1, incorrect_answers=["only", None]), qa(2, who="nobody"), qa(3, correct_answer=None),
             qa(4, incorrect_answers=["a", "b", "c", "d"])]
    path = tmp_path / "items.json"
    path.write_text(json.dumps({"items": [{"conversation_scenario": "chat_message", "item": it} for it in items]}))
    qf = read_questions(path)
    assert [i.user_query for i in qf.items] == ["question 0?"]
    assert qf.skipped == {"incorrect_answers: expected exactly 3, got 1": 1,
                          "incorrect_answers: expected exactly 3, got 4": 1,
                          "who: Input should be 'self' or 'others'": 1,
                          "a query without a correct answer and 3 incorrect answers": 1}
    assert "1 × who: Input should be 'self' or 'others'" in qf.skipped_text()
    with pytest.raises(PersonaMemError, match=r"items\.json: items\[1\]\.item.*exactly 3"):
        load_questions(path)  # the strict loader still names the first bad item


CSV_COLUMNS = ["persona_id", "chat_history_32k_link", "chat_history_128k_link", "raw_persona_file", "user_query",
               "correct_answer", "incorrect_answers", "related_conversation_snippet", "topic_query",
               "topic_preference", "conversation_scenario", "pref_type", "who", "updated", "prev_pref", "preference",
               "sensitive_info", "total_tokens_in_chat_history_32k", "total_tokens_in_chat_history_128k",
               "distance_from_related_snippet_to_query_32k", "distance_from_related_snippet_to_query_128k",
               "num_persona_relevant_tokens_32k", "num_persona_irrelevant_tokens_32k",
               "num_persona_relevant_tokens_128k", "num_persona_irrelevant_tokens_128k"]


def csv_row(pid: str, k: int, **kw) -> dict:
    row = dict.fromkeys(CSV_COLUMNS, "")
    row.update({"persona_id": pid, "chat_history_32k_link": f"data/chat_history_32k/persona{pid}.json",
                "raw_persona_file": f"data/raw_data/raw_data_x_persona{pid}.json",
                "user_query": str({"role": "user", "content": f"question {k}?"}), "correct_answer": f"gold {k}",
                "incorrect_answers": json.dumps([f"wrong {k}a", f"wrong {k}b", f"wrong {k}c"]),
                "related_conversation_snippet": "[{'role': 'user', 'content': 'x'}]", "topic_query": "Food",
                "conversation_scenario": "chat_message", "pref_type": "neutral_preferences", "who": "self",
                "updated": "False", "preference": f"pref {k}", "sensitive_info": "False",
                "total_tokens_in_chat_history_32k": "31726"})
    row.update(kw)
    return row


def write_csv(path: Path, rows: list[dict]) -> Path:
    with path.open("w", encoding="utf-8", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=CSV_COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    return path


def test_benchmark_csv_split_with_dict_literal_queries_json_distractors_and_flags(tmp_path):
    path = write_csv(tmp_path / "benchmark.csv", [
        csv_row("0", 0),
        csv_row("0", 1, pref_type="sensitive_info", sensitive_info="True",
                user_query=str({"role": "user", "content": "My licence is D3928, how do I submit it?"})),
        csv_row("0", 2, updated="True", prev_pref="Loves pizza", incorrect_answers=json.dumps(["a", None, "b", "c"])),
        csv_row("5", 3),
        csv_row("0", 4, incorrect_answers=json.dumps(["a", "b"]))])
    with pytest.raises(PersonaMemError, match=r"benchmark\.csv: holds questions of 2 personas"):
        read_questions(path)
    qf = read_questions(path, "0")
    assert qf.layout == "csv" and [i.user_query for i in qf.items][0] == "question 0?"
    plain, secret, updated = qf.items
    assert not plain.has_sensitive_info and plain.sensitive_info is None and plain.pref_type == "neutral_preferences"
    assert secret.has_sensitive_info and secret.sensitive_info is None and secret.pref_type == "sensitive_info"
    assert "D3928" in secret.user_query  # the flag was not taken for the secret
    assert updated.updated and updated.prev_pref == "Loves pizza" and updated.incorrect_answers == ["a", "b", "c"]
    assert all(i.evaluable for i in qf.items) and qf.skipped == {"incorrect_answers: expected exactly 3, got 2": 1}
    assert [i.user_query for i in read_questions(path, "5").items] == ["question 3?"]
    with pytest.raises(PersonaMemError, match="no rows of persona '9'"):
        read_questions(path, "9")
    (tmp_path / "other.csv").write_text("a,b\n1,2\n")
    with pytest.raises(PersonaMemError, match=r"other\.csv: not a PersonaMem-v2 CSV split"):
        read_questions(tmp_path / "other.csv")


def test_csv_rubric_for_a_flagged_privacy_item_does_not_invent_a_secret(tmp_path):
    from evaluation.personamem.evaluate import rubric

    path = write_csv(tmp_path / "val.csv", [csv_row("0", 1, pref_type="sensitive_info", sensitive_info="True")])
    (item,) = read_questions(path).items
    use, avoid = rubric(item)
    assert "placeholder" in use and "True" not in avoid and "None" not in avoid and "sensitive personal data" in avoid


# ---------------------------------------------------------------- the command on released layouts


def _history(tmp_path: Path, pid: int = 0) -> Path:
    path = tmp_path / "history.json"
    path.write_text(json.dumps({"metadata": {"persona_id": pid}, "chat_history": [
        {"role": "system", "content": "persona"}, {"role": "user", "content": "I paint on Sundays."},
        {"role": "assistant", "content": "Lovely."}]}))
    return path


@pytest.fixture
def cli_env(env, monkeypatch):
    from backends.embeddings import HashEmbedder
    from backends.vectorstore import BruteForceStore
    from memory.build import MemoryBuilder
    from tests.evaluation.personamem.test_evaluate import picker

    make_llm, _, ws = env
    monkeypatch.setattr(personamem_cmds, "make_llm", lambda: make_llm(picker(lambda text, opts: "gold"))[0])

    def fake_builder(dataset, user, method, llm):
        emb = HashEmbedder()
        return MemoryBuilder(dataset, user, method, ws.memory, BruteForceStore(emb), emb, llm=llm)
    monkeypatch.setattr(personamem_cmds, "make_builder", fake_builder)


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    rc = main(["personamem", "--method", "full-history", "--forms", "mcq", "--json", *argv])
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_pal_personamem_reads_the_raw_file_for_persona_and_questions(tmp_path, cli_env, capsys):
    path = raw_file(tmp_path, {"0": {**PERSONA, "conversations": {"chat_message": [
        qa(0, correct_answer="gold answer"), qa(1, incorrect_answers=["x"])]}}})
    rc, out, err = run_cli(capsys, "--persona", str(path), "--history", str(_history(tmp_path)), "--questions", str(path))
    assert rc == 0, err
    assert "raw persona file, persona 0): 1 question(s)" in err and "skipped 1: 1 × incorrect_answers" in err
    rows = json.loads(out)
    assert next(r for r in rows if r["group"] == "overall")["n"] == 1
    assert rows[0]["metric_versions"] == {"personamem": "3"}
    assert any(r["group"] == "scenario" and r["value"] == "chat_message" for r in rows)


def test_pal_personamem_reads_a_csv_split_for_the_historys_persona(tmp_path, cli_env, capsys):
    persona = raw_file(tmp_path, {"3": PERSONA})
    split = write_csv(tmp_path / "benchmark.csv", [csv_row("3", 0, correct_answer="gold 0"), csv_row("4", 1)])
    rc, out, err = run_cli(capsys, "--persona", str(persona), "--history", str(_history(tmp_path, 3)),
                           "--questions", str(split))
    assert rc == 0, err
    assert "(csv, persona 3): 1 question(s)" in err


def test_pal_personamem_names_the_file_that_yields_no_profile(tmp_path, cli_env, capsys):
    empty = raw_file(tmp_path, {"0": {"conversations": {"chat_message": [qa(0)]}}}, name="empty.json")
    rc, _, err = run_cli(capsys, "--persona", str(empty), "--history", str(_history(tmp_path)), "--questions", str(empty))
    assert rc == 2 and "empty.json: no persona profile" in err


def test_the_real_excerpt_in_the_raw_file_layout(tmp_path):
    """The shared excerpt of persona 0 (profile + selected conversation items), put back into the released raw
    layout {"0": {…profile…, "conversations": {scenario: [item, …]}}}."""
    base = require_shared(SHARED_DATA / "personamem")
    profile = json.loads((base / "persona0_profile.json").read_text(encoding="utf-8"))
    excerpt = json.loads((base / "persona0_qa_items.json").read_text(encoding="utf-8"))
    conversations: dict[str, list] = {}
    for entry in excerpt["items"]:
        conversations.setdefault(entry["conversation_scenario"].split(" ")[0], []).append(entry["item"])
    path = raw_file(tmp_path, {excerpt["persona_key"]: {**profile, "conversations": conversations}})
    assert load_persona(path).name == "Amara Nwosu"
    qf = read_questions(path)
    assert qf.persona_id == "0" and len(qf.evaluable) == 8 and not qf.skipped
    assert {i.conversation_scenario for i in qf.items} >= {"personal_email", "professional_email", "multimodal"}
