from cli import progress as progress_mod


def test_progress_lines_say_what_is_done_and_extrapolate_the_time_left(monkeypatch, capsys):
    clock = iter([100.0, 110.0, 130.0])
    monkeypatch.setattr(progress_mod.time, "monotonic", lambda: next(clock))
    report = progress_mod.progress_printer("probe")
    report(1, 4, "run-1")  # 10 s for the first of four: 30 s left
    report(3, 4)  # 30 s for three: 10 s left
    out, err = capsys.readouterr()
    assert out == ""  # stdout stays clean for --json
    assert err.splitlines() == ["[probe 1/4] run-1 (about 30 s left)", "[probe 3/4] (about 10 s left)"]
