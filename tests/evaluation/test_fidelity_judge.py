"""The judge-based fidelity variant, over a scripted judge: prompts carry the gold statement and the memory's
closest lines, verdicts are counted, an invalid answer is kept as invalid, the report is stored with them."""

from __future__ import annotations

import json

from backends.config import ROLES
from backends.embeddings import HashEmbedder
from backends.llm.fake import ScriptedLLM
from backends.vectorstore import BruteForceStore
from evaluation.fidelity import statements as fs
from evaluation.fidelity.service import judge_report, measure_build
from memory.build import MemoryBuilder
from memory.methods.gold import gold_stages
from testkit.requests import prompt_text
from testkit.workspace import make_workspace


def test_judge_counts_verdicts_and_keeps_them(tmp_path, demo_user):
    path = tmp_path / "runs.sqlite"
    gold = gold_stages(demo_user)[-1]
    requirements = {s.text for s in fs.requirement_statements(gold)}

    prefs = fs.gold_preference_statements(gold)[:6]
    bad = prefs[0].text
    rejects = sum(p.polarity == "neg" for p in prefs[1:])

    def reply(req):
        text = prompt_text(req)
        statement = text.split("# A fact about the user", 1)[1].split("\n", 2)[1]
        if statement == bad:
            return "no json"
        verdict = ("stated" if statement in requirements else
                   "contradicted" if "the user rejects this" in text else "absent")
        return json.dumps({"analysis": "checked", "verdict": verdict})

    fake = ScriptedLLM(reply)
    llm = make_workspace(path.parent).llm(session_id="test", providers=dict.fromkeys(ROLES, fake))
    embedder = HashEmbedder()
    builder = MemoryBuilder("demo", demo_user, "rag-session", make_workspace(path.parent).memory, BruteForceStore(embedder), embedder)
    builder.run()
    store = make_workspace(path.parent).fidelity
    report = judge_report(measure_build(builder, store), builder, llm, store, evidence_k=3, limit=20)
    judged = report.judge
    assert len(requirements) == 14 and judged.statements == 20 and judged.stated == 14
    assert judged.invalid == 1 and judged.contradicted == rejects
    assert sum(v["verdict"] == "absent" for v in judged.verdicts) == 5 - rejects
    assert judged.recall == 14 / 19
    assert all(len(v["evidence"]) == 3 for v in judged.verdicts)
    first = prompt_text(fake.requests[0])
    assert judged.verdicts[0]["statement"] in first and judged.verdicts[0]["evidence"][0] in first
    assert store.get(report.fidelity_key).judge == judged


def test_the_judge_as_matcher_judges_each_distinct_statement_for_precision(tmp_path, demo_user):
    """The precision side: each distinct topic outline and principle of the memory is judged against gold's closest
    statements; a wrong guess said three times is judged (and counted) once; precision = supported / judged, F1
    beside recall. A memory without those layers gets no judge precision (n/a, as the embedding figures)."""
    from evaluation.fidelity.compute import StatementVectors
    from evaluation.fidelity.judge import judge_fidelity
    from memory.types import MemoryItem

    gold = gold_stages(demo_user)[-1]
    truth = {s.text for s in fs.requirement_statements(gold) + fs.preference_statements(gold)}
    wrong = [MemoryItem(id=f"wrong{k}", layer="topic_outline", text="Zebras cross the Mara river every July.", session_id="x",
                        session_index=99) for k in range(3)]
    mine = {**gold, **{i.id: i for i in wrong}}

    def reply(req):
        text = prompt_text(req)
        if "# A statement the memory holds" in text:
            statement = text.split("# A statement the memory holds", 1)[1].split("\n", 2)[1]
            return json.dumps({"analysis": "checked", "verdict": "supported" if statement in truth else "unsupported"})
        return json.dumps({"analysis": "checked", "verdict": "stated"})

    fake = ScriptedLLM(reply)
    llm = make_workspace(tmp_path).llm(session_id="test", providers=dict.fromkeys(ROLES, fake))
    vectors = StatementVectors(HashEmbedder())
    judged = judge_fidelity(llm, gold, mine, vectors, evidence_k=2)
    asked = [prompt_text(r) for r in fake.requests if "# A statement the memory holds" in prompt_text(r)]
    assert len(asked) == judged.precision_statements and sum("Zebras cross" in a for a in asked) == 1
    assert judged.supported == judged.precision_statements - 1 and judged.precision_invalid == 0
    assert judged.precision == (judged.precision_statements - 1) / judged.precision_statements
    assert judged.recall == 1.0 and judged.f1 == 2 * judged.precision / (1 + judged.precision)
    assert all(len(v["evidence"]) == 2 for v in judged.support) and judged.precision_prompt_version == "1"
    flat = judge_fidelity(llm, gold, mine, vectors, evidence_k=2, layered=False)
    assert flat.precision is None and flat.f1 is None and flat.support == []
