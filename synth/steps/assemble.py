"""Assembly (§2.13): the step outputs become a :class:`palset.assemble.UserBundle`, checked in a scratch
folder with the same loader and checks as ``pal validate``, then merged into the chosen dataset folder
under a new user id that collides with no user already there."""

from __future__ import annotations

import fcntl
import hashlib
import tempfile
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from palset.assemble import BundleLog, BundleTopic, BundleTurn, BundleUtterance, UserBundle, write_release
from palset.files import locate, read_json
from palset.loader import load_dataset
from synth.report import QualityReport, build_report
from synth.steps.base import Step, StepContext, StepFailed

_LOCK = threading.Lock()


class Assembled(BaseModel):
    model_config = ConfigDict(extra="forbid")
    uid: str
    out: str
    files: list[str] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)
    report: QualityReport = Field(default_factory=QualityReport)


def build_bundle(uid: str, lang: str, inputs: dict[str, Any]) -> UserBundle:
    """Everything the steps produced, situation by situation."""
    choice, framework = inputs["dialogue_choice"], inputs["requirement_framework"].situations
    cands, prefs = inputs["candidate_solutions"].situations, inputs["solution_preference"].situations
    logs, dialogues = inputs["logs"].situations, inputs["dialogues"].situations
    situations = []
    for s in inputs["situations"].situations:
        b = s.bundle()
        end = s.end_date
        b.logs = [BundleLog(timestamp=lg.timestamp, type=lg.type, content=lg.content) for lg in logs.get(end, [])]
        if end in framework:
            b.kept = "query" if end in choice.query else "history"
            b.topics = [BundleTopic(requirement_type=t.requirement_type, user_query=t.user_query,
                                    implicit_needs=t.implicit_needs, requirement=t.requirement,
                                    candidate_solutions=c, analysis=p.analysis, pos_list=p.pos_list, neg_list=p.neg_list)
                        for t, c, p in zip(framework[end], cands[end], prefs[end])]
            b.dialogue = [BundleTurn(user=BundleUtterance(action=t.user.action, content=t.user.content),
                                     assistant=BundleUtterance(action=t.assistant.action, content=t.assistant.content))
                          for t in dialogues.get(end, [])]
        situations.append(b)
    return UserBundle(uid=uid, lang=lang, profile=inputs["profile"].model_dump(by_alias=True, exclude_none=True),
                      requirement_types=inputs["requirement_types"].types,
                      preferences={a: {rid: {"pos": e.pos, "neg": e.neg} for rid, e in per.items()}
                                   for a, per in inputs["preferences"].preferences.items()},
                      timeline=inputs["timeline"].months, situations=situations)


def release_suffix(root: Path, lang: str) -> str:
    """``_en`` when the folder's files are named so (or a new English folder), else ``""``."""
    found = [p for p in locate(root).values() if p is not None]
    if found:
        return "_en" if any(p.stem.endswith("_en") for p in found) else ""
    return "_en" if lang == "en" else ""


def existing_uids(root: Path) -> set[str]:
    uids: set[str] = set()
    for name in ("profiles", "samples", "requirement_types", "timeline"):
        path = locate(root).get(name)
        if path is not None:
            data, _ = read_json(path, path.name)
            if isinstance(data, dict):
                uids |= set(data)
    return uids


def next_uid(taken: set[str]) -> str:
    """One above the highest numeric id, 4-digit zero-padded like PAL-Set (``0000`` in an empty folder)."""
    numbers = [int(u) for u in taken if u.isdigit()]
    n = max(numbers) + 1 if numbers else 0
    while f"{n:04d}" in taken:
        n += 1
    return f"{n:04d}"


@contextmanager
def folder_lock(root: Path, locks: Path):
    """One writer per dataset folder, across threads and processes (lock files live in ``locks``)."""
    digest = hashlib.sha1(str(root.resolve()).encode()).hexdigest()[:16]
    with _LOCK, open(locks / f"{digest}.lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def validate_alone(bundle: UserBundle) -> tuple[list[str], list[str]]:
    """(errors, warnings) of this user written alone into a scratch folder, as ``pal validate`` reports them."""
    with tempfile.TemporaryDirectory(prefix="pal-synth-") as tmp:
        write_release(tmp, [bundle])
        dataset = load_dataset(tmp)
        return ([str(p) for p in dataset.problems if p.level == "error"],
                [str(p) for p in dataset.problems if p.level == "warning"])


class AssembleStep(Step):
    name = "assemble"
    title = "Assembly"
    spec = "§2.13"
    deps = ("profile", "timeline", "requirement_types", "preferences", "situations", "experience", "dialogue_choice",
            "requirement_framework", "candidate_solutions", "solution_preference", "logs", "dialogues")
    output_model = Assembled

    def run(self, ctx: StepContext) -> Assembled:
        if not ctx.run.out:
            raise StepFailed("assemble: no dataset folder chosen")
        root = Path(ctx.run.out).expanduser()
        errors, warnings = validate_alone(build_bundle(ctx.run.uid or "9999", ctx.config.lang, ctx.inputs))
        if errors:
            raise StepFailed("assemble: the user does not pass pal validate: " + "; ".join(errors[:3]))
        with folder_lock(root, ctx.store.locks):
            taken = existing_uids(root)
            uid = ctx.run.uid or next_uid(taken)  # a run re-assembled replaces its own user
            if ctx.run.uid != uid:  # the id is the run's before anything is written: resumed after a crash, it
                ctx.run.uid = uid   # rewrites this user instead of adding another
                ctx.store.save(ctx.run)
            bundle = build_bundle(uid, ctx.config.lang, ctx.inputs)
            files = write_release(root, [bundle], suffix=release_suffix(root, ctx.config.lang))
        return Assembled(uid=uid, out=str(root), files=[str(f) for f in files], warnings=warnings[:50],
                         report=build_report(ctx.inputs.get("_records", {})))
