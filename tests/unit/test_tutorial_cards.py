"""The landing page's cards (``_ext/tutorial_cards.py``) read each script and
its records once, and again only when one of those files, or the matrix,
changed."""

import json
from types import SimpleNamespace

import pytest
import tutorial_cards

from pagelib import records
from tests.support.pages import SMALL_BELOW as BELOW
from tests.support.pages import page_source, write_page_records

PAGE = page_source(summary="Some prose.", body="x = 1\n")
BELOW_FLOOR = {"result": "below-floor", "error": "needs PyTorch 2.8 or later"}


@pytest.fixture
def project(matrix_project, monkeypatch):
    source = matrix_project / "advanced" / "page.py"
    source.write_text(PAGE)
    write_page_records(
        matrix_project,
        "page",
        {BELOW: BELOW_FLOOR, "2.7.1": BELOW_FLOOR, "2.8.0": "pass", "2.9.1": "pass"},
    )
    reads = []
    real_read = records.read
    monkeypatch.setattr(
        records, "read", lambda *args: reads.append(args) or real_read(*args)
    )
    env = SimpleNamespace(srcdir=matrix_project, dependencies=set())
    env.note_dependency = env.dependencies.add
    return env, source, reads


def test_a_card_is_read_once_while_its_files_stay_the_same(project):
    env, source, reads = project
    first = tutorial_cards._read_card(env, source)
    first["problems"].append("a problem the directive adds to its copy")
    again = tutorial_cards._read_card(env, source)
    assert len(reads) == 1
    assert again["version"] == "2.8" and again["problems"] == []
    assert {str(source), str(env.srcdir / records.MATRIX)} <= env.dependencies


def test_a_changed_record_script_or_matrix_reads_the_card_again(project):
    env, source, reads = project
    assert tutorial_cards._read_card(env, source)["version"] == "2.8"
    path = env.srcdir / records.RECORDS / "page.json"
    written = json.loads(path.read_text())
    written["2.9.1"]["result"] = "fail"
    path.write_text(json.dumps(written, indent=2))
    assert tutorial_cards._read_card(env, source)["version"] is None
    matrix = env.srcdir / records.MATRIX
    matrix.write_text(matrix.read_text() + "\n")
    tutorial_cards._read_card(env, source)
    source.write_text(PAGE.replace("Some prose.", "Other prose."))
    tutorial_cards._read_card(env, source)
    tutorial_cards._read_card(env, source)
    assert len(reads) == 4
