"""Quality of each installed local model in every role, on the demo users: one table, models side by side.

Figures per model (the bundled SmolLM2-135M, Qwen2.5-Coder-0.5B — the default — and the 1.5B where installed):

* **JSON valid per step kind** — share of structured calls that returned a valid instance (after the client's
  corrections; the first-try share beside it): H²Memory's steps (log graph, situation, background, topic outline,
  refinement), the FairEval judge, two synthesis steps (requirement types, candidate solutions) and the User-LLM in
  free mode (the one structured dialogue turn);
* **speaks as the user** — share of User-LLM turns (fixed mode, plain text) that pass :mod:`sim.persona_check`
  (no assistant-style greeting or offer, no narration of "the user", first person, the user's language, no echo of
  the assistant or the prompt), as kept (the simulator asks again when a turn fails, at most 3 times) and at the
  first try; **right language** — share of the Chinese users' turns written in Chinese;
* **H²Memory against gold** — situations built vs the gold memory's (the dataset's own grouping) for the first
  sessions of one user, and the headline figures of ``evaluation/fidelity`` for that build;
* **FairEval agrees with the dataset** — pairwise items built from the dataset's own dialogue of a query topic
  (where the user accepted every proposal) against a copy whose proposals are swapped for the topic's rejected
  (neg) candidates: share of judgments (preference aspect, both orders) that prefer the original;
* **seconds per call** per role.

Targets for the default model: JSON valid >= 98 %, speaks as the user >= 90 %, right language >= 95 %, H²Memory
situations within 2x of gold.

``--wording english`` runs the Chinese users with the English prompts ("answer in Chinese") instead of their Chinese
wording, ``--wording both`` runs them both ways (the measurement behind FIDELITY.md's decision).

Run: ``nice -n 10 .venv/bin/python bench/model_quality.py [--models qwen2.5-coder-0.5b] [--out DIR]`` — the
default sizes take about 10 minutes (SmolLM2), 20 (0.5B) and 40 (1.5B) on a busy 2-core machine; ``--sim-turns``,
``--sim-users``, ``--h2-sessions``, ``--judge-users`` make bigger runs. A temporary PAL_HOME; results in ``--out``.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
log = logging.getLogger("bench.model_quality")
sys.path.insert(0, str(ROOT))
os.environ.setdefault("PAL_HOME", tempfile.mkdtemp(prefix="pal-quality-"))

from backends.llm.client import LLMClient  # noqa: E402
from backends.local_models import CATALOG, LocalModel, find_model  # noqa: E402
from backends.model_files import ModelUnavailable, part_files, served_path  # noqa: E402
from backends.prompts import load_prompt  # noqa: E402
from evaluation.faireval_prompts import prompt_set  # noqa: E402
from palset.dataset import dataset_key  # noqa: E402
from palset.loader import load_dataset  # noqa: E402
from palset.vocab import Act  # noqa: E402
from sim.persona_check import detect_language, speaks_as_user  # noqa: E402
from sim.prompting import echo_sources  # noqa: E402
from sim.simulator import SimulationError, TopicContext, UserSimulator  # noqa: E402
from sim.types import RunRecord, RunSpec, Utterance  # noqa: E402
from testkit.workspace import make_workspace  # noqa: E402

DEMO = ROOT / "data" / "demo"
STATS: dict[str, dict[str, float]] = defaultdict(lambda: {"calls": 0, "valid": 0, "first": 0, "seconds": 0.0})


def _counting() -> None:
    """Count every structured call by prompt (valid, valid at the first try, seconds)."""
    original = LLMClient.structured

    def structured(self, role, messages, model, *, prompt=None, **kw):  # type: ignore[no-untyped-def]  # a counting wrapper with the method's own signature
        started = time.perf_counter()
        out = original(self, role, messages, model, prompt=prompt, **kw)
        s = STATS[prompt.name if prompt else model.__name__]
        s["calls"] += 1
        s["valid"] += out.ok
        s["first"] += out.ok and out.attempts == 1
        s["seconds"] += time.perf_counter() - started
        return out

    LLMClient.structured = structured  # type: ignore[method-assign]  # counts every structured call of the bench


def installed(model: LocalModel) -> bool:
    """Whether the model can be served here (its joined file, or every part, is present)."""
    try:
        return served_path(model).is_file() or bool(part_files(model))
    except ModelUnavailable:
        return False


def topic_turns(session, index: int = 0):
    """The turns of the session's ``index``-th topic (a topic starts with a Topic Inquiry)."""
    topics: list[list] = []
    for turn in session.turns:
        if turn.user.action is Act.TOPIC_INQUIRY or not topics:
            topics.append([])
        topics[-1].append(turn)
    return topics[min(index, len(topics) - 1)]


