import pytest

from backends.prompts import PromptError, list_prompts, load_prompt, parse_prompt


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
