"""PersonaMem-v2 files as typed records, and a chat history as PAL-Set-style sessions.

Three kinds of file (Jiang et al., arXiv 2512.06688; dataset CC BY 4.0):

* a **persona** record (``raw_data_…_persona<i>.json``): core persona, preference pools, synthetic
  ``sensitive_information``, ``preference_updates`` and optionally ``conversations``;
* a **chat history** ``{"metadata": {…}, "chat_history": [{role, content}, …]}`` — message 0 is a
  system turn with the core persona, forget requests are user turns with no assistant reply;
* **question items** (one conversation item each): ``user_query``, ``correct_answer``, exactly 3
  ``incorrect_answers`` (``null`` entries are dropped, as the authors' own cleaning does),
  ``pref_type`` (incl. ``ask_to_forget``; privacy items carry ``sensitive_info`` — the secret in the
  raw files, a True/False flag in the CSV splits — and get ``pref_type = "sensitive_info"``), ``who``
  (self/others), ``updated`` + ``prev_pref``, ``preference``, ``topic_preference``/``topic_query``.
  The layouts (raw persona files wrapped in their id, item wrappers, the benchmark CSV splits) are in
  :mod:`evaluation.personamem.layouts`. Items without a query only plant information and are kept
  but not evaluated.

:func:`load_questions` is strict (the first unusable item is an error naming the file and field);
:func:`read_questions` — what the command line uses — skips an unusable item and counts it under
its reason, so one bad row never rejects a released file. Every error is a :class:`PersonaMemError`
naming the file and the field path; a persona file that yields no profile is one too.

:func:`history_user` turns a flat chat history into a :class:`palset.dataset.User` whose sessions
any memory method can ingest: the system message is dropped, each user message starts an
exchange (its assistant reply is the following assistant message(s), empty for a forget
request), and every ``exchanges_per_session`` exchanges form one pseudo-session with **no logs**
and one day between sessions. PersonaMem has no dialogue-act labels, so every user utterance is
labelled *Topic Inquiry* and every assistant utterance *Requirement Prediction* — placeholders
that only satisfy the PAL-Set schema; no method should read meaning into them.
"""

from __future__ import annotations

import ast
import hashlib
import json
import logging
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from evaluation.personamem.layouts import PersonaMemError, csv_items, json_items, read_json, unwrap_persona
from palset.dataset import Session, User
from palset.models import Turn, Utterance
from palset.vocab import Act

PREF_TYPES = ("stereotypical_pref", "anti_stereotypical_pref", "neutral_preferences", "therapy_background",
              "health_and_medical_conditions", "ask_to_forget", "sensitive_info", "multimodal")
USER_ACT, ASSISTANT_ACT = Act.TOPIC_INQUIRY, Act.REQUIREMENT_PREDICTION  # placeholders, see the module doc
START = datetime(2025, 1, 1, 9, 0)
log = logging.getLogger(__name__)