def utter(turn_no: int, side: str, act: Act, content: str) -> Utterance:
    return Utterance(turn_no=turn_no, side=side, actor="simulator" if side == "user" else "assistant", act=act,  # type: ignore[arg-type]  # side is "user" or "assistant" here
                     content=content)


def simulator_part(llm, dataset, users: list[str], turns: int) -> dict:
    """User-LLM turns against the dataset's own assistant lines (fixed mode), then one free-mode turn per user (the
    users whose free-mode turn had no usable content after every try are listed; its JSON figures count them)."""
    rows = []
    free_failed: list[str] = []
    for uid in users:
        user = dataset.users[uid]
        session = user.query[0]
        ctx = TopicContext(user=user, session=session, topic=session.topics[0])
        sim = UserSimulator(llm, ctx)
        history: list[Utterance] = []
        for no, turn in enumerate(topic_turns(session)[:turns], start=1):
            started = time.perf_counter()
            utt, _ = sim.say(no, turn.user.action, history, f"quality/{uid}/{no}")
            seconds = time.perf_counter() - started
            verdict = speaks_as_user(utt.content, user.language, echo_sources(sim.messages(turn.user.action, history),
                                                                              history), ctx.name())
            rows.append({"user": uid, "language": user.language, "turn": no, "act": turn.user.action.value,
                         "text": utt.content, "ok": verdict.ok, "reasons": list(verdict.reasons),
                         "first_try": utt.attempts == 1 and verdict.ok, "attempts": utt.attempts,
                         "composed": bool(utt.fallback), "fallback": utt.fallback,
                         "written": detect_language(utt.content), "seconds": seconds})
            history += [utt, utter(no, "assistant", turn.assistant.action, turn.assistant.content)]
            print(f"  {uid} t{no} {turn.user.action.value:24} {seconds:5.1f}s x{utt.attempts} "
                  f"{'ok ' if verdict.ok else 'BAD'}{'*' if utt.fallback else ' '} {utt.content[:90]!r}", flush=True)
        free = UserSimulator(llm, ctx, free_mode=True)
        first = topic_turns(session)[0]
        try:
            free.say(2, Act.REQUIREMENT_CONFIRMATION, [utter(1, "user", first.user.action, first.user.content),
                                                        utter(1, "assistant", first.assistant.action,
                                                              first.assistant.content)], f"quality/{uid}/free")
        except SimulationError as exc:  # a model whose free-mode turn is never usable: counted, the bench goes on
            log.warning("free-mode turn of user %s: %s", uid, exc)
            free_failed.append(uid)
    zh = [r for r in rows if r["language"] == "zh"]
    return {"turns": rows, "free_mode_failed": free_failed, "speaks_as_user": share(r["ok"] for r in rows),
            "speaks_as_user_first_try": share(r["first_try"] for r in rows),
            "own_draft": share(r["ok"] and not r.get("composed") for r in rows),
            "right_language_zh": share(r["written"] == "zh" for r in zh) if zh else None,
            "seconds_per_turn": sum(r["seconds"] for r in rows) / max(len(rows), 1),
            "seconds_per_call": sum(r["seconds"] for r in rows) / max(sum(r["attempts"] for r in rows), 1)}


def share(values) -> float | None:
    values = list(values)
    return sum(bool(v) for v in values) / len(values) if values else None


