"""The weighted cross-entropy: which tokens are template, question and answer, and how they count."""

from __future__ import annotations

import math
import re

import pytest

from memory.plum.model import SYSTEM_PROMPT
from memory.plum.train import Hyper, batch_tensors, encode, weighted_loss

torch = pytest.importorskip("torch")
WEIGHTS = {"template": 0.1, "question": 0.5, "answer": 1.0}


class WordTokenizer:
    """Words, punctuation and markers as tokens, with character offsets; a ChatML-like template."""

    chat_template = "chatml"
    eos_token = "<end>"

    def apply_chat_template(self, msgs, tokenize=False, add_generation_prompt=False):
        text = "".join(f"<start>{m['role']}\n{m['content']}<end>\n" for m in msgs)
        return text + ("<start>assistant\n" if add_generation_prompt else "")

    def __call__(self, text, return_offsets_mapping=False, add_special_tokens=False):
        spans = [(m.start(), m.end()) for m in re.finditer(r"<\w+>|\w+|[^\w\s]", text)]
        vocab: dict[str, int] = {}
        ids = [vocab.setdefault(text[s:e], len(vocab)) for s, e in spans]
        self.pieces = [text[s:e] for s, e in spans]
        return {"input_ids": ids, "offset_mapping": spans}


def test_tokens_are_classed_by_the_text_they_cover():
    tok = WordTokenizer()
    e = encode(tok, "Did we talk about Oslo?", "No, we have not.", 256, WEIGHTS)
    by_kind = {k: [p for p, kk in zip(tok.pieces, e.kinds) if kk == k] for k in WEIGHTS}
    assert by_kind["question"] == ["Did", "we", "talk", "about", "Oslo", "?"]
    assert by_kind["answer"] == ["No", ",", "we", "have", "not", ".", "<end>"]  # the stop marker is learnt too
    assert "user" in by_kind["template"] and "assistant" in by_kind["template"]
    assert all(w in by_kind["template"] for w in re.findall(r"\w+", SYSTEM_PROMPT))
    assert e.weights == [WEIGHTS[k] for k in e.kinds] and e.truncated == 0


def test_long_pairs_keep_their_tail():
    tok = WordTokenizer()
    e = encode(tok, "Did we talk about Oslo?", "No, we have not.", 16, WEIGHTS)
    assert len(e.ids) == 16 and e.truncated > 0 and e.kinds[-7:] == ["answer"] * 7


def test_weighted_loss_is_the_weighted_mean_of_token_losses():
    torch.manual_seed(0)
    logits = torch.randn(1, 4, 5)
    ids = torch.tensor([[1, 2, 3, 4]])
    w = torch.tensor([[0.0, 0.1, 0.0, 1.0]])
    ce = torch.nn.functional.cross_entropy(logits[0, :-1], ids[0, 1:], reduction="none")
    expected = (0.1 * ce[0] + 1.0 * ce[2]) / 1.1
    assert math.isclose(float(weighted_loss(logits, ids, w)), float(expected), rel_tol=1e-6)


def test_padding_has_no_weight():
    tok = WordTokenizer()
    a = encode(tok, "Q one?", "A.", 256, WEIGHTS)
    b = encode(tok, "A much longer question here?", "A longer answer.", 256, WEIGHTS)
    ids, mask, w = batch_tensors([a, b], pad_id=0, device="cpu")
    assert ids.shape == (2, len(b.ids)) and mask[0].sum() == len(a.ids)
    assert float(w[0, len(a.ids):].sum()) == 0.0


def test_hyper_parameters_are_bounded_and_recorded():
    h = Hyper()
    assert h.weights == WEIGHTS and h.rank == 8 and h.epochs == 5
    assert h.lora_config().r == 8
    with pytest.raises(ValueError):
        Hyper(rank=0)
