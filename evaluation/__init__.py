"""PAL-Bench evaluation: BLEU, the single-turn tasks, FairEval pairwise judging and their aggregates (Mem-PAL §4)."""
