"""Dialogue-act definitions given to both sides (Mem-PAL §1.9), per side and language, and which memory purpose
each assistant act needs.

The definitions are part of the dialogue roles' prompts (``prompts/sim/user_simulator*.md`` and
``prompts/sim/assistant*.md`` name them ``$definition``): a change here is a change of those prompts, so bump
their versions. Each side gets only its own definition (Solution Discussion is an act of both sides).
"""

from __future__ import annotations

from typing import Literal

from memory.types import Purpose
from palset.vocab import Act

SideName = Literal["user", "assistant"]

_EN: dict[tuple[SideName, Act], str] = {
    ("user", Act.TOPIC_INQUIRY): "the question on the mind, short and vague, in one's own words, without the hidden "
                                 "needs or background details.",
    ("user", Act.REQUIREMENT_CONFIRMATION): "if the guess matches one of the hidden needs, agree in a few words of your "
                                            "own; if not, say bluntly that it is wrong and correct only that point, "
                                            "without volunteering other needs.",
    ("user", Act.SOLUTION_DISCUSSION): "ask about or object to one detail of the suggestion, without a verdict and "
                                       "without revealing preferences.",
    ("user", Act.SOLUTION_FEEDBACK): "a clear verdict on the suggestion: accept it if it is a kind of solution you "
                                     "accept, reject it bluntly, even annoyed, if it is a kind you reject; never "
                                     "'sounds good, but…', and no detailed reasons.",
    # "that they have not told you … starts with "Is it that you"": "hidden need behind your user's question" came
    # back as "Based on the information provided, the user…" / "your user's…" (bench/act_wording.py: 14 of 28
    # replies to recorded prompts before, 0 of 28 after; an example "(\"Is it that you…?\")" was copied as the whole reply)
    ("assistant", Act.REQUIREMENT_PREDICTION): "Guess ONE need behind their question that they have not told you, "
                                               "from what you know of their situation and background, and ask them "
                                               "whether that is it in one short question that starts with \"Is it "
                                               "that you\". Do not propose solutions.",
    ("assistant", Act.SOLUTION_PROPOSAL): "Propose ONE concrete solution of your own (a new one if others were "
                                          "discussed) in one short paragraph that starts with \"I suggest you\": no "
                                          "list, no heading, no question to the user, and no reasoning about the user.",
    ("assistant", Act.SOLUTION_DISCUSSION): "Answer the user's question or objection about the current solution, using "
                                            "what you know of the user, and try to persuade them.",
    ("assistant", Act.FEEDBACK_RESPONSE): "Reply briefly to the user's verdict. Never offer another solution; after a "
                                          "rejection only acknowledge or apologise.",
}

_ZH: dict[tuple[SideName, Act], str] = {
    ("user", Act.TOPIC_INQUIRY): "用自己的话问出心里的问题，简短、笼统，不透露隐藏的需求和背景细节。",
    ("user", Act.REQUIREMENT_CONFIRMATION): "如果猜中了某个隐藏需求，就用自己的话简短确认；如果没猜中，就直接说不对，只纠正这一点，"
                                            "不主动说出别的需求。",
    ("user", Act.SOLUTION_DISCUSSION): "针对建议里的一个细节追问或质疑，不表态，也不透露偏好。",
    ("user", Act.SOLUTION_FEEDBACK): "对建议明确表态：是愿意接受的那类方案就认可；是会拒绝的那类就直接拒绝，可以不耐烦；"
                                     "绝不说“听起来不错，但是……”，也不详细解释理由。",
    ("assistant", Act.REQUIREMENT_PREDICTION): "根据你对用户近况和背景的了解，主动猜测用户问题背后的一个隐藏需求，用一句简短的问话请用户确认。不要提出方案。",
    # "直接提出…以“我建议你”开头…不要反问": the 1.5B read 提出一个具体的方案 as a request and asked the user for the
    # proposal (FIDELITY.md: 8 of 12 recorded contexts before, 0 of 12 with this wording)
    ("assistant", Act.SOLUTION_PROPOSAL): "直接提出你自己的一个具体方案，回复以“我建议你”开头（如果之前讨论过别的方案，就提一个新的）。"
                                          "不要反问用户，不要解释你对用户的推断。",
    ("assistant", Act.SOLUTION_DISCUSSION): "结合你对用户的了解，回答用户对当前方案的疑问或质疑，并尽量说服用户。",
    ("assistant", Act.FEEDBACK_RESPONSE): "简短回应用户的表态。不要再提出新方案；如果用户拒绝了，只表示理解或歉意。",
}

DEFINITIONS_BY_LANGUAGE = {"en": _EN, "zh": _ZH}


def definition(side: SideName, act: Act, language: str = "en") -> str:
    """The definition of ``act`` for ``side`` in the prompt's language (``zh`` or English)."""
    table = DEFINITIONS_BY_LANGUAGE.get(language, _EN)
    return table.get((side, act)) or _EN[(side, act)]


def act_name(act: Act, language: str = "en") -> str:
    """The act as the prompt names it: the English name, or the dataset's Chinese label."""
    return act.zh if language == "zh" else act.value


PURPOSE: dict[Act, Purpose] = {
    Act.REQUIREMENT_PREDICTION: "requirement",
    Act.SOLUTION_PROPOSAL: "solution",
    Act.SOLUTION_DISCUSSION: "solution",
    Act.FEEDBACK_RESPONSE: "solution",
}

REQUIREMENT_PHASE = frozenset({Act.TOPIC_INQUIRY, Act.REQUIREMENT_CONFIRMATION})
SOLUTION_PHASE = frozenset({Act.SOLUTION_DISCUSSION, Act.SOLUTION_FEEDBACK})
