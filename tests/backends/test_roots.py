"""Folders resolve inside PAL_DATA_ROOTS (default: the project's data/ and PAL_HOME) or are refused."""

import os

import pytest

from backends.paths import PROJECT_ROOT
from backends.roots import OutsideRoots, data_roots, inside_roots


def test_default_roots_are_the_project_data_folder_and_pal_home(tmp_path, monkeypatch):
    monkeypatch.setenv("PAL_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("PAL_DATA_ROOTS", raising=False)
    assert data_roots() == [(PROJECT_ROOT / "data").resolve(), (tmp_path / "home").resolve()]
    assert inside_roots(PROJECT_ROOT / "data" / "demo") == (PROJECT_ROOT / "data" / "demo").resolve()
    assert inside_roots(tmp_path / "home" / "new" / "folder").is_relative_to(tmp_path / "home")


@pytest.mark.parametrize("bad", ["/", "~", "/etc", "{root}/../outside", "{root}/link/secret", ""])
def test_anything_outside_the_roots_is_refused_with_a_clear_message(tmp_path, bad):
    root = tmp_path / "root"
    (root / "ok").mkdir(parents=True)
    (tmp_path / "outside").mkdir()
    os.symlink(tmp_path / "outside", root / "link")
    with pytest.raises(OutsideRoots) as e:
        inside_roots(bad.format(root=root), [root.resolve()])
    assert (str(root) in str(e.value) and "PAL_DATA_ROOTS" in str(e.value)) or bad == ""
    assert inside_roots(f"{root}/ok/../ok", [root.resolve()]) == (root / "ok").resolve()


def test_pal_data_roots_lists_folders_with_the_path_separator(tmp_path):
    env = {"PAL_DATA_ROOTS": f"{tmp_path / 'a'}{os.pathsep}{tmp_path / 'b'}"}
    assert data_roots(env) == [(tmp_path / "a").resolve(), (tmp_path / "b").resolve()]
