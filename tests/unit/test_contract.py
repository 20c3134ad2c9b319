"""The page template and the code digest (pagelib/contract.py): what a prose
edit keeps, what a code edit changes, and the card fields a script's
docstring gives."""

import textwrap

import pytest

from pagelib import contract
from tests.support.pages import NO_VERSION, page_source

PAGE = page_source(
    summary="Some prose.",
    body=textwrap.dedent('''\
        # A comment about the code.
        SOURCE = """
        #include <torch/library.h>  // a C++ comment is part of the string
        """

        # %%
        # More prose, a heading
        # ---------------------
        #
        # and a paragraph.

        x = 1  # trailing comment
    '''),
)


def digest(tmp_path, text):
    path = tmp_path / "page.py"
    path.write_text(text, encoding="utf-8")
    return contract.code_digest(path)


@pytest.mark.parametrize(
    "edit",
    [
        lambda t: t.replace("Some prose.", "Some other prose."),
        lambda t: t.replace("A Page\n======", "A Renamed Page\n=============="),
        lambda t: t.replace("# and a paragraph.", "# and a longer paragraph."),
        lambda t: t.replace("# A comment about the code.", "# Another comment."),
        lambda t: t.replace("# trailing comment", "# other words"),
        lambda t: t.replace("x = 1", "\n\nx = 1   "),
    ],
    ids=["docstring", "title", "text block", "comment", "trailing", "blank lines"],
)
def test_prose_edits_keep_the_code_digest(tmp_path, edit):
    assert edit(PAGE) != PAGE
    assert digest(tmp_path, edit(PAGE)) == digest(tmp_path, PAGE)


@pytest.mark.parametrize(
    "edit",
    [
        lambda t: t.replace("x = 1", "x = 2"),
        lambda t: t.replace("a C++ comment", "another C++ comment"),
        lambda t: t.replace("< (2, 8)", "< (2, 9)"),
        lambda t: t + "\nprint(x)\n",
    ],
    ids=["statement", "string literal", "floor check", "new line"],
)
def test_code_edits_change_the_code_digest(tmp_path, edit):
    assert digest(tmp_path, edit(PAGE)) != digest(tmp_path, PAGE)


def test_code_digest_is_short_hex(tmp_path):
    value = digest(tmp_path, PAGE)
    assert len(value) == 16 and int(value, 16) >= 0


def test_floors_are_read_from_the_first_cell_and_the_card():
    assert contract.declared_floors(PAGE) == ("2.8", "2.8")
    assert contract.stated_floors(PAGE) == ["2.8"]
    assert contract.declared_floors("print(1)\n") == (None, None)


def test_disabling_the_floor_check_keeps_its_message():
    probed = contract.disable_floor_check(PAGE)
    assert "< (0, 0):" in probed and "needs PyTorch 2.8 or later" in probed
    assert contract.declared_floors(probed) == ("0.0", "2.8")


def test_devices_line_is_read_from_output():
    out = "noise\nPyTorch 2.15.0+cpu; devices exercised: ['cpu', 'cuda']\nmore\n"
    assert contract.devices_in_output(out) == ("2.15.0+cpu", ["cpu", "cuda"])
    assert contract.devices_in_output("nothing\n") == (None, None)


def test_below_floor_message_is_recognised():
    line = "This page needs PyTorch 2.8 or later; this is 2.7.1+cu126."
    assert contract.BELOW_FLOOR.search(line).group(1) == "2.8"


def test_page_size_counts_prose_words_and_code_lines(tmp_path):
    path = tmp_path / "page.py"
    path.write_text(PAGE)
    words, lines = contract.page_size(path)
    assert words > 10
    # Two imports, the two-line floor check, the devices line, the
    # three-line SOURCE string and x = 1; no comment or blank line.
    assert lines == 9


CARD_PAGE = page_source(summary="After this page you can do one thing, e.g. this.")


def test_the_card_fields_come_from_the_docstring(tmp_path):
    path = tmp_path / "page.py"
    path.write_text(CARD_PAGE)
    card = contract.read_script(path)
    assert card["title"] == "A Page"
    assert card["summary"] == "After this page you can do one thing, e.g. this."
    assert (card["version"], card["problems"]) == ("2.8", [])


def test_a_page_without_checklist_or_floor_bullet_has_problems(tmp_path):
    path = tmp_path / "page.py"
    path.write_text(
        CARD_PAGE.replace(".. admonition:: Checklist", ".. note::").replace(
            "PyTorch 2.8 or later", "a C++ compiler"
        )
    )
    problems = contract.read_script(path)["problems"]
    assert 'no "PyTorch X.Y or later" bullet' in problems[0]
    assert "no Checklist admonition" in problems[1]


def test_reading_a_script_finds_its_title_and_intro_and_reports_no_version(tmp_path):
    script = tmp_path / "page.py"
    script.write_text(NO_VERSION)
    card = contract.read_script(script)
    assert card["title"] == "A Page Without a Version"
    assert card["summary"] == ("This page forgot to say which PyTorch it needs.")
    assert card["version"] is None
    assert any("PyTorch X.Y or later" in p for p in card["problems"])
