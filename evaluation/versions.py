"""Versions of the metric definitions, carried by every result export.

A number in a paper must be traceable to the rule that produced it: when a definition changes (say,
how FairEval weighs the two orders when some judge samples failed), its version here goes up and
every export made afterwards says so. ``FIDELITY.md`` describes each version and what it reproduces.
"""

from __future__ import annotations

METRIC_VERSIONS: dict[str, str] = {
    # v2: each order's valid samples are averaged, then the two orders (equal weight); a judgment is
    # invalid unless both orders have a valid sample (v1 averaged all valid samples together)
    "faireval_decision": "2",
    # v2: CIs by a cluster bootstrap over users (one judgment, both orders, is one observation; a topic judged as
    # (A, B) and (B, A) counts once); every outcome's share of all topics (invalid and dropped in the denominator);
    # position consistency, score margin and the share of position-decided wins/losses. v1: percentile bootstrap
    # over judgments, rates over decided topics only
    "faireval_summary": "2",
    # v2: topics of equal entropy in a seeded random order (v1: by user id, so ties sent the lowest user ids to
    # review); judged at FairEval's temperature 1 by default when calibrating. v1: BPDE over the 2k verdicts, a
    # human majority replaces the judge
    "faireval_calibration": "2",
    # v1: win rate of the longer dialogue and the mean length difference per verdict (assistant tokens)
    "length_bias": "1",
    # v2: a failed judge call leaves the mean and is counted in its own column (v1 scored it 0)
    "g_score": "2",
    # v2: the model writes an analysis of every candidate before its two choices
    "s_score": "2",
    # v1: jieba + NLTK method1 for Chinese (the paper); lower-cased word tokens for English (a departure)
    "bleu": "1",
    # v3: the judge sees the history's last 5 messages and never the wrong options (as the released judge); a judge
    # failure leaves the accuracy and is counted (v2 counted it wrong); several judge models: their mean by default.
    # v2: breakdown by conversation scenario, optional three judges (mean or majority), 0–1 scale option
    "personamem": "3",
    # v2: Fleiss' κ on non-tie items (Mem-PAL Table 12) next to Cohen's κ against the human majority
    "judge_human_agreement": "2",
    # v2: situation agreement on log pairs within and across sessions (v1: ARI/NMI pooled over sessions, which a
    # grouping by session scored 0.70); precision, grounding and F1 for every method; τ calibrated on held-out
    # pairs; n/a instead of 0 where a figure cannot be measured; headline at the last history session; gold v2
    # holds nothing of a query session's situation or its topics' aspects
    # v3: precision over distinct statements (a repeat by the match decision counts once); a layer's precision only
    # from that layer's statements (n/a for a memory without it); the generic-statements reference row; τ's match
    # precision against hard negatives (same user and aspect, another need) recorded per embedder
    "memory_fidelity": "3",
}

BLEU_TOKENS = {"zh": "jieba accurate mode (as the paper's code)",
               "en": "lower-cased word and punctuation tokens (the paper's code runs jieba on every language)"}


def metric_versions(*names: str) -> dict[str, str]:
    """The versions of the named metrics (all of them when none is named); an unknown name is an error."""
    unknown = [n for n in names if n not in METRIC_VERSIONS]
    if unknown:
        raise KeyError(f"unknown metric {unknown[0]!r} (known: {', '.join(METRIC_VERSIONS)})")
    return {n: METRIC_VERSIONS[n] for n in (names or METRIC_VERSIONS)}


def versions_text(*names: str) -> str:
    """``name=v;name=v`` — the compact form a CSV column carries."""
    return ";".join(f"{k}={v}" for k, v in metric_versions(*names).items())
