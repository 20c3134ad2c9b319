import pytest

from pagelib import markdown


def convert(text):
    def resolve(role, target, shown):
        return f"*{shown or target}*"

    return markdown.to_markdown(text, {}, resolve)


def test_inline_literals_and_emphasis():
    out = convert("Use ``opcheck`` on *every* operator.")
    assert out.strip() == "Use `opcheck` on *every* operator."


def test_a_cross_reference_becomes_its_text():
    out = convert("See :ref:`the basics <sphx_glr_tutorials_python_custom_ops.py>`.")
    assert "*the basics*" in out and ":ref:" not in out


def test_a_literal_block_becomes_fenced_code():
    out = convert("Run this::\n\n    make check\n")
    assert "```" in out and "make check" in out


def test_an_admonition_becomes_a_block_quote():
    out = convert(".. note::\n\n   Read this first.\n")
    assert out.lstrip().startswith(">") and "Read this first." in out


def test_an_unknown_directive_is_an_error_naming_it():
    with pytest.raises(Exception, match="mystery"):
        convert(".. mystery::\n\n   text\n")


def test_a_download_becomes_its_file_name_as_code():
    out = convert("Download :download:`the checker <operator_checker.py>` first.")
    assert out.strip() == "Download `the checker` first."
    assert convert(":download:`operator_checker.py`").strip() == "`operator_checker.py`"


def test_a_table_only_the_site_can_build_is_left_out():
    out = convert("Before.\n\n.. sharp-edges-table::\n\nAfter.\n")
    assert out.split() == ["Before.", "After."]
