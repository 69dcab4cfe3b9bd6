import pytest

from backends.prompts import PromptError, language_label, list_prompts, load_prompt, parse_prompt


def test_prompt_front_matter_and_rendering(tmp_path):
    (tmp_path / "group").mkdir()
    (tmp_path / "group" / "ask.md").write_text("---\nversion: 3\ndescription: ask\n---\nUser: $name wants {\"json\": 1} ${thing}\n")
    p = load_prompt("group/ask", tmp_path)
    assert (p.name, p.version, p.label) == ("group/ask", "3", "group/ask@v3")
    assert p.placeholders == {"name", "thing"}
    assert p.render(name="Ann", thing="tea") == 'User: Ann wants {"json": 1} tea\n'
    with pytest.raises(PromptError, match="no value for thing"):
        p.render(name="Ann")
    assert [q.name for q in list_prompts(tmp_path)] == ["group/ask"]


def test_bad_prompt_files_are_named_in_errors(tmp_path):
    with pytest.raises(PromptError, match="needs a version"):
        parse_prompt("x", "---\ndescription: d\n---\nhi")
    with pytest.raises(PromptError, match="unknown front matter field 'author'"):
        parse_prompt("x", "---\nversion: 1\nauthor: me\n---\nhi")
    with pytest.raises(PromptError, match="no prompt 'missing'"):
        load_prompt("missing", tmp_path)
    with pytest.raises(PromptError, match="leaves the prompts folder"):
        load_prompt("../etc/passwd", tmp_path)


def test_every_shipped_prompt_loads_with_a_version():
    prompts = list_prompts()
    assert prompts and all(p.version for p in prompts)


def test_sections_become_messages_in_file_order_and_parts_render_alone(tmp_path):
    (tmp_path / "role.md").write_text("---\nversion: 1\n---\n[[system]]\nYou are $who.\n\n[[cue]]\nAct: $act.\n\n"
                                      "[[user]]\nContext: $context\nTask: $task\n")
    p = load_prompt("role", tmp_path)
    assert [name for name, _ in p.sections] == ["system", "cue", "user"]
    msgs = p.messages(who="a judge", context="shared", task="own")  # the cue's $act is not needed for messages
    assert msgs == [{"role": "system", "content": "You are a judge."},
                    {"role": "user", "content": "Context: shared\nTask: own"}]
    assert p.part("cue", act="Topic Inquiry") == "Act: Topic Inquiry."
    assert p.has_part("cue") and not p.has_part("nope")
    with pytest.raises(PromptError, match=r"no section \[\[nope\]\]"):
        p.part("nope")
    with pytest.raises(PromptError, match="no value for context"):
        p.messages(who="x", task="y")
    assert "You are x." in p.render(who="x", act="a", context="c", task="t")  # render: every section, in order
    plain = parse_prompt("plain", "---\nversion: 1\n---\nJust $x\n")
    assert plain.messages(x="this") == [{"role": "user", "content": "Just this\n"}]  # no sections: one user message


def test_a_section_named_twice_is_refused(tmp_path):
    with pytest.raises(PromptError, match="appears twice"):
        parse_prompt("x", "---\nversion: 1\n---\n[[user]]\na\n[[user]]\nb\n")


def test_language_variants_are_picked_for_their_language_unless_english_wording_is_asked(tmp_path, monkeypatch):
    (tmp_path / "g").mkdir()
    (tmp_path / "g" / "ask.md").write_text("---\nversion: 2\n---\nAnswer in $language.\n")
    (tmp_path / "g" / "ask.zh.md").write_text("---\nversion: 1\n---\n用$language回答。\n")
    assert load_prompt("g/ask", tmp_path).label == "g/ask@v2"
    assert load_prompt("g/ask", tmp_path, language="en").label == "g/ask@v2"
    zh = load_prompt("g/ask", tmp_path, language="zh")
    assert zh.label == "g/ask.zh@v1" and language_label(zh, "zh") == "简体中文"
    assert load_prompt("g/ask", tmp_path, language="fr").label == "g/ask@v2"  # no variant: the English file
    monkeypatch.setenv("PAL_PROMPT_WORDING", "english")
    english = load_prompt("g/ask", tmp_path, language="zh")
    assert english.label == "g/ask@v2" and language_label(english, "zh") == "Chinese (简体中文)"


def test_every_shipped_language_variant_has_its_base_prompts_sections_and_placeholders():
    for variant in [p for p in list_prompts() if p.name.endswith(".zh")]:
        base = load_prompt(variant.name.removesuffix(".zh"))
        names = {n for n, _ in base.sections} - {"example_user_en", "example_reply_en"}
        assert {n for n, _ in variant.sections} == names, variant.name
        assert variant.placeholders == base.placeholders, variant.name


def test_a_prompt_is_parsed_once_while_its_file_is_unchanged_and_again_when_it_changes(tmp_path):
    import os

    path = tmp_path / "p.md"
    path.write_text("---\nversion: 1\n---\nfirst $x\n", encoding="utf-8")
    first = load_prompt("p", tmp_path)
    assert load_prompt("p", tmp_path) is first
    path.write_text("---\nversion: 2\n---\nsecond $x\n", encoding="utf-8")
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))  # a new mtime even on a coarse clock
    again = load_prompt("p", tmp_path)
    assert (again.version, again.render(x="a").strip()) == ("2", "second a")


def test_a_prompts_sections_are_split_once_and_a_changed_file_renders_its_new_sections(tmp_path):
    import os

    path = tmp_path / "p.md"
    path.write_text("---\nversion: 1\n---\n[[system]]\nold $x\n[[cue]]\nsay $y\n", encoding="utf-8")
    first = load_prompt("p", tmp_path)
    assert first.sections is first.sections  # split once per prompt
    assert first.part("cue", y="hi") == "say hi" and first.has_part("cue") and not first.has_part("user")
    with pytest.raises(PromptError, match="no value for y"):
        first.part("cue")
    path.write_text("---\nversion: 2\n---\n[[system]]\nnew $x\n[[user]]\nask $z\n", encoding="utf-8")
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    again = load_prompt("p", tmp_path)
    assert again.messages(x="a", z="b") == [{"role": "system", "content": "new a"}, {"role": "user", "content": "ask b"}]
    assert not again.has_part("cue") and again.placeholders == {"x", "z"}
    with pytest.raises(PromptError, match="no section"):
        again.part("cue", y="hi")