def memory_part(ws, llm, dataset, uid: str, sessions: int) -> dict:
    """H²Memory for the user's first ``sessions`` sessions beside the gold memory of the same sessions."""
    from evaluation.fidelity import HEADLINE
    from evaluation.fidelity.service import measure_build

    started = time.perf_counter()
    builder = ws.open_builder(dataset, uid, "h2memory", llm=llm, fresh=True)
    builder.run(until_session=sessions - 1)
    seconds = time.perf_counter() - started
    gold = ws.open_builder(dataset, uid, "gold", fresh=True)
    gold.run(until_session=sessions - 1)
    built = [i for i in builder.store.items_as_of(builder.build_id, 2 * sessions - 1) if i.layer == "situation"]
    truth = [i for i in gold.store.items_as_of(gold.build_id, 2 * sessions - 1) if i.layer == "situation"]
    logs = sum(len(s.logs) for s in dataset.users[uid].sessions[:sessions])
    report = measure_build(builder, ws.fidelity)
    final = report.final
    figures = {name: getattr(final, name, None) for name in HEADLINE} if final else {}
    sample = [i.text for i in built[:3]]
    copied = share(any(lg.content[:40] in i.text for lg in dataset.users[uid].sessions[0].logs) for i in built)
    return {"user": uid, "sessions": sessions, "logs": logs, "situations": len(built), "gold_situations": len(truth),
            "ratio": len(built) / max(len(truth), 1), "copied_a_log": copied, "fidelity": figures,
            "examples": sample, "seconds": seconds}


def degraded(session, topic_index: int, neg: list[str]) -> list[Utterance]:
    """The topic's dialogue with each proposal swapped for a rejected candidate (the other lines as they were)."""
    out, swaps = [], iter(neg)
    for no, turn in enumerate(topic_turns(session, topic_index), start=1):
        out.append(utter(no, "user", turn.user.action, turn.user.content))
        said = turn.assistant.content
        if turn.assistant.action is Act.SOLUTION_PROPOSAL:
            said = next(swaps, said)
        out.append(utter(no, "assistant", turn.assistant.action, said))
    return out


def judge_part(llm, dataset, users: list[str]) -> dict:
    """FairEval (preference aspect, k=1, both orders): the dataset's dialogue against its degraded copy."""
    from evaluation.faireval import judge_pair

    rows = []
    for uid in users:
        user = dataset.users[uid]
        session = user.query[0]
        topic = session.topics[0]
        ctx = TopicContext(user=user, session=session, topic=topic)
        original = degraded(session, 0, [])
        worse = degraded(session, 0, list(topic.topic.solution.neg))

        base = RunSpec(dataset=dataset_key(dataset.root), user_id=uid, sample_id=session.sample_id,
                       topic_key=topic.key, method="dataset")
        run_a = RunRecord(run_id=f"quality-{uid}-dataset", spec=base, utterances=original)
        run_b = RunRecord(run_id=f"quality-{uid}-degraded", spec=base.model_copy(update={"method": "degraded"}),
                          utterances=worse)
        j = judge_pair(llm, ctx, run_a, run_b, "preference", k=1)
        rows.append({"user": uid, "decision": j.decision, "mean_original": j.mean_a, "mean_degraded": j.mean_b,
                     "invalid": j.invalid})
        print(f"  judge {uid}: {j.decision} ({j.mean_a} vs {j.mean_b}, invalid samples {j.invalid})", flush=True)
    return {"items": rows, "agreement": share(r["decision"] == "win" for r in rows),
            "ties": share(r["decision"] == "tie" for r in rows)}


def synth_part(llm, dataset, uid: str) -> dict:
    """Two synthesis steps' prompts with the steps' own reply models, on a demo user's profile and timeline."""
    from pydantic import Field, create_model

    from synth.lang import dumps, language_name, profile_text
    from synth.steps.framework import CandidateTopicReply
    from synth.steps.needs import RequirementTypesReply

    user = dataset.users[uid]
    profile = profile_text(user.profile.model_dump(by_alias=True, exclude_none=True))
    prompt = load_prompt("synth/requirement_types")
    llm.structured("synthesizer", prompt.messages(language=language_name(user.language), profile=profile,
                                                   timeline=dumps(user.timeline)), RequirementTypesReply,
                   prompt=prompt, max_tokens=700)
    topic = user.query[0].topics[0].topic
    prompt = load_prompt("synth/candidate_solutions")
    reply = create_model("CandidatesReply", topics=(list[CandidateTopicReply], Field(min_length=1, max_length=1)))
    llm.structured("synthesizer", prompt.messages(language=language_name(user.language), count=1, requirements=dumps(
        {"topic-1": {"user_query": topic.user_query, "requirement": topic.requirement}})), reply, prompt=prompt,
        max_tokens=600)
    return {"user": uid}


