"""A corpus of every placeholder type in English and Chinese contexts, for the redaction tests.

Each value appears alone, against CJK characters on both sides (no space, as Chinese is written),
after full-width punctuation, in ASCII and full-width parentheses and quotes, at line start and end,
inside English sentences and inside URLs (values without spaces).
"""

from __future__ import annotations

import re

# kind → sensitive values (EN and ZH forms)
VALUES: dict[str, list[str]] = {
    "API_KEY": ["sk-proj-abcdefghijklmnop1234", "AKIAIOSFODNN7EXAMPLE", "ghp_abcdefghijklmnopqrstuv123456",
                "AIzaSyA1234567890abcdefghijklmnopqrs"],
    "EMAIL": ["megan.ash@gmail.com", "li.wei_88@qq.com", "zhang.san@mail.tsinghua.edu.cn"],
    "CARD_NUMBER": ["4111 1111 1111 1111", "4111111111111111", "6222 0212 3456 7890 128"],
    "ACCOUNT_NUMBER": ["GB29 NWBK 6016 1331 9268 19", "DE89370400440532013000"],
    "ID_NUMBER": ["110101199003071234", "123-45-6789"],
    "PHONE": ["13812345678", "+86 138 1234 5678", "+44 7700 900123", "010-65529988", "(212) 555-0134",
              "+8613912345678"],
    "ADDRESS": ["221 Baker Street", "北京市朝阳区建国路88号"],
}

# labelled values: only the value after the label is sensitive
LABELLED: list[tuple[str, str, str]] = [
    ("ID_NUMBER", "Passport number {v}, please", "X12345678"),
    ("ID_NUMBER", "我的护照号码是{v}，谢谢", "E12345678"),
    ("ID_NUMBER", "驾驶证：{v}。", "B98765432"),
    ("ACCOUNT_NUMBER", "账号：{v}，户名张三", "62220212345678"),
    ("ACCOUNT_NUMBER", "my account no. {v} at the bank", "AB-123456"),
]

CONTEXTS: list[str] = [
    "{v}",
    "请联系{v}谢谢",
    "我的是{v}。",
    "邮箱/电话：{v}，明天再说",
    "（{v}）",
    "({v})",
    "「{v}」和“{v}”",
    "{v}\n第二行",
    "第一行\n{v}",
    "Reach me at {v}, thanks.",
    "Her details [{v}] are private.",
]
URL_CONTEXTS: list[str] = [
    "见https://example.com/contact/{v}/profile",
    "link: https://example.com/u?id={v}&x=1 ok",
    "打开http://example.cn/{v}",
]


def cases() -> list[tuple[str, str, str]]:
    """(kind, value, text) for every value in every context (URL contexts only for values without spaces)."""
    out = []
    for kind, values in VALUES.items():
        for v in values:
            for ctx in CONTEXTS + ([] if " " in v or "(" in v else URL_CONTEXTS):
                out.append((kind, v, ctx.format(v=v)))
    out += [(kind, v, ctx.format(v=v)) for kind, ctx, v in LABELLED]
    return out


def fragments(value: str) -> list[str]:
    """Parts of a value that must not survive redaction: the value itself and its long alphanumeric pieces."""
    pieces = re.findall(r"[A-Za-z0-9]{4,}|[\u4e00-\u9fff]{3,}", value)
    return [value, *pieces]