def _loc(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def _fail(path: Path | str, e: ValidationError, prefix: str = "") -> PersonaMemError:
    first = e.errors()[0]
    where = _loc(tuple(first["loc"]))
    where = f"{prefix}.{where}" if prefix and where != "(top level)" else (prefix or where)
    more = f" (+{e.error_count() - 1} more)" if e.error_count() > 1 else ""
    return PersonaMemError(f"{path}: {where}: {first['msg']}{more}")


class Loose(BaseModel):
    """Declared fields are type-checked; unknown fields are kept (the release adds fields over time)."""

    model_config = ConfigDict(extra="allow")


# ---------------------------------------------------------------- persona


class PersonaProfile(Loose):
    name: str | None = None
    short_persona: str | None = None
    age: int | None = None
    gender: str | None = None
    nationality: str | None = None
    stereotypical_preferences: list[str] = Field(default_factory=list)
    anti_stereotypical_preferences: list[str] = Field(default_factory=list)
    neutral_preferences: list[str] = Field(default_factory=list)
    therapy_background: list[str] = Field(default_factory=list)
    health_and_medical_conditions: list[str] = Field(default_factory=list)
    sensitive_information: dict[str, str] = Field(default_factory=dict)
    preference_updates: dict[str, str] = Field(default_factory=dict)
    conversations: dict[str, list[dict[str, Any]]] | None = None

    @property
    def is_empty(self) -> bool:
        """No name, description, demographics, preference pool or sensitive data: nothing to personalise with."""
        return not (self.name or self.short_persona or self.age is not None or self.gender or self.nationality
                    or self.stereotypical_preferences or self.anti_stereotypical_preferences
                    or self.neutral_preferences or self.therapy_background or self.health_and_medical_conditions
                    or self.sensitive_information)


def load_persona(path: Path | str, persona_id: str | None = None) -> PersonaProfile:
    """The persona of a profile file or of a raw persona file ``{"<id>": {…}}`` (one, or chosen by id);
    a file that yields no profile is an error naming the file (never a silently empty persona)."""
    data, _ = unwrap_persona(read_json(path), path, persona_id)
    if not isinstance(data, dict):
        raise PersonaMemError(f"{path}: expected a persona object, found {type(data).__name__}")
    try:
        persona = PersonaProfile.model_validate(data)
    except ValidationError as e:
        raise _fail(path, e) from None
    if persona.is_empty:
        keys = ", ".join(list(data)[:6]) or "none"
        raise PersonaMemError(f"{path}: no persona profile (no name, short_persona, demographics or preference "
                              f"lists; top-level keys: {keys})")
    return persona


# ---------------------------------------------------------------- chat history


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="ignore")

    role: Literal["system", "user", "assistant"]
    content: str

    @field_validator("content", mode="before")
    @classmethod
    def _flatten(cls, v: Any) -> Any:
        """Multimodal messages carry a list of parts: keep their text."""
        if isinstance(v, list):
            return "\n".join(str(p.get("text", "")) if isinstance(p, dict) else str(p) for p in v).strip()
        return v


class HistoryMeta(Loose):
    total_messages: int | None = None
    final_token_count: int | None = None
    persona_id: int | str | None = None
    input_filename: str | None = None


class ChatHistory(BaseModel):
    model_config = ConfigDict(extra="ignore")

    metadata: HistoryMeta = Field(default_factory=HistoryMeta)
    chat_history: list[ChatMessage]


def load_history(path: Path | str) -> ChatHistory:
    data = read_json(path)
    try:
        return ChatHistory.model_validate(data)
    except ValidationError as e:
        raise _fail(path, e) from None


# ---------------------------------------------------------------- question items


