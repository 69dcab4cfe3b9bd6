"""The rulebook (sim.rulebook): every registered rule's data files exist and match its registration, every entry's
example is matched by the entry itself, every reason the simulator gives names its rule, and a changed data file
changes the fingerprint stored findings carry."""

import re
import shutil

import pytest

from sim import rulebook
from sim.persona_check import HiddenNeed, user_turn_reasons
from sim.rulebook import RULES, RulebookError, compile_label, entry_regex, load_rule_data, rule_of_reason

DATA_RULES = [(r.id, lang) for r in RULES.values() if r.reads_data for lang in r.languages]


@pytest.mark.parametrize("rule_id, language", DATA_RULES)
def test_each_data_rule_has_a_valid_file_per_language(rule_id, language):
    data = load_rule_data(rule_id, language)
    assert data.entry, f"{rule_id}.{language}: no entries"
    for entry in data.entry:
        re.compile(entry_regex(entry))
        assert entry.source.strip(), f"{rule_id}.{language}: {entry.pattern!r} names no source"


@pytest.mark.parametrize("rule_id, language", DATA_RULES)
def test_every_example_is_matched_by_its_own_entry(rule_id, language):
    bounded = rule_id == "stance" and language == "en"
    for entry in load_rule_data(rule_id, language).entry:
        if entry.example:
            assert compile_label([entry], bounded, False).search(entry.example), (entry.pattern, entry.example)


def test_no_data_file_without_a_registered_rule():
    registered = {f"{rule_id}.{lang}.toml" for rule_id, lang in DATA_RULES}
    assert {p.name for p in rulebook.RULES_DIR.glob("*.toml")} == registered


def test_a_file_that_does_not_match_its_registration_is_named(tmp_path, monkeypatch):
    shutil.copytree(rulebook.RULES_DIR, tmp_path / "rules")
    path = tmp_path / "rules" / "stance.en.toml"
    path.write_text(re.sub(r"(?m)^version = \d+$", "version = 99", path.read_text(encoding="utf-8"), count=1),
                    encoding="utf-8")
    monkeypatch.setattr(rulebook, "RULES_DIR", tmp_path / "rules")
    load_rule_data.cache_clear()
    try:
        with pytest.raises(RulebookError, match="stance.en.toml"):
            load_rule_data("stance", "en")
    finally:
        load_rule_data.cache_clear()


def test_the_fingerprint_follows_what_the_rules_read_not_their_documentation(tmp_path, monkeypatch):
    before = rulebook.rulebook_version()
    shutil.copytree(rulebook.RULES_DIR, tmp_path / "rules")
    path = tmp_path / "rules" / "persona.offer.en.toml"
    original = path.read_text(encoding="utf-8")
    monkeypatch.setattr(rulebook, "RULES_DIR", tmp_path / "rules")
    documented = re.sub(r"(?m)^example = .*$", "example = 'How may I help?'", original, count=1)
    path.write_text(documented + "\n# one more line\n", encoding="utf-8")
    assert rulebook.rulebook_version() == before  # an example, a source or a comment finds nothing
    path.write_text(original.replace("[[entry]]", "[[entry]]\nlabel = 'offer'\npattern = 'at your service'\n"
                                     "example = 'At your service.'\nsource = 'written for this test'\n\n[[entry]]",
                                     1), encoding="utf-8")
    assert rulebook.rulebook_version() != before  # one more pattern finds more


@pytest.mark.parametrize("rule_id, language", DATA_RULES)
def test_every_entry_has_an_example_and_says_where_it_came_from(rule_id, language):
    missing = [e.pattern for e in load_rule_data(rule_id, language).entry if not e.example.strip()]
    assert missing == [], f"{rule_id}.{language}: entries without an example"
    assert all("no example found" not in e.source for e in load_rule_data(rule_id, language).entry)


@pytest.mark.parametrize("text, language, rule_id", [
    ("How can I help you today?", "en", "persona.offer"),
    ("The user wants a cheaper option.", "en", "persona.narrates_user"),
    ("用户想要一个便宜的办法。", "zh", "persona.narrates_user"),
    ("Dear assistant,", "en", "persona.salutation"),
    ("Which hidden need should I confirm here, honestly, if I may ask at all?", "en", "persona.prompt_talk"),
    ("这个方案对我来说太贵了，我们家负担不起。", "en", "persona.language"),
    ("Finding a reliable childminder near the station for Tuesdays is proving difficult lately.", "en",
     "persona.first_person"),
])
def test_every_reason_names_the_rule_that_gave_it(text, language, rule_id):
    reasons = user_turn_reasons(text, language, [], "", [])
    assert rule_id in {rule_of_reason(r) for r in reasons}, reasons


def test_the_guard_rules_beyond_persona_name_themselves():
    hidden = HiddenNeed(texts=("I need a swap partner for Boxing Day night",), query="shift swaps?")
    earlier = ["I need a swap partner for Boxing Day night, nobody answers."]
    reasons = user_turn_reasons("I need a swap partner for Boxing Day night, nobody answers.", "en", [], "", earlier,
                                hidden)
    assert {rule_of_reason(r) for r in reasons} >= {"turn.repeat", "turn.gives_away"}
    assert all(RULES[rule_of_reason(r) or ""].guard for r in reasons)


def test_the_stance_rule_is_no_guard():
    assert not RULES["stance"].guard and "stance" not in rulebook.guard_rules()
