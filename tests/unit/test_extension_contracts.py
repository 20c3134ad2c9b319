"""The contracts between the extensions, stated in pagelib/layout.py and
checked here: the order of their work on ``builder-inited``, the folder one
writes and another reads, what a notebook's cache key covers, and the
version of the data an extension keeps on the build environment."""

import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace
from unittest import mock

import notebooks
import translated_downloads
import tutorial_cards
import verified_stamp
from sphinx_gallery import gen_gallery

from pagelib import layout, records, run_record

REPO = Path(__file__).resolve().parents[2]


def builder_inited(setup):
    """{handler name: priority} that ``setup`` connects to builder-inited."""
    app = mock.MagicMock()
    setup(app)
    return {
        call.args[1].__name__: call.kwargs.get("priority", 500)
        for call in app.connect.call_args_list
        if call.args[0] == "builder-inited"
    }


def test_builder_inited_runs_stamp_gallery_notebooks_then_translations_in_order():
    gallery = builder_inited(gen_gallery.setup)["generate_gallery_rst"]
    chain = [
        builder_inited(verified_stamp.setup)["force_run_of_unrecorded"],
        gallery,
        builder_inited(notebooks.setup)["write_notebooks"],
        builder_inited(translated_downloads.setup)["make_downloads"],
    ]
    assert gallery == layout.SPHINX_GALLERY_PRIORITY
    assert chain == [
        layout.FORCE_RUNS_PRIORITY,
        layout.SPHINX_GALLERY_PRIORITY,
        layout.NOTEBOOKS_PRIORITY,
        layout.TRANSLATED_DOWNLOADS_PRIORITY,
    ]
    assert chain == sorted(chain) and len(set(chain)) == len(chain)


def test_the_translated_downloads_folder_is_the_one_layout_names(tmp_path):
    app = SimpleNamespace(srcdir=tmp_path, config=SimpleNamespace(language="zh_CN"))
    assert translated_downloads.folder_for(app) == tmp_path / "tutorials_zh_CN"
    assert (
        layout.translated_downloads(tmp_path, "zh_CN") == tmp_path / "tutorials_zh_CN"
    )


def test_a_notebooks_cache_key_covers_the_modules_that_shape_it():
    covered = set(notebooks.code_files())
    for module in (notebooks, records, run_record):
        assert module.__file__ in {str(path) for path in covered}, module.__name__


def test_data_kept_on_the_environment_is_versioned():
    metadata = tutorial_cards.setup(mock.MagicMock())
    assert isinstance(metadata.get("env_version"), int)


def test_a_new_top_level_page_counts_among_the_translated_editions_inputs(tmp_path):
    shutil.copy(REPO / "Makefile", tmp_path)
    (tmp_path / "new_page.rst").write_text("New\n===\n")
    database = subprocess.run(
        ["make", "-pn", "-C", str(tmp_path), "VENV=unused", "clean"],
        capture_output=True,
        text=True,
    ).stdout
    (inputs,) = [
        line for line in database.splitlines() if line.startswith("EDITION_INPUTS :=")
    ]
    assert "new_page.rst" in inputs.split()
