"""The check registry (evaluation.simfidelity.registry): every check is registered once and the places that show checks
take them from it; a check reading a guard rule never counts a kept turn's pass as the model's success."""

from typing import get_args

import pytest

from evaluation.simfidelity import CHECK_DEFINITIONS, FIGURE_DEFINITIONS
from evaluation.simfidelity.checks import check_turn
from evaluation.simfidelity.registry import CHECK_LABELS, CHECKS, RATES, REGISTRY, REVIEWED, guarded
from evaluation.simfidelity.types import CheckName
from palset.vocab import Act
from sim.persona_check import GIVES_AWAY, REPEATS_EARLIER
from sim.rulebook import RULES, guard_rules
from sim.types import Draft, Utterance
from tests.evaluation.simfidelity.test_checks import ctx

OFFER = RULES["persona.offer"].reason
GUARDS = guard_rules()


def turn(text="I'd rather keep my Sundays free.", attempts=1, drafts=(), turn_no=2, act=Act.SOLUTION_DISCUSSION):
    return Utterance(turn_no=turn_no, side="user", actor="simulator", act=act, content=text, attempts=attempts,
                     drafts=list(drafts), drafts_kept=bool(drafts))


def test_every_check_is_registered_once_and_shown_from_the_registry():
    assert set(get_args(CheckName)) == set(CHECKS)
    assert set(CHECK_DEFINITIONS) == set(CHECK_LABELS) == set(CHECKS)
    assert set(RATES.values()) == set(CHECKS) and set(RATES) <= set(FIGURE_DEFINITIONS)
    for spec in REGISTRY.values():
        assert set(spec.rules) | set(spec.shaped_by) <= set(RULES), spec.name


def test_the_review_batch_asks_what_the_registry_says():
    from review.batches import TASKS

    task = TASKS["simturn"]
    asked = [q.key for q in task.questions if not q.free_text]
    assert asked == list(REVIEWED) and set(REVIEWED) <= set(CHECKS)
    for q in task.questions:
        if not q.free_text:
            assert q.label == REGISTRY[q.key].question and REGISTRY[q.key].guideline in task.guidelines


def test_a_turn_kept_at_once_or_without_guards_is_checked_on_its_text():
    assert guarded("persona", turn(), GUARDS) is None
    assert guarded("persona", turn(attempts=3), frozenset()) is None  # a reference simulator guards nothing


def test_a_stored_turn_asked_again_is_not_counted_as_the_models_success():
    found = guarded("persona", turn(attempts=2), GUARDS)
    assert found is not None and found.outcome == "n/a" and "not kept" in found.reason
    assert set(found.evidence["guarded_by"]) <= GUARDS


def test_a_first_draft_sent_back_by_the_checks_own_rule_fails_it():
    drafts = [Draft(text="How can I help you?", reasons=[OFFER]), Draft(text="I'd rather not.", kept=True)]
    found = guarded("persona", turn("I'd rather not.", attempts=2, drafts=drafts), GUARDS)
    assert found is not None and found.outcome == "fail" and found.evidence["guarded_by"] == ["persona.offer"]


def test_a_first_draft_sent_back_for_another_rule_leaves_the_kept_text_to_decide():
    drafts = [Draft(text="Sundays.", reasons=[REPEATS_EARLIER]), Draft(text="I'd rather not.", kept=True)]
    assert guarded("persona", turn("I'd rather not.", attempts=2, drafts=drafts), GUARDS) is None


def test_a_rule_that_shapes_a_check_makes_it_na():
    drafts = [Draft(text="I need a fair Christmas swap.", reasons=[GIVES_AWAY]), Draft(text="Rota help?", kept=True)]
    found = guarded("vague", turn("Rota help?", attempts=2, drafts=drafts, turn_no=1, act=Act.TOPIC_INQUIRY), GUARDS)
    assert found is not None and found.outcome == "n/a" and found.evidence["guarded_by"] == ["turn.gives_away"]


@pytest.mark.parametrize("guards, outcome", [(GUARDS, "fail"), (frozenset(), "pass")])
def test_check_turn_reports_the_guard(table, guards, outcome):
    _emb, matcher = table
    drafts = [Draft(text="How can I help you?", reasons=[OFFER]), Draft(text="I'd rather not.", kept=True)]
    checks = check_turn(turn("I'd rather not.", attempts=2, drafts=drafts), [], ctx(matcher, guards=guards))
    assert checks.get("persona").outcome == outcome


def test_a_new_rulebook_makes_new_results_and_old_ones_stay_readable(monkeypatch):
    from evaluation.simfidelity import service
    from evaluation.simfidelity.types import RunFidelity, SimFidelityConfig
    from sim.types import RunRecord, RunSpec

    rec = RunRecord(run_id="r", spec=RunSpec(dataset="d", user_id="u", sample_id="s", topic_key="t", method="m"))
    before = service.result_key(rec, "e", 0.5, SimFidelityConfig(), None)
    monkeypatch.setattr(service, "rulebook_version", lambda: "another")
    assert service.result_key(rec, "e", 0.5, SimFidelityConfig(), None) != before
    old = RunFidelity(run_id="r", dataset="d", user_id="u", sample_id="s", topic_key="t", method="m", mode="fixed",
                      simulator="llm", simulator_model="x", status="finished", utterances=0, embedder="e",
                      threshold=0.5, config=SimFidelityConfig(), checks_version="5").model_dump(mode="json")
    old.pop("rulebook")  # a result stored before checks v7 has no rulebook
    assert RunFidelity.model_validate(old).checks_version == "5"


def test_the_exports_take_their_columns_from_the_registry():
    from evaluation.simfidelity.export import BOARD_COLUMNS, SHORT_HEADS

    assert {s.figure for s in REGISTRY.values()} <= set(BOARD_COLUMNS)
    assert all(k in SHORT_HEADS for k in BOARD_COLUMNS)