KINDS = [("log graph", "memory/h2_log_graph"), ("situation", "memory/h2_situation"),
         ("background", "memory/h2_background"), ("topic outline", "memory/h2_topic_outline"),
         ("refinement", "memory/h2_refine"),
         ("judge (FairEval)", prompt_set(None).template.format(aspect="preference")),  # the judge's default wording
         ("synth: requirement types", "synth/requirement_types"),
         ("synth: candidate solutions", "synth/candidate_solutions"), ("simulator, free mode", "sim/user_simulator")]


def json_figures() -> dict:
    out = {}
    for label, name in KINDS:
        s = {k: sum(STATS[n][k] for n in (name, f"{name}.zh")) for k in ("calls", "valid", "first", "seconds")}
        out[label] = {"calls": int(s["calls"]), "valid": s["valid"] / s["calls"] if s["calls"] else None,
                      "first_try": s["first"] / s["calls"] if s["calls"] else None,
                      "seconds_per_call": s["seconds"] / s["calls"] if s["calls"] else None}
    total = {k: sum(v[k] for v in STATS.values()) for k in ("calls", "valid")}
    out["all structured calls"] = {"calls": int(total["calls"]), "valid": total["valid"] / max(total["calls"], 1)}
    return out


def run_model(model: str, args, dataset) -> dict:
    STATS.clear()
    home = Path(tempfile.mkdtemp(prefix=f"pal-quality-{model}-"))
    ws = make_workspace(home, secrets={"local": {"threads": args.threads}, "cache": False},
                        env={"PAL_DEFAULT_MODEL": model, "PAL_EMBEDDER": "auto", "PAL_DEFAULT_TIMEOUT": "900"})
    llm = ws.llm(session_id=f"quality-{model}")
    started = time.perf_counter()
    out: dict = {"model": model, "wording": os.environ.get("PAL_PROMPT_WORDING", "native")}
    try:
        print(f"{model}: User-LLM", flush=True)
        out["simulator"] = simulator_part(llm, dataset, args.sim_users.split(","), args.sim_turns)
        if not args.dialogue_only:
            print(f"{model}: H²Memory", flush=True)
            out["memory"] = memory_part(ws, llm, dataset, args.h2_user, args.h2_sessions)
            print(f"{model}: judge", flush=True)
            out["judge"] = judge_part(llm, dataset, args.judge_users.split(","))
            print(f"{model}: synthesis", flush=True)
            out["synth"] = synth_part(llm, dataset, args.synth_user)
    finally:
        out["json"] = json_figures()
        out["seconds"] = time.perf_counter() - started
        ws.close()
    return out


def pct(v) -> str:
    return "–" if v is None else f"{v:.0%}"


