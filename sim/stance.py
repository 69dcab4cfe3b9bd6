"""A rule-based classifier of a user turn's stance toward what the assistant just said, in English and Chinese.

Labels: ``accept`` (confirms the guess / approves the proposal), ``reject`` (denies / rejects), ``partial``
(approval hedged or with a reservation — the "sounds good, but…" Mem-PAL's user must never say) and ``none``
(no verdict: a question, a detail, an opening). The same labels serve Requirement Confirmation (accept = confirm,
reject/partial = correct) and Solution Feedback.

The rules, in order: cue phrases are found (negated and reported forms first, so "not good", "不行", "say no" do
not count as their positive or negative parts; what a question asks is blanked — its whole sentence, or only its last
clause where a statement comes first: "I agree with this option, but where do I start?"); then

1. no accepting and no rejecting cue: ``partial`` when a hedge ("maybe", "not sure", "也许") is present; ``reject``
   when the turn opens with a short echo question followed by more ("An app? My customers…", "住他那儿？…"); else
   ``none``;
2. only accepting cues: ``accept``, or ``partial`` when a hedge comes before or in the sentence of the first one;
3. only rejecting cues: ``reject``;
4. both: ``partial`` when a contrast ("but", "但是", "不过") follows the first accepting cue and precedes a
   rejecting one; else whichever cue comes first.

Validated against the dataset's own Solution Feedback turns (``bench/simulator_fidelity.py --validate``; FIDELITY.md
gives the accuracy). The judge-based classifier with the same labels is :mod:`evaluation.simfidelity.stance`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

Stance = Literal["accept", "reject", "partial", "none"]
STANCES: tuple[str, ...] = ("accept", "reject", "partial", "none")


def _pattern(phrases: tuple[str, ...], bounded: bool) -> re.Pattern[str]:
    """One regex of ``phrases`` (longest first); an entry starting with ``re:`` is a regular expression as written.
    ``bounded``: English, whole words only."""
    parts = [p[3:] if p.startswith("re:") else re.escape(p) for p in sorted(phrases, key=len, reverse=True)]
    body = "|".join(parts)
    return re.compile(rf"(?<![a-z'])({body})(?![a-z])" if bounded else body, re.I)


def _words(*phrases: str) -> re.Pattern[str]:
    return _pattern(phrases, True)


def _chars(*phrases: str) -> re.Pattern[str]:
    """Chinese phrases (no word boundaries)."""
    return _pattern(phrases, False)


_ALONE = r"(?<![^，。！？、,.!?\s“”\"])"  # a one-character word (对, 行, 好) only where a clause starts…
_ENDS = r"(?=[，。！？、,.!?\s啊呀的吧了呢]|$)"  # …and ends: 对我来说, 行程, 好累 are other words
_EN_NOT = r"(not|isn't|is not|doesn't|does not|don't|do not|wasn't|won't|wouldn't|never|hardly)"
_EN_GOOD = (r"(good|great|helpful|useful|practical|realistic|right|work|works|help|helps|suit|suits|fit|fits|like|want|"
            r"interested|it|for me|an option|what i|fair|fine|easy|simple|reasonable|smart|better|a plan|a solution|"
            r"going to|happening|accept|agree)")

EN = {
    # read first and removed: their parts must not count on their own
    "masked_accept": _words("not bad", "no problem", "no doubt", "no worries", "why not", "can't wait",
                            "cannot wait", "can't argue", "couldn't agree more", "no-brainer", "not a bad idea",
                            "can't go wrong", "no reason not to"),
    "masked_reject": re.compile(rf"(?<![a-z'])({_EN_NOT}( (really|so|that|very|too|quite|sound|seem|look|exactly|"
                                rf"even|actually))* {_EN_GOOD}|(absolutely|definitely|certainly|of course|hell) not|"
                                rf"(it's|that's|this is|that is|it is) not)(?![a-z])", re.I),
    "reported": re.compile(r"(?<![a-z'])(say|says|said|saying|tell him|tell her) no(?![a-z])", re.I),
    "accept": _words("yes", "yeah", "yep", "yup", "exactly", "that's right", "that is right", "you're right",
                     "correct", "spot on", "sounds good", "sounds great", "sounds perfect", "sounds like a plan",
                     "great idea", "good idea", "nice idea", "i like", "i love", "love it", "love that", "like that",
                     "perfect", "works for me", "that works", "let's do", "i can do that", "i could do that",
                     "that i can do", "i can live with", "can live with", "that would help", "that'd help",
                     "that helps", "that fixes", "definitely", "absolutely", "i agree", "agreed", "makes sense",
                     "that's it", "that's good", "that's great", "that's us", "that's me", "more like it",
                     "more like me", "that's the one", "good", "great", "brilliant", "lovely", "nice", "fair", "fine",
                     "done", "deal", "clever", "smart", "simple", "easy", "reasonable", "doable", "sensible",
                     "better", "ok", "okay", "sure", "could work", "might work", "i'm in", "happy to", "thanks",
                     "thank you", "all right", "alright", "true", "count me in", "i accept", "i can accept",
                     "accept the", "accept this", "accept that", "accept it", "might help", "could help", "would help",
                     "will help", "will try", "would be useful", "could be useful", "might be useful",
                     r"re:i'll (?!never|not|just look|be )[a-z]+", r"re:i will (?!never|not)[a-z]+",
                     r"re:(now )?that i'd [a-z]+", r"re:i'd (love|like) (to|that)"),
    "reject": _words("no", "nope", "nah", "not really", "not at all", "not for me", "hate", "hated", "won't work",
                     "wouldn't work", "doesn't work", "does not work", "never", "no way", "rather not", "not interested",
                     "not what", "isn't what", "not it", "too expensive", "too much", "too far", "too long",
                     "too complicated", "too big", "waste", "pointless", "ridiculous", "absurd", "can't stand",
                     "can't afford", "cannot afford", "not a fan", "forget it", "no thanks", "useless", "wrong",
                     "not quite", "not a chance", "hell no", "god no", "the last thing i", "not doing", "i won't", "i'm not",
                     "massive", "nightmare", "overkill", "no chance", "come on", "worst", "backwards", "nobody",
                     "no one", "don't need", "do not need", "i can't", "can't even", "i don't have", "the problem",
                     "just another", "more, not less", "punishment", "not getting", "i already know", "already do",
                     "not happening", "doesn't", "won't", "i don't think", "i do not think", "not a proper",
                     "not the right", "not the solution", "not a solution"),
    "hedge": _words("maybe", "perhaps", "not sure", "i guess", "partly", "somewhat", "in part", "possibly",
                    "i suppose", "not entirely", "unsure", "depends", "we'll see"),
    "contrast": _words("but", "however", "though", "although", "except", "only if", "unless"),
}
_ZH_DO = "去|弄|试|做|办|安排|跟|补|买|打|约|报|联系|说|改|写|开始|用|装|定|发|问|找|拿|带"
# a reply to a guess about the user's need confirms it with these too ("That's the thing.", "Right.", "就是这个")
EN_GUESS = _words(r"re:^(right|very much|obviously|definitely|mostly|guilty|pretty much|totally|100%|bingo)\b",
                  r"re:that's (exactly )?(the|a big|the whole|my|what)( [a-z]+){0,2} (thing|problem|worry|part|point|"
                  r"issue|bit|question|fear|trouble|it|keeps me up|gets me|say)",
                  r"re:that's (a big )?part of it", "first and non-negotiable", "you've got it", "you got it",
                  "spot on", "that's why")
ZH_GUESS = _chars(f"re:{_ALONE}是{_ENDS}", "就是这个", "就是这事", "正是这个", "说到点上", "说到点子上", "说中了", "就是这样", "没错",
                  "re:(?<!不)是这个", "re:(?<!不)对，", "嗯", "可不是", "是啊", "确实", "主要是", "就是怕", "最怕", "关键是", "问题就在")
ZH = {
    "masked_accept": _chars("不错", "不妨", "不用额外", "不麻烦", "不复杂", "没问题", "不用担心", "不怕", "不用再",
                            "不难", "不会乱", "不用跟", "不用隔着"),
    "masked_reject": _chars("不行", "不好", "不对", "不可以", "不喜欢", "不合适", "不太适合", "不适合", "不现实",
                            "不实际", "不靠谱", "不同意", "不是", "不想", "不太行", "不怎么样", "不感兴趣", "没兴趣",
                            "想都别想", "别想", "不信", "没说一样", "撑不过", "不如不", "可不"),
    "reported": re.compile(r"说不行|说不要|(.)不\1|而不是"),  # reported refusals; A-not-A questions (合不合适)
    "accept": _chars(f"re:{_ALONE}对{_ENDS}", f"re:{_ALONE}行{_ENDS}", f"re:{_ALONE}好{_ENDS}",
                     f"re:{_ALONE}也是{_ENDS}", "re:这(个|样|么)(好|行|对|可以)", "是的", "是啊", "没错", "正是",
                     "就是这样", "确实", "好的", "好啊", "好主意", "挺好", "很好", "太好了", "真好", "很棒", "可以",
                     "喜欢", "同意", "试试", "就这么办", "就这么定", "说定了", "马上就", "就安排", "去安排", "有道理",
                     "合适", "靠谱", "正合我意", "合我意", "好办法", "有用", "有帮助", "愿意", "谢谢", "就这样", "说得对",
                     "对的", "对啊", "对路", "胃口", "能接受", "我认", "能坚持", "用得上", "有底", "放心", "好交代",
                     "省得", "正好", "做得下去", "坚持得了", "尽快安排",
                     f"re:(今晚|今天|明天|这周末?|周末|回头|马上|立刻|我|那我|下周)就({_ZH_DO})"),
    "reject": _chars("不行", "不要", "不用了", "不喜欢", "不想", "不适合", "不太适合", "不合适", "不现实", "不实际",
                     "不靠谱", "没用", "没兴趣", "不感兴趣", "算了", "不对", "不是", "拒绝", "受不了", "太麻烦", "麻烦",
                     "太贵", "太长", "太久", "太累", "没时间", "没法", "根本", "敷衍", "不可能", "不太", "不怎么",
                     "不好", "不同意", "免了", "有点长", "太复杂", "复杂", "别了", "别提", "没必要", "不需要", "想都别想",
                     "不信", "白花", "乱套", "收不回来", "吃不消", "拉倒", "开玩笑", "怎么可能", "凭什么", "有什么用",
                     "不管用", "白费", "浪费", "撑不过", "不如不", f"re:不({_ZH_DO})(?=[。！!.]|$)"),
    "hedge": _chars("也许", "或许", "不确定", "说不定", "看情况", "再说吧", "再看看", "考虑一下"),
    "contrast": _chars("但是", "但", "不过", "可是", "然而", "只是"),
}
_ECHO = {"en": re.compile(r"^\s*[^,.;:!?]{1,40}\?\s*\S"), "zh": re.compile(r"^\s*[^，。；：！？,.!?]{1,12}[？?]\s*\S")}
_ECHO_WORDS = 6  # an English opening question of at most this many words


@dataclass
class StanceResult:
    label: Stance
    cues: dict[str, list[str]] = field(default_factory=dict)  # accept / reject / hedge / contrast → phrases found

    def evidence(self) -> dict:
        return {"label": self.label, "cues": self.cues}


def _find(pattern: re.Pattern[str], text: str) -> list[tuple[int, str]]:
    return [(m.start(), m.group(0)) for m in pattern.finditer(text)]


def _blank(text: str, pattern: re.Pattern[str]) -> str:
    return pattern.sub(lambda m: " " * len(m.group(0)), text)


_CLAUSE_END = re.compile(r"[,.;:!?，。；：！？…]")


def _leading(text: str, accept: list, reject: list, hedge: list, contrast: list) -> Stance | None:
    """The first clause decides when it holds cues of one side only and no hedge: "Yes, …", "No. …", "不行，…";
    an approval whose next clause opens with a contrast ("Sounds good, but …") is ``partial``."""
    ends = [m.end() for m in _CLAUSE_END.finditer(text)]
    if not ends:
        return None
    first = ends[0]
    a = [p for p, _ in accept if p < first]
    r = [p for p, _ in reject if p < first]
    if bool(a) == bool(r) or any(p < first for p, _ in hedge):
        return None
    if r:
        return "reject"
    after = text[first:].lstrip()
    next_contrast = any(p >= first and text[first:p].strip() == "" for p, _ in contrast)
    return "partial" if next_contrast and after else "accept"


_SENTENCE_END = re.compile(r"[.!?。！？]")


def _sentence_end(text: str, pos: int) -> int:
    """Where the sentence holding position ``pos`` ends."""
    m = _SENTENCE_END.search(text, pos)
    return m.end() if m else len(text)


def _echo(text: str, language: str) -> bool:
    """A short opening question echoing the proposal, then more ("An app? My customers are plumbers…", "住他那儿？…"):
    a turn that has no cue but opens this way turns the proposal down."""
    m = _ECHO[language].match(text)
    if m is None:
        return False
    return language == "zh" or len(text[:m.end()].split()) <= _ECHO_WORDS + 1


_QUESTION_SENTENCE = re.compile(r"[^.!?。！？]*[?？]")
_CLAUSE_BREAK = re.compile(r"[,;，；]")


def _blank_questions(text: str) -> str:
    """Blank what questions ask (no verdict: only statements count) — the whole sentence, or only its last clause
    where a statement comes first in the same sentence ("I agree with this option, but where do I start?")."""
    def blank(m: re.Match[str]) -> str:
        sentence = m.group(0)
        breaks = list(_CLAUSE_BREAK.finditer(sentence))
        keep = breaks[-1].end() if breaks else 0
        return sentence[:keep] + " " * (len(sentence) - keep)
    return _QUESTION_SENTENCE.sub(blank, text)


def classify_stance(text: str, language: str | None = None, answering: str | None = None) -> StanceResult:
    """The stance of one user turn (see the module docstring); ``language`` ``zh``/``en`` (default: by script);
    ``answering="guess"``: the turn replies to a guess about the user's need (more ways to confirm count)."""
    from sim.textstats import language_of

    lang = "zh" if (language or language_of(text)) == "zh" else "en"
    rules = ZH if lang == "zh" else EN
    text = text.strip()
    asked = _blank_questions(text)
    masked_a = _find(rules["masked_accept"], asked)
    if answering == "guess":
        guess = EN_GUESS if lang == "en" else ZH_GUESS
        masked_a = sorted(masked_a + _find(guess, asked))
        asked = _blank(asked, guess)
    body = _blank(_blank(asked, rules["masked_accept"]), rules["reported"])
    hedge, contrast = _find(rules["hedge"], body), _find(rules["contrast"], body)
    body = _blank(body, rules["hedge"])  # "not sure" hedges; its "sure" is no approval
    masked_r = _find(rules["masked_reject"], body)
    rest = _blank(body, rules["masked_reject"])
    accept = sorted(masked_a + _find(rules["accept"], rest))
    reject = sorted(masked_r + _find(rules["reject"], rest))
    cues = {k: [p for _, p in v] for k, v in
            (("accept", accept), ("reject", reject), ("hedge", hedge), ("contrast", contrast)) if v}
    if (lead := _leading(text, accept, reject, hedge, contrast)) is not None:
        return StanceResult(lead, cues)
    if not accept and not reject:
        if not hedge and _echo(text, lang) and not text.rstrip().endswith(("?", "？")):
            cues["reject"] = ["(an opening echo question)"]
            return StanceResult("reject", cues)
        return StanceResult("partial" if hedge else "none", cues)
    if accept and not reject:
        end = _sentence_end(text, accept[0][0])
        return StanceResult("partial" if any(p < end for p, _ in hedge) else "accept", cues)
    if reject and not accept:
        return StanceResult("reject", cues)
    first_a, first_r = accept[0][0], reject[0][0]
    if first_a < first_r and any(first_a < pos < max(p for p, _ in reject) for pos, _ in contrast):
        return StanceResult("partial", cues)
    return StanceResult("accept" if first_a < first_r else "reject", cues)
