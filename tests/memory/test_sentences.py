"""Sentences of a text (memory.sentences): where a sentence ends, in Chinese and English."""

import pytest

from memory.sentences import whole_sentences


@pytest.mark.parametrize(("text", "kept"), [
    ("I can help. Try the number 7 bus to", "I can help."),
    ('Sure! How about "yoga". And then', 'Sure! How about "yoga".'),
    ("你好。我建议你明天早", "你好。"),
    ("好的！试试散步吧？然后", "好的！试试散步吧？"),
    ("no sentence ends in this one", "no sentence ends in this one"),
    ("It costs 3.5 pounds and", "It costs 3.5 pounds and"),
])
def test_whole_sentences_ends_at_the_last_full_stop_in_either_language(text, kept):
    assert whole_sentences(text) == kept