class QuestionItem(Loose):
    """One conversation item; evaluable when it has a query, a correct answer and 3 distractors."""

    item_id: str = ""
    conversation_scenario: str | None = None
    position_in_scenario: int | None = None
    preference: str | None = None
    pref_type: str = "unknown"
    who: Literal["self", "others"] | None = None
    updated: bool = False
    prev_pref: str | None = None
    sensitive_info: str | None = None  # the secret ("<field>: <value>") where the file has it
    has_sensitive_info: bool = False  # the CSV splits' True/False flag (the secret itself is not there)
    topic_preference: str | None = None
    topic_query: str | None = None
    user_query: str | None = None
    correct_answer: str | None = None
    incorrect_answers: list[str] = Field(default_factory=list)
    conversations: list[dict[str, Any]] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _sensitive_flag(cls, data: Any) -> Any:
        """A True/False ``sensitive_info`` is the CSV's flag, not the secret: keep it as ``has_sensitive_info``."""
        if isinstance(data, dict) and isinstance(data.get("sensitive_info"), bool):
            data = {**data, "has_sensitive_info": data["sensitive_info"], "sensitive_info": None}
        return data

    @field_validator("incorrect_answers", mode="before")
    @classmethod
    def _drop_null_distractors(cls, v: Any) -> Any:
        """Released items may carry ``null`` (or blank) distractors; the authors' cleaning drops them."""
        if isinstance(v, list):
            return [x for x in v if x is not None and not (isinstance(x, str) and not x.strip())]
        return v

    @field_validator("user_query", mode="before")
    @classmethod
    def _query_text(cls, v: Any) -> Any:
        """The benchmark CSV stores ``{'role': 'user', 'content': …}`` (a dict or its literal)."""
        if isinstance(v, str) and v.lstrip().startswith("{") and "content" in v:
            try:
                v = ast.literal_eval(v.strip())
            except (ValueError, SyntaxError):
                return v
        if isinstance(v, dict):
            return v.get("content")
        return v

    @field_validator("updated", mode="before")
    @classmethod
    def _none_is_static(cls, v: Any) -> Any:
        return False if v is None or v == "" else v

    @model_validator(mode="after")
    def _derive(self):
        if self.sensitive_info:
            self.has_sensitive_info = True
        if self.pref_type in ("unknown", "") and self.has_sensitive_info:
            self.pref_type = "sensitive_info"
        if self.user_query is not None and not self.user_query.strip():
            self.user_query = None
        if self.user_query and self.incorrect_answers and len(self.incorrect_answers) != 3:
            raise ValueError(f"incorrect_answers: expected exactly 3, got {len(self.incorrect_answers)}")
        return self

    @property
    def evaluable(self) -> bool:
        return bool(self.user_query and self.correct_answer and len(self.incorrect_answers) == 3)

    @property
    def ownership(self) -> str:
        return self.who or "unknown"

    @property
    def dynamics(self) -> str:
        return "updated" if self.updated else "static"

    @property
    def forgotten(self) -> str | None:
        """What the user asked to forget (forget items): ``prev_pref`` or the quoted text."""
        if self.pref_type != "ask_to_forget":
            return None
        if self.prev_pref:
            return self.prev_pref
        pref = self.preference or ""
        return pref.split("'")[1] if pref.count("'") >= 2 else pref or None

    @property
    def sensitive_value(self) -> str | None:
        if not self.sensitive_info:
            return None
        return self.sensitive_info.split(":", 1)[1].strip() if ":" in self.sensitive_info else self.sensitive_info


def _item_id(scenario: str | None, position: int | None, k: int, item: dict[str, Any]) -> str:
    digest = hashlib.sha1(str(item.get("user_query", "")).encode() + str(item.get("correct_answer", "")).encode())
    base = (scenario or "item").split(" ")[0]
    return f"{base}:{position if position is not None else k}:{digest.hexdigest()[:6]}"


@dataclass
class QuestionFile:
    """The items of one question file, what was skipped (reason → count), its layout and the persona id."""

    path: str
    layout: str
    items: list[QuestionItem]
    skipped: Counter = field(default_factory=Counter)
    persona_id: str | None = None

    @property
    def evaluable(self) -> list[QuestionItem]:
        return [i for i in self.items if i.evaluable]

    @property
    def planting(self) -> int:
        """Items without a query: they only plant, update or forget information."""
        return sum(1 for i in self.items if not i.user_query)

    def skipped_text(self) -> str:
        return "; ".join(f"{n} × {why}" for why, n in self.skipped.most_common())


def _raw_items(path: Path | str, persona_id: str | None) -> tuple[list[tuple[str, dict[str, Any]]], str, str | None]:
    if str(path).lower().endswith(".csv"):
        rows, pid = csv_items(path, persona_id)
        return rows, "csv", pid
    data, pid = unwrap_persona(read_json(path), path, persona_id)
    rows, layout = json_items(data, path)
    return rows, ("raw persona file" if pid is not None else layout), pid


def _reason(e: ValidationError) -> str:
    """Why an item is unusable, without row numbers, so that equal reasons count together."""
    first = e.errors()[0]
    where = _loc(tuple(p for p in first["loc"] if not isinstance(p, int)))
    msg = first["msg"].removeprefix("Value error, ")
    return msg if where == "(top level)" else f"{where}: {msg}"


