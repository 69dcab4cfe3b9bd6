"""An act definition's wording, A/B on recorded prompts: how often the assistant's reply talks about the user or in
the prompt's terms (``sim.assistant.talks_about_the_user``), how often a retry rule would ask it again
(``sim.assistant.why_asked_again``, ``without_copied_note``) and how often it is a question, with the definition a
recorded prompt was sent with (A) and with another (B).

Why: the act definitions are what small models copy from (FIDELITY.md: "hidden need behind your user's question"
came back as "your user's…" and "Based on the information provided, the user…"). A change of wording is measured
on the very prompts the demo workspace was recorded with — the assistant turns the bundle keeps, each with the
messages it was sent — so only the definition differs: the same contexts, seeds and model for both sides.

Run: ``.venv/bin/python bench/act_wording.py --act "Requirement Prediction" --language en --contexts 14 --samples 2
--old "<the wording the recording used>"`` (the current definition is B unless ``--new`` gives another; the
bundle's prompts must hold ``--old``; without ``--old``, A is the wording most recorded prompts hold other than B,
and the default model is the bundled one). Each context's prompt is read once by the server, then served from its
prompt cache: about 25 s a context with the 1.5B on 2 cores, plus ~1 s a reply.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("PAL_HOME", tempfile.mkdtemp(prefix="pal-wording-"))

from palset.vocab import Act  # noqa: E402
from sim.acts import act_name, definition  # noqa: E402
from sim.assistant import talks_about_the_user, why_asked_again, without_copied_note  # noqa: E402
from sim.prompting import language_name, load_role_prompt  # noqa: E402
from sim.textstats import language_of  # noqa: E402
from studio.bundle.importer import read_bundle  # noqa: E402
from testkit.workspace import make_workspace  # noqa: E402

BUNDLE = ROOT / "data" / "demo" / "workspace.palbundle"
ROLE_MARK = re.compile(r"(?:^|\n\n)\[(system|user|assistant)\]\n")


def load_prompts(bundle: Path, act: Act) -> list[tuple[str, list[dict[str, str]]]]:
    """(run id, messages) of every recorded assistant turn in ``act``: its stored prompt split back into messages
    (``sim.prompting.render_messages`` joins them as ``[role]`` blocks)."""
    found = []
    for row in read_bundle(bundle).rows["sim_turns"]:  # checked as an import checks it
        turn = json.loads(row["data"]) if isinstance(row["data"], str) else row["data"]
        if row["side"] == "assistant" and turn.get("act") == act.value and turn.get("prompt"):
            parts = ROLE_MARK.split(turn["prompt"])
            found.append((row["run_id"], [{"role": parts[i], "content": parts[i + 1]}
                                          for i in range(1, len(parts) - 1, 2)]))
    return found


def reply_tail(language: str) -> str:
    """What the assistant prompt writes after an act's definition on its line (the reply instruction), for a user
    of ``language``."""
    prompt = load_role_prompt("sim/assistant", language)
    line = next(line for line in prompt.text.splitlines() if "$definition" in line)
    return line.split("$definition", 1)[1].replace("$language", language_name(prompt, language)).strip()


def recorded_wordings(prompts: list[tuple[str, list[dict[str, str]]]], act: Act, language: str) -> Counter[str]:
    """How many recorded prompts hold each wording of ``act``'s definition: the line after its name, less the
    reply instruction the template writes after it."""
    name, tail = act_name(act, language), reply_tail(language)
    found: Counter[str] = Counter()
    for _, messages in prompts:
        text = messages[-1]["content"]
        if (at := text.find(name)) >= 0:
            line = text[at + len(name):].split("\n", 1)[0].lstrip(".:：。 ").strip()
            found[line.removesuffix(tail).strip()] += 1
    return found


def judge_reply(text: str, act: Act, note: str, instruction: str) -> dict[str, bool]:
    """What the rules say of one reply: talks about the user; asked again by a retry rule; a question."""
    words = without_copied_note(text, note, instruction)
    return {"about_user": talks_about_the_user(text),
            "asked_again": words is None or bool(why_asked_again(words, act, [], "")),
            "question": text.rstrip().endswith(("?", "？"))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--act", default=Act.REQUIREMENT_PREDICTION.value)
    parser.add_argument("--language", choices=("en", "zh"), default="en")
    parser.add_argument("--old", default="", help="the definition the recorded prompts hold (default: the one most of "
                                                  "them hold other than --new)")
    parser.add_argument("--new", default="", help="the definition to try (default: the current one)")
    parser.add_argument("--contexts", type=int, default=6)
    parser.add_argument("--samples", type=int, default=2)
    parser.add_argument("--model", default="qwen2.5-coder-0.5b")
    parser.add_argument("--bundle", default=str(BUNDLE))
    args = parser.parse_args()
    act = Act(args.act)
    new = args.new or definition("assistant", act, args.language)
    recorded = [(rid, m) for rid, m in load_prompts(Path(args.bundle), act)
                if language_of(m[-1]["content"][-200:]) == args.language]
    if not args.old:
        others = [(w, n) for w, n in recorded_wordings(recorded, act, args.language).most_common() if w and w != new]
        args.old = others[0][0] if others else new
        print(f"--old: {args.old!r} ({others[0][1] if others else 0} recorded prompt(s))"
              + ("" if others else "; no recorded prompt holds another wording: A and B are one text (sampling noise)"))
    prompts = [(rid, m) for rid, m in recorded if args.old in m[-1]["content"]]
    if not prompts:
        raise SystemExit(f"no recorded {act.value} prompt in {args.bundle} holds --old in {args.language}")
    random.seed(7)
    chosen = random.sample(prompts, min(args.contexts, len(prompts)))
    ws = make_workspace(Path(os.environ["PAL_HOME"]), secrets={"cache": False},
                        env={"PAL_DEFAULT_MODEL": args.model, "PAL_DEFAULT_TIMEOUT": "900"})
    llm = ws.llm(session_id="act-wording")
    counts = {side: {"replies": 0, "about_user": 0, "asked_again": 0, "question": 0} for side in "AB"}
    started = time.perf_counter()
    try:
        for i, (run_id, messages) in enumerate(chosen):
            for side, wording in (("A", args.old), ("B", new)):
                msgs = [*messages[:-1], {"role": messages[-1]["role"],
                                         "content": messages[-1]["content"].replace(args.old, wording)}]
                instruction = f"{act_name(act, args.language)} {wording}"
                for s in range(args.samples):
                    text = llm.chat("assistant", msgs, use_cache=False, seed=1000 + s, temperature=0.7,
                                    max_tokens=160, stop=["\n\n"]).text.strip()
                    verdict = judge_reply(text, act, msgs[-1]["content"], instruction)
                    counts[side]["replies"] += 1
                    for k, v in verdict.items():
                        counts[side][k] += v
                    flags = " ".join(k for k, v in verdict.items() if v)
                    print(f"{i:2d} {run_id} {side} s{s} [{flags}] {text[:140]!r}", flush=True)
    finally:
        ws.close()
    print(f"\n{act.value} ({args.language}), {len(chosen)} recorded prompts x {args.samples} samples, {args.model}, "
          f"{time.perf_counter() - started:.0f} s")
    for side, label in (("A", "recorded wording"), ("B", "new wording")):
        c = counts[side]
        print(f"{side} ({label}): about the user {c['about_user']}/{c['replies']}, asked again by a retry rule "
              f"{c['asked_again']}/{c['replies']}, a question {c['question']}/{c['replies']}")


if __name__ == "__main__":
    main()
