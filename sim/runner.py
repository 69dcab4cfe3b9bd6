"""Run a simulation turn by turn, saving each utterance the moment it exists.

The next side to speak is derived from what is stored, so a run interrupted anywhere (closed
browser, killed process, LLM failure) resumes at exactly the next missing utterance and never
duplicates one. A person can take over either side for any turn.

A run's status changes only through :class:`Simulation`'s methods: ``running`` → ``finished`` (the
schedule is done), ``failed`` (:meth:`Simulation.fail`), ``stopped`` (:meth:`Simulation.stop`);
:meth:`Simulation.resume` takes a failed or stopped run back to ``running``.
One driver per run: a simulation with a ``driver`` name holds the run's lease while it steps
(:meth:`sim.store.SimStore.take_lease`) and raises :class:`RunElsewhere` when another driver holds
it. Should two drivers still meet (a lease that expired mid-call), the one whose insert is lost
reloads the run's utterances instead of asking the LLM again for the same turn.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from backends.llm.errors import LLMError
from palset.vocab import Act
from sim.assistant import Assistant
from sim.schedule import next_assistant_act
from sim.simulator import SimulationError, TopicContext, clean, usable
from sim.store import SimStore
from sim.types import RunRecord, Side, UserSide, Utterance

log = logging.getLogger(__name__)

OnUtterance = Callable[[Utterance], None]


class RunElsewhere(SimulationError):
    """Another driver (a second tab, ``pal simulate``) advances this run now."""


@dataclass
class Simulation:
    record: RunRecord
    ctx: TopicContext
    store: SimStore
    simulator: UserSide
    assistant: Assistant
    ended_by_user: bool = False
    driver: str | None = None  # this driver's name; None: no lease taken (tests, single-process tools)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    # ------------------------------------------------------------------ what comes next

    def next_slot(self) -> tuple[int, Side, Act] | None:
        """(turn number, side, act) of the next utterance, or None when the dialogue is over."""
        utts = self.record.utterances
        if self.record.status in ("finished", "stopped"):
            return None
        if self.record.spec.mode == "fixed":
            schedule = self.record.schedule
            n = len(utts)
            if n >= 2 * len(schedule):
                return None
            turn = n // 2 + 1
            side: Side = "user" if n % 2 == 0 else "assistant"
            user_act, assistant_act = schedule[turn - 1]
            return turn, side, user_act if side == "user" else assistant_act
        return self._free_slot(utts)

    def _free_slot(self, utts: list[Utterance]) -> tuple[int, Side, Act] | None:
        if self.ended_by_user and len(utts) % 2 == 0:
            return None
        n = len(utts)
        turn = n // 2 + 1
        if turn > self.record.spec.max_turns:
            return None
        if n % 2 == 1:
            predictions = sum(1 for u in utts if u.act is Act.REQUIREMENT_PREDICTION)
            proposals = sum(1 for u in utts if u.act is Act.SOLUTION_PROPOSAL)
            return turn, "assistant", next_assistant_act(utts[-1].act, predictions, proposals)
        if n == 0:
            return turn, "user", Act.TOPIC_INQUIRY
        last = utts[-1].act
        if last is Act.FEEDBACK_RESPONSE:
            return None
        return turn, "user", (Act.REQUIREMENT_CONFIRMATION if last is Act.REQUIREMENT_PREDICTION
                              else Act.SOLUTION_FEEDBACK)

    # ------------------------------------------------------------------ doing it

    def step(self, human_text: str | None = None, on_token: Callable[[str], None] | None = None,
             on_query: Callable[[str], None] | None = None) -> Utterance | None:
        """Produce and save the next utterance (a person's words when ``human_text`` is given); ``on_token`` gets
        the text as it streams (either side: the simulator streams in fixed mode), ``on_query`` a retrieval
        assistant's memory-search query so far, before its reply (its last call: the query retrieval used)."""
        with self._lock:
            self._hold()
            self._sync()
            slot = self.next_slot()
            if slot is None:
                self._finish()
                return None
            turn, side, act = slot
            salt = f"{self.record.run_id}/{turn}/{side}"
            history = list(self.record.utterances)
            if human_text is not None:
                text = clean(human_text)
                if not usable(text):
                    raise SimulationError("the typed message is empty")
                utt = Utterance(turn_no=turn, side=side, actor="human", act=act, content=text)
            elif side == "user":
                utt, ended = self.simulator.say(turn, act, history, salt, on_token=on_token)
                self.ended_by_user = self.ended_by_user or (ended and self.record.spec.mode == "free")
            else:
                utt = self.assistant.say(turn, act, history, salt, on_token=on_token, on_query=on_query)
            if self.store.add_utterance(self.record.run_id, utt):
                self.record.utterances.append(utt)
            else:  # another driver saved this turn side first: take the stored run, never ask again
                self.reload()
            if self.next_slot() is None:
                self._finish()
            return utt

    def run(self, cancel: threading.Event | None = None, on_utterance: OnUtterance | None = None,
            human_sides: frozenset[str] = frozenset(), on_token: Callable[[str], None] | None = None) -> RunRecord:
        """Step until the end, a cancel, or a side a person has taken over; failures are saved on the run."""
        try:
            while (slot := self.next_slot()) is not None:
                if cancel is not None and cancel.is_set():
                    self.stop()
                    break
                if slot[1] in human_sides:
                    break
                utt = self.step(on_token=on_token)
                if utt and on_utterance:
                    on_utterance(utt)
        except RunElsewhere:
            raise  # another driver's run: nothing of it is ours to mark
        except (SimulationError, LLMError) as e:
            self.fail(str(e))
        return self.record

    def fail(self, error: str) -> None:
        """The run failed (an LLM error, no usable utterance): every saved utterance stays; resumable."""
        log.info("simulation %s failed: %s", self.record.run_id, error)
        self.record.status, self.record.error = "failed", error
        self.store.set_status(self.record.run_id, "failed", error)
        self.release()

    def resume(self) -> None:
        """A failed or stopped run continues from its next missing utterance."""
        if self.record.status in ("failed", "stopped"):
            self.record.status, self.record.error = "running", None
            self.store.set_status(self.record.run_id, "running")

    def stop(self) -> None:
        """End the run cleanly: every saved utterance stays."""
        self.record.status = "stopped"
        self.store.set_status(self.record.run_id, "stopped")
        self.release()

    def _hold(self) -> None:
        """Take or renew the run's lease; :class:`RunElsewhere` when another driver holds it."""
        if self.driver is None or self.store.take_lease(self.record.run_id, self.driver):
            return
        lease = self.store.driver(self.record.run_id)
        raise RunElsewhere(f"run {self.record.run_id} is running elsewhere (driven by "
                           f"{lease.holder if lease else 'another driver'}); following it read-only")

    def release(self) -> None:
        """Stop being the run's driver (another tab or process may take it at once)."""
        if self.driver is not None:
            self.store.release_lease(self.record.run_id, self.driver)

    def _sync(self) -> None:
        """Catch up with utterances another driver saved since this one last looked (a cheap read)."""
        if self.store.count_utterances(self.record.run_id) != len(self.record.utterances):
            self.reload()

    def reload(self) -> None:
        """The run's utterances and status as stored (another driver wrote some)."""
        stored = self.store.load(self.record.run_id)
        self.record.utterances = stored.utterances
        if stored.status == "finished":
            self.record.status, self.record.error = "finished", None

    def _finish(self) -> None:
        if self.record.status != "finished":
            self.record.status, self.record.error = "finished", None
            self.store.set_status(self.record.run_id, "finished")
        self.release()
