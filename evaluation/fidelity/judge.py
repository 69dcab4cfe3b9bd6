"""The judge-based variant of fidelity, for labs with an endpoint: the ``judge`` role reads each gold requirement
and preference beside the memory's closest statements (by the same embedder) and says whether the memory
states it, contradicts it or lacks it. Recall = stated / judged; contradictions count polarity errors a
judge can see even where the memory writes no explicit polarity. Every verdict is kept with its evidence."""

from __future__ import annotations

import logging
from typing import Literal

from pydantic import BaseModel, Field

from backends.llm.client import LLMClient
from backends.prompts import load_prompt
from evaluation.fidelity import statements as fs
from evaluation.fidelity.compute import Snapshot, StatementVectors
from evaluation.fidelity.types import JudgeFidelity

log = logging.getLogger(__name__)
PROMPT = "eval/memory_fidelity"


class VerdictOut(BaseModel):
    analysis: str = Field(max_length=400)
    verdict: Literal["stated", "contradicted", "absent"]


def _kind(st: fs.Statement) -> str:
    if st.layer == "topic_outline":
        return "requirement"
    return {"pos": "preference (the user accepts this)", "neg": "preference (the user rejects this)"}.get(
        st.polarity or "", "preference")


def judge_fidelity(llm: LLMClient, gold: Snapshot, mine: Snapshot, vectors: StatementVectors, *,
                   evidence_k: int = 5, limit: int | None = None) -> JudgeFidelity:
    """Judge every gold requirement and preference of ``gold`` (up to ``limit``) against ``mine``."""
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
    return JudgeFidelity(judge_model=llm.config.role("judge").model, prompt_version=prompt.version,
                         evidence_k=evidence_k, statements=len(verdicts), stated=counts["stated"],
                         contradicted=counts["contradicted"], invalid=counts["invalid"],
                         recall=counts["stated"] / valid if valid else None, verdicts=verdicts)