def read_questions(path: Path | str, persona_id: str | None = None, *, strict: bool = False) -> QuestionFile:
    """Every item of the file (in file order) with a stable ``item_id``. Unusable items are skipped and
    counted by reason (an item with a query but no correct answer or distractors is unusable too);
    ``strict`` makes the first unusable item an error naming the file and field instead."""
    raw, layout, pid = _raw_items(path, persona_id)
    qf = QuestionFile(path=str(path), layout=layout, items=[], persona_id=pid)
    for k, (where, d) in enumerate(raw):
        if not isinstance(d.get("position_in_scenario"), int):
            d["position_in_scenario"] = None
        try:
            item = QuestionItem.model_validate(d)
        except ValidationError as e:
            if strict:
                raise _fail(path, e, where) from None
            reason = _reason(e)
            log.warning("%s: %s skipped (%s)", path, where, reason)
            qf.skipped[reason] += 1
            continue
        if not strict and item.user_query and not item.evaluable:
            qf.skipped["a query without a correct answer and 3 incorrect answers"] += 1
            continue
        item.item_id = item.item_id or _item_id(item.conversation_scenario, item.position_in_scenario, k, d)
        qf.items.append(item)
    seen: dict[str, int] = {}
    for item in qf.items:  # identical items in one file still get distinct ids
        n = seen.get(item.item_id, 0)
        seen[item.item_id] = n + 1
        if n:
            item.item_id = f"{item.item_id}#{n}"
    return qf


def load_questions(path: Path | str, persona_id: str | None = None) -> list[QuestionItem]:
    """Every item of the file, strictly: the first unusable item is an error naming the file and field."""
    return read_questions(path, persona_id, strict=True).items


# ---------------------------------------------------------------- history → sessions


def exchanges(history: ChatHistory) -> list[tuple[str, str]]:
    """(user text, assistant reply) pairs; system messages dropped, a user turn without reply gets ""."""
    out: list[list[str]] = []
    for m in history.chat_history:
        if m.role == "system":
            continue
        if m.role == "user":
            out.append([m.content, ""])
        elif not out:  # an assistant message before any user message
            out.append(["", m.content])
        else:
            out[-1][1] = f"{out[-1][1]}\n\n{m.content}" if out[-1][1] else m.content
    return [(u, a) for u, a in out]


def history_sessions(history: ChatHistory, uid: str, exchanges_per_session: int = 10) -> list[Session]:
    if exchanges_per_session < 1:
        raise ValueError("exchanges_per_session must be at least 1")
    pairs = exchanges(history)
    sessions = []
    for i in range(0, len(pairs), exchanges_per_session):
        idx = i // exchanges_per_session
        turns = [Turn(user=Utterance(action=USER_ACT, content=u), assistant=Utterance(action=ASSISTANT_ACT, content=a))
                 for u, a in pairs[i:i + exchanges_per_session]]
        sessions.append(Session(sample_id=f"{uid}_sample{idx}", index=idx, split="history",
                                dialogue_timestamp=START + timedelta(days=idx), logs=[], turns=turns, topics=[]))
    return sessions


def history_user(history: ChatHistory, uid: str | None = None, exchanges_per_session: int = 10) -> User:
    """A :class:`User` (language "en") whose sessions are the history's pseudo-sessions."""
    uid = uid or f"pm{history.metadata.persona_id if history.metadata.persona_id is not None else 'x'}"
    uid = uid.replace("_", "-").replace(" ", "-")
    user = User(uid=uid, language="en")
    sessions = history_sessions(history, uid, exchanges_per_session)
    user.set_session_loader(lambda: sessions)
    return user


def history_key(history: ChatHistory, exchanges_per_session: int) -> str:
    """A dataset key for memory builds: same content and chunking → same build (resumable)."""
    blob = json.dumps([m.model_dump() for m in history.chat_history], ensure_ascii=False, sort_keys=True)
    return f"personamem:{hashlib.sha1(blob.encode()).hexdigest()[:12]}:x{exchanges_per_session}"
