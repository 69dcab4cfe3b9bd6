"""The judge-based variant of fidelity — the default reading where the embedder cannot tell one need from another
(:mod:`evaluation.fidelity.calibrated`): the ``judge`` role is the matcher. Recall: it reads each gold requirement
and preference beside the memory's closest statements (by the same embedder) and says whether the memory states it,
contradicts it or lacks it; recall = stated / judged, and contradictions count polarity errors a judge can see even
where the memory writes no explicit polarity. Precision: it reads each of the memory's distinct topic-outline and
principle statements beside gold's closest ones and says whether gold supports it (the same need, not the same
topic); precision = supported / judged — n/a for a memory without those layers, as the embedding figures. Every
verdict is kept with its evidence."""

from __future__ import annotations

import logging
from typing import Literal

from pydantic import BaseModel, Field

from backends.llm.client import LLMClient
from backends.prompts import load_prompt
from evaluation.fidelity import metrics as fm
from evaluation.fidelity import statements as fs
from evaluation.fidelity.compute import Snapshot, StatementVectors
from evaluation.fidelity.metrics import f1
from evaluation.fidelity.types import JudgeFidelity

log = logging.getLogger(__name__)
PROMPT = "eval/memory_fidelity"
PRECISION_PROMPT = "eval/memory_fidelity_precision"


class VerdictOut(BaseModel):
    analysis: str = Field(max_length=400)
    verdict: Literal["stated", "contradicted", "absent"]


class SupportOut(BaseModel):
    analysis: str = Field(max_length=400)
    verdict: Literal["supported", "contradicted", "unsupported"]


def _kind(st: fs.Statement) -> str:
    if st.layer == "topic_outline":
        return "requirement"
    return {"pos": "preference (the user accepts this)", "neg": "preference (the user rejects this)"}.get(
        st.polarity or "", "preference")


def judge_fidelity(llm: LLMClient, gold: Snapshot, mine: Snapshot, vectors: StatementVectors, *,
                   evidence_k: int = 5, limit: int | None = None, layered: bool = True) -> JudgeFidelity:
    """Judge every gold requirement and preference of ``gold`` (up to ``limit``) against ``mine`` (recall) and, for a
    memory with topic outlines and principles (``layered``), each of their distinct statements against ``gold``
    (precision; up to ``limit``)."""
    prompt = load_prompt(PROMPT)
    statements = fs.requirement_statements(gold) + fs.gold_preference_statements(gold)
    statements = statements[:limit] if limit is not None else statements
    candidates = fs.all_statements(mine)
    sim = vectors.similarity(statements, candidates)
    verdicts: list[dict] = []
    for g, st in enumerate(statements):
        order = sim[g].argsort()[::-1][:evidence_k] if candidates else []
        evidence = [candidates[int(i)].text for i in order]
        messages = prompt.messages(kind=_kind(st), statement=st.text,
                                   evidence="\n".join(f"- {e}" for e in evidence) or "(the memory holds nothing)")
        out = llm.structured("judge", messages, VerdictOut, prompt=prompt,
                             cache_salt="memory-fidelity")
        verdict = out.value.verdict if out.ok else "invalid"
        if not out.ok:
            log.warning("fidelity judge gave no valid verdict for %s: %s", st.source, out.errors[-1][:200])
        verdicts.append({"statement": st.text, "source": st.source, "kind": _kind(st), "evidence": evidence,
                         "verdict": verdict, "analysis": out.value.analysis if out.ok else ""})
    counts = {v: sum(d["verdict"] == v for d in verdicts) for v in ("stated", "contradicted", "absent", "invalid")}
    valid = len(verdicts) - counts["invalid"]
    recall = counts["stated"] / valid if valid else None
    support = _judge_support(llm, gold, mine, vectors, evidence_k, limit) if layered else []
    judged = [d for d in support if d["verdict"] != "invalid"]
    precision = sum(d["verdict"] == "supported" for d in judged) / len(judged) if judged else None
    return JudgeFidelity(judge_model=llm.config.role("judge").model, prompt_version=prompt.version,
                         evidence_k=evidence_k, statements=len(verdicts), stated=counts["stated"],
                         contradicted=counts["contradicted"], invalid=counts["invalid"], recall=recall,
                         verdicts=verdicts, precision_prompt_version=load_prompt(PRECISION_PROMPT).version,
                         precision_statements=len(support),
                         supported=sum(d["verdict"] == "supported" for d in support),
                         precision_invalid=len(support) - len(judged), precision=precision,
                         f1=f1(recall, precision) if layered else None, support=support)


def _judge_support(llm: LLMClient, gold: Snapshot, mine: Snapshot, vectors: StatementVectors, evidence_k: int,
                   limit: int | None) -> list[dict]:
    """The judge's verdict on each distinct topic-outline and principle statement of ``mine`` (up to ``limit``):
    does gold — its requirements and preferences closest to the statement — support it?"""
    prompt = load_prompt(PRECISION_PROMPT)
    evidence_pool = fs.requirement_statements(gold) + fs.gold_preference_statements(gold)
    out: list[dict] = []
    for layer, statements in (("requirement", fs.requirement_statements(mine)),
                              ("preference", fs.preference_statements(mine))):
        kept = [statements[int(i)] for i in fm.distinct(vectors.similarity(statements, statements), _tau(vectors))]
        sim = vectors.similarity(kept, evidence_pool)
        for k, st in enumerate(kept):
            order = sim[k].argsort()[::-1][:evidence_k] if evidence_pool else []
            evidence = [evidence_pool[int(i)].text for i in order]
            messages = prompt.messages(kind=layer, statement=st.text, evidence="\n".join(f"- {e}" for e in evidence)
                                       or "(no ground truth about the user yet)")
            answer = llm.structured("judge", messages, SupportOut, prompt=prompt, cache_salt="memory-fidelity-precision")
            if not answer.ok:
                log.warning("fidelity judge gave no valid support verdict for %s: %s", st.source, answer.errors[-1][:200])
            out.append({"statement": st.text, "source": st.source, "kind": layer, "evidence": evidence,
                        "verdict": answer.value.verdict if answer.ok else "invalid",
                        "analysis": answer.value.analysis if answer.ok else ""})
    return out[:limit] if limit is not None else out


def _tau(vectors: StatementVectors) -> float:
    """The embedder's τ: repeats are told apart by the same decision as the embedding figures'."""
    from evaluation.fidelity.matching import threshold_for

    return threshold_for(vectors.embedder.name)