def table(results: list[dict]) -> str:
    """The figures as a Markdown table, one column per model."""
    cols = [f"{r['model']}" + (" (English wording)" if r["wording"] == "english" else "") for r in results]
    lines = ["| figure | " + " | ".join(cols) + " |", "|---|" + "---|" * len(cols)]

    def row(label: str, cells: list[str]) -> None:
        lines.append(f"| {label} | " + " | ".join(cells) + " |")

    for label, _ in [*KINDS, ("all structured calls", "")]:
        row(f"JSON valid: {label}", [
            f"{pct(r['json'][label]['valid'])} of {r['json'][label]['calls']}" +
            (f" (1st try {pct(r['json'][label].get('first_try'))})" if r["json"][label].get("first_try") is not None
             else "") for r in results])
    row("speaks as the user (kept / 1st try)", [f"{pct(r['simulator']['speaks_as_user'])} / "
                                                f"{pct(r['simulator']['speaks_as_user_first_try'])} of "
                                                f"{len(r['simulator']['turns'])}" for r in results])
    row("… of which the model's own draft (not composed from a decision or the user query)",
        [pct(r["simulator"].get("own_draft")) for r in results])
    row("right language, Chinese users", [pct(r["simulator"]["right_language_zh"]) for r in results])
    if all("memory" in r for r in results):
        row("H²Memory situations / gold (logs)", [f"{r['memory']['situations']} / {r['memory']['gold_situations']} "
                                                 f"({r['memory']['logs']}): {r['memory']['ratio']:.1f}×"
                                                 for r in results])
        row("situations that copy a log", [pct(r["memory"]["copied_a_log"]) for r in results])
        for name in results[0]["memory"]["fidelity"]:
            row(f"fidelity: {name}", [("–" if (v := r["memory"]["fidelity"].get(name)) is None else
                                       f"{v:.2f}" if isinstance(v, float) else str(v)) for r in results])
        row("FairEval prefers the dataset's side", [f"{pct(r['judge']['agreement'])} of {len(r['judge']['items'])} "
                                                    f"(ties {pct(r['judge']['ties'])})" for r in results])
    row("seconds per User-LLM call", [f"{r['simulator']['seconds_per_call']:.1f}" for r in results])
    for label in ("log graph", "situation", "judge (FairEval)"):
        row(f"seconds per call: {label}", ["–" if r["json"][label]["seconds_per_call"] is None else
                                           f"{r['json'][label]['seconds_per_call']:.1f}" for r in results])
    row("bench minutes", [f"{r['seconds'] / 60:.1f}" for r in results])
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="", help="catalog keys or names (default: every installed local model)")
    parser.add_argument("--sim-users", default="1000,1002,1006,1007")
    parser.add_argument("--sim-turns", type=int, default=3, help="User-LLM turns per user (of the first query topic)")
    parser.add_argument("--h2-user", default="1002")
    parser.add_argument("--h2-sessions", type=int, default=1)
    parser.add_argument("--judge-users", default="1002,1006")
    parser.add_argument("--synth-user", default="1001")
    parser.add_argument("--wording", choices=("native", "english", "both"), default="native")
    parser.add_argument("--dialogue-only", action="store_true", help="only the User-LLM figures (wording runs)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", default="", help="folder for results.json and table.md")
    args = parser.parse_args()
    _counting()
    dataset = load_dataset(DEMO)
    chosen = [find_model(m) for m in args.models.split(",") if m]
    if None in chosen:
        raise SystemExit(f"unknown model in --models {args.models!r} (catalog: {', '.join(CATALOG)})")
    names = [m.name for m in chosen if m] or [m.name for m in CATALOG.values() if installed(m)]
    wordings = ["native", "english"] if args.wording == "both" else [args.wording]
    load = os.getloadavg()
    print(f"models: {', '.join(names)}; load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}", flush=True)
    results: list[dict] = []
    stamp = time.strftime("%Y%m%d-%H%M%S")
    for model in names:
        for w in wordings:
            os.environ["PAL_PROMPT_WORDING"] = w
            results.append(run_model(model, args, dataset))
            print(table(results[-1:]), flush=True)
            write(args.out, stamp, results)
    print(f"\nmodel quality on the demo users (load average at start {load[0]:.1f}; targets for the default model: "
          "JSON valid >= 98 %, speaks as the user >= 90 %, right language >= 95 %, situations within 2x of gold)")
    print(table(results))
    write(args.out, stamp, results)


def write(folder: str, stamp: str, results: list[dict]) -> None:
    """results.json and the table of every model measured so far (rewritten after each model)."""
    if not folder:
        return
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"quality-{stamp}.json").write_text(json.dumps(results, ensure_ascii=False, indent=1))
    (out / f"quality-{stamp}.md").write_text(table(results) + "\n")
    print(f"written to {out}/quality-{stamp}.*", flush=True)


if __name__ == "__main__":
    main()
