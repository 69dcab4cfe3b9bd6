"""Memory fidelity: how close a built memory is to the gold memory (:mod:`memory.methods.gold`), per layer
and per session as the memory grows. Mem-PAL and PersonaMem-v2 report only downstream task scores; these
figures say what a memory kept and what it lost. Definition version: ``memory_fidelity`` in
:mod:`evaluation.versions` (FIDELITY.md lists what changed).

Every figure compares the memory *after session k's dialogue* with the gold memory at the same point, which
holds nothing of a later session, of the query topics, or of a query session's situation paragraph. The
**headline** is read at the user's last *history* session (gold skips query dialogues, which methods ingest);
the per-session curve shows the rest. Items are cut into *statements* (sentences or bulleted lines,
:mod:`evaluation.fidelity.statements`); two statements *match* when the cosine of their embeddings reaches the
embedder's τ (:func:`evaluation.fidelity.matching.statement_matches`), chosen on held-out pairs with its ROC AUC
reported beside it (:mod:`evaluation.fidelity.threshold`, :mod:`evaluation.fidelity.calibrated`).

Figures (``None`` = not measurable — shown as "n/a" with the report's ``unavailable`` reason, never as 0):

- **Situation κ within / across sessions** — every pair of logs ingested so far (those gold places in a situation)
  is "together" or "apart" for gold (the situation whose time span holds each log) and for the method (the first
  item of its log-grouping layer citing each log; a log no item cites is alone). Cohen's κ of the two verdicts
  (= the pairwise adjusted Rand index) on the pairs *within* one session, and on the pairs *across* sessions
  separately: 0 for any grouping that ignores the logs — all together per session, everything apart (the empty
  memory), random — 1 for gold's. Across sessions gold joins no pair in PAL-Set (a situation never spans two
  sessions), so κ is n/a there and **cross-session merges** (share of those pairs the method joins; lower is
  better) is the figure. Methods that do not group logs (RAG, summaries, agentic, PLUM) have none.
- **Recall** per layer @τ — share of gold statements whose best-matching memory statement reaches τ: gold history
  requirements, the pos/neg preference sentences of every requirement type met so far, the profile's background
  sentence per aspect (coverage, averaged over aspects), and all gold statements (text).
- **Precision** — share of the memory's *distinct* statements that match a gold statement: a statement that matches
  (the same decision) one kept before it is a repeat and counts once, so saying a guess five times earns nothing.
  Each layer's precision comes from that layer's statements alone (topic outlines against gold requirements,
  principles against preferences, each background aspect against gold's); a memory without the layer has no
  precision (and no F1) for it — n/a, its text precision separate — so a memory without layers cannot earn
  requirement precision from a profile repeated ten times.
- **F1** per layer — harmonic mean of recall and precision (0 when nothing is recalled).
- **Grounded / noise** — share of the memory's statements matching gold *or* a sentence of the logs and turns
  ingested so far, and the rest (matching nothing: invented or garbled).
- **Polarity errors** — gold preferences whose best match states the opposite polarity; n/a when no principle of
  the memory states a polarity (H²Memory's do not).
- Requirement **similarity** (mean best cosine, no threshold) and **BLEU-1** against the best match stay beside them.

**Reference rows** (:mod:`evaluation.fidelity.references`) are measured by the same code on every leaderboard and
export: the empty memory, one group per session, the verbatim full history, another user's gold memory, generic
statements (fixed sentences, the same for every user) and gold itself. **Match precision**: τ is checked against hard
negatives (another need of the same user and aspect); an embedder that cannot reach 0.9 there has the judge as its
default matcher (:mod:`evaluation.fidelity.calibrated`), and its report says so. The optional judge variant (:mod:`evaluation.fidelity.judge`) asks the ``judge`` role whether each gold
requirement and preference is stated, contradicted or absent. Which files each figure needs:
:mod:`evaluation.fidelity.availability`.
"""

from __future__ import annotations

from evaluation.fidelity.types import HEADLINE, FidelityConfig, FidelityReport, Miss, SessionFidelity

# figure → one sentence for the UI (help text beside the number) and the CLI's --json "definitions"
DEFINITIONS: dict[str, str] = {
    "situation_within": "Cohen's κ (= pairwise ARI) of 'same situation?' over pairs of logs of one session, gold vs the "
                        "method's log groups: 0 for any grouping that ignores the logs, 1 for gold's.",
    "situation_across": "The same κ over pairs of logs of different sessions (n/a where gold joins no such pair).",
    "situation_cross_merges": "Share of cross-session log pairs the method puts in one group (gold: 0; lower is better).",
    "requirement_recall": "Share of gold history requirements whose best-matching memory statement reaches τ.",
    "requirement_precision": "Share of the memory's distinct topic-outline statements matching a gold requirement at "
                             "τ (n/a for a memory without topic outlines).",
    "requirement_f1": "Harmonic mean of requirement recall and precision (n/a without topic outlines).",
    "requirement_similarity": "Mean best cosine of each gold requirement with the memory's statements (no threshold).",
    "requirement_bleu1": "Mean BLEU-1 of each gold requirement against its best-matching memory statement.",
    "preference_recall": "Share of the gold pos/neg preference sentences (requirement types met so far) matched at τ.",
    "preference_precision": "Share of the memory's distinct principle sentences matching a gold preference at τ (n/a "
                            "for a memory without principles).",
    "preference_f1": "Harmonic mean of preference recall and precision (n/a without principles).",
    "polarity_errors": "Gold preferences whose best match (≥ τ) states the opposite polarity (n/a when the memory "
                       "states no polarity).",
    "background_coverage": "Mean over aspects of the share of gold background sentences (the profile) the memory's "
                           "background of that aspect matches at τ (background recall).",
    "background_precision": "Share of the memory's distinct background sentences matching gold background of their "
                            "aspect at τ (n/a for a memory without a background layer).",
    "background_f1": "Harmonic mean of background coverage and precision (n/a without a background layer).",
    "text_recall": "Share of all gold statements matched at τ by any statement of the memory.",
    "text_precision": "Share of the memory's distinct statements (a repeat by the match decision counts once) that "
                      "match some gold statement at τ.",
    "text_f1": "Harmonic mean of text recall and precision.",
    "text_grounded": "Share of the memory's distinct statements matching gold or a sentence of the logs and turns so "
                     "far.",
    "text_noise": "Share of the memory's distinct statements matching nothing — neither gold nor the source (lower is "
                  "better).",
}

__all__ = ["DEFINITIONS", "HEADLINE", "FidelityConfig", "FidelityReport", "Miss", "SessionFidelity"]
