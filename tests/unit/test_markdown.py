"""reST prose to a notebook's Markdown (pagelib/markdown.py), construct by
construct, and an error naming what it cannot convert."""

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


def test_headings_take_their_depth_from_the_order_of_their_adornments():
    text = "Title\n=====\n\nText.\n\nSub\n---\n\nMore.\n\nSubsub\n~~~~~~\n\nEnd.\n"
    assert convert(text) == (
        "# Title\n\nText.\n\n## Sub\n\nMore.\n\n### Subsub\n\nEnd.\n"
    )
    # An overline makes another style than the same underline alone.
    assert convert("=====\nTop\n=====\n\nA\n=\n") == "# Top\n\n## A\n"


def test_heading_depths_are_shared_by_the_blocks_of_a_page():
    levels = {}
    resolve = None
    assert markdown.to_markdown("A\n=\n", levels, resolve) == "# A\n"
    assert markdown.to_markdown("B\n-\n\nC\n=\n", levels, resolve) == "## B\n\n# C\n"


def test_nested_bullet_lists_keep_their_indentation():
    text = "* one\n* two\n\n  second paragraph\n\n  * nested\n  * nested two\n* three\n"
    assert convert(text) == (
        "* one\n* two\n\n  second paragraph\n\n  * nested\n  * nested two\n* three\n"
    )


def test_an_enumerated_list_is_numbered_and_indents_its_paragraphs():
    assert convert("#. first\n#. second\n\n   more\n") == (
        "1. first\n2. second\n\n   more\n"
    )


def test_a_list_table_becomes_a_markdown_table():
    text = (
        ".. list-table::\n   :header-rows: 1\n\n"
        "   * - Name\n     - Value\n"
        "   * - ``a|b``\n     - one\n\n       two\n"
    )
    # A pipe in a cell is escaped, a cell's paragraphs are kept apart by <br>.
    assert convert(text) == (
        "| Name | Value |\n| --- | --- |\n| `a\\|b` | one<br>two |\n"
    )


def test_cards_of_a_grid_become_headed_sections():
    text = (
        ".. grid:: 2\n\n"
        "    .. grid-item-card:: Prerequisites\n\n"
        "       * PyTorch 2.8 or later\n\n"
        "    .. grid-item-card:: :octicon:`mortar-board;1em;` What you will learn\n"
        "       :class-card: learn\n\n"
        "       * a thing\n\n"
        "    .. grid-item-card::\n\n"
        "       No title.\n"
    )
    assert convert(text) == (
        "**Prerequisites**\n\n* PyTorch 2.8 or later\n\n"
        "**What you will learn**\n\n* a thing\n\nNo title.\n"
    )


def test_characters_markdown_reads_are_escaped_but_not_inner_underscores():
    text = "a * b [c] <d> custom_op _private back\\\\slash pipe|bar\n"
    assert convert(text) == (
        "a \\* b \\[c\\] \\<d\\> custom_op \\_private back\\\\slash pipe\\|bar\n"
    )


def test_an_inline_literal_holding_backticks_gets_longer_fences():
    assert convert("``a `b` c`` and ```x`` and ``plain``\n") == (
        "``a `b` c`` and `` `x `` and `plain`\n"
    )


def test_the_checklist_admonition_becomes_a_titled_quote():
    text = (
        ".. admonition:: Checklist\n   :class: checklist\n\n"
        "   #. Do it.\n   #. Check it.\n\n   Done.\n"
    )
    assert convert(text) == (
        "> **Checklist**\n>\n> 1. Do it.\n> 2. Check it.\n>\n> Done.\n"
    )


def test_named_admonitions_are_quotes_headed_by_their_kind():
    assert convert(".. warning::\n\n   Careful.\n\n.. tip::\n\n   Elsewhere.\n") == (
        "> **Warning**\n>\n> Careful.\n\n> **Tip**\n>\n> Elsewhere.\n"
    )


@pytest.mark.parametrize(
    "text, written",
    [
        ("Inline :math:`a^2` here.\n", "Inline $a^2$ here.\n"),
        (".. math::\n\n   x = y\n", "$$\nx = y\n$$\n"),
        (
            ".. image:: ../_static/a.png\n   :alt: An image\n",
            "![An image](../_static/a.png)\n",
        ),
        (".. rubric:: Footnotes\n", "**Footnotes**\n"),
        ("**bold**, *em* and `a title`\n", "**bold**, *em* and *a title*\n"),
        (
            "See `the docs <https://example.org/>`_ or https://example.org.\n",
            "See [the docs](https://example.org/) or "
            "[https://example.org](https://example.org).\n",
        ),
        (".. a comment\n\n.. _a-target:\n\nText after.\n", "Text after.\n"),
        (".. container:: box\n\n   Inside.\n", "Inside.\n"),
        ("Para.\n\n   Quoted.\n\n   Twice.\n", "Para.\n\n> Quoted.\n>\n> Twice.\n"),
        ("A link to a target_ here.\n\n.. _target:\n", "A link to a target here.\n"),
        (
            ":func:`torch.compile`, :py:class:`torch.Tensor`\n",
            "`torch.compile`, `torch.Tensor`\n",
        ),
        (
            ":class:`~torch.Tensor`, :func:`!torch.sin`, :func:`sin <torch.sin>`\n",
            "`Tensor`, `torch.sin`, `sin`\n",
        ),
        ("3. three\n4. four\n", "3. three\n4. four\n"),
        ("An _`inline target` here.\n", "An inline target here.\n"),
        (".. seealso::\n\n   Elsewhere.\n", "> **See also**\n>\n> Elsewhere.\n"),
    ],
    ids=[
        "inline math",
        "math block",
        "image",
        "rubric",
        "emphasis",
        "links",
        "comment and target",
        "container",
        "block quote",
        "internal link",
        "code roles",
        "code roles as Sphinx shows them",
        "a list starting at 3",
        "inline target",
        "see also",
    ],
)
def test_other_constructs(text, written):
    assert convert(text) == written


def test_code_blocks_are_fenced_with_their_language():
    text = (
        ".. code-block:: python\n\n   print(1)\n\n"
        ".. code-block::\n\n   plain\n\n"
        "Fence::\n\n   ```\n   inside\n"
    )
    # A block holding ``` is fenced with tildes.
    assert convert(text) == (
        "```python\nprint(1)\n```\n\n```\nplain\n```\n\nFence:\n\n~~~~\n```\ninside\n~~~~\n"
    )


def test_cross_references_are_resolved_by_the_caller():
    seen = []

    def resolve(role, target, shown):
        seen.append((role, target, shown))
        return "LINK"

    out = markdown.to_markdown(
        ":doc:`start_here` and :ref:`the basics <sphx_glr_a.py>`\n", {}, resolve
    )
    assert out == "LINK and LINK\n"
    assert seen == [("doc", "start_here", ""), ("ref", "sphx_glr_a.py", "the basics")]


@pytest.mark.parametrize(
    "text, named",
    [
        ("Text with `unclosed\n", "without end-string"),
        (":unknownrole:`x`\n", "unknownrole"),
        ("Text.\n\n.. raw:: html\n\n   <b>x</b>\n", "raw"),
    ],
)
def test_what_the_writer_cannot_read_is_an_error_naming_it(text, named):
    with pytest.raises(Exception, match=named):
        convert(text)
