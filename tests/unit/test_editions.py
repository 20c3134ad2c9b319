"""The Chinese edition's rewrites of Sphinx-Gallery's own text
(_ext/translated_gallery.py) and the links between editions (_ext/editions.py),
with the strings of the site catalog as the build has them."""

from types import SimpleNamespace

import editions
import pytest
import translated_gallery
from docutils import nodes

from pagelib import thumbnails


def running_time_paragraph():
    """The paragraph Sphinx-Gallery ends every example page with."""
    paragraph = nodes.paragraph(classes=["sphx-glr-timing"])
    paragraph += nodes.strong(text="Total running time of the script:")
    paragraph += nodes.Text(" (0 minutes 2.392 seconds)")
    page = nodes.section()
    page += paragraph
    return page


def test_the_running_time_reads_as_chinese_with_no_gap_after_the_label(chinese):
    page = running_time_paragraph()
    translated_gallery.translate_running_time(chinese, page)
    (paragraph,) = page.children
    assert paragraph["classes"] == ["sphx-glr-timing"]
    assert paragraph[0].astext() == "脚本总运行时间："  # the bold label
    assert paragraph.astext() == "脚本总运行时间：0 分 2.392 秒"


def test_an_english_page_keeps_its_running_time():
    page = running_time_paragraph()
    english = SimpleNamespace(config=SimpleNamespace(language="en"))
    translated_gallery.translate_running_time(english, page)
    assert (
        page.astext() == "Total running time of the script: (0 minutes 2.392 seconds)"
    )


SCRIPT = '''"""
深入 *custom_op* 内部
=====================

它会在 PyTorch 的算子注册表，即 *分发器（dispatcher）*
中留下条目；``custom_op`` 是一个 *装饰器*，
**不是** 一个 *dispatch key* 。
"""
'''


def test_a_chinese_thumbnail_keeps_no_gap_where_emphasis_was():
    summary, title = thumbnails.intro_and_title(SCRIPT, "internals.py")
    assert title == "深入 custom_op 内部"  # Latin words keep their spaces
    assert summary == (
        "它会在 PyTorch 的算子注册表，即分发器（dispatcher）中留下条目；"
        "``custom_op`` 是一个装饰器，不是一个 dispatch key。"
    )


def test_an_english_thumbnail_is_as_sphinx_gallery_writes_it():
    from sphinx_gallery.gen_rst import extract_intro_and_title

    script = '"""\nTitle\n=====\n\nThe *dispatcher* and **bold** text, a * b.\n"""\n'
    docstring = "Title\n=====\n\nThe *dispatcher* and **bold** text, a * b."
    assert thumbnails.intro_and_title(script, "x.py") == extract_intro_and_title(
        "x.py", docstring
    )


def test_computation_times_are_translated_before_sphinx_records_the_title():
    """Sphinx's TitleCollector takes the page's <title> and breadcrumb from the
    doctree at doctree-read, with the default priority (500)."""
    connected = {}
    app = SimpleNamespace(
        config=SimpleNamespace(language="en"),  # setup() connects the same
        connect=lambda event, handler, priority=500: connected.update(
            {(event, handler): priority}
        ),
    )
    translated_gallery.setup(app)
    assert connected["doctree-read", translated_gallery.translate_execution_times] < 500


@pytest.mark.parametrize(
    "text, shown",
    [
        # Roles and literals touching Chinese characters, which Sphinx-Gallery's
        # clean-up (a space before them) leaves alone.
        ("用:func:`torch.compile`编译", "用torch.compile编译"),
        ("见:ref:`这一页 <sphx_glr_tutorials_a.py>`。", "见这一页。"),
        ("用:class:`~torch.Tensor`、``out``：", "用torch.Tensor、out："),
        ("一个\\ ``literal``\\ 值", "一个literal值"),
        ("见`文档 <https://example.org>`__。", "见文档。"),
        ("`强调`的词", "强调的词"),
        ("plain text stays", "plain text stays"),
    ],
)
def test_leftover_markup_is_removed_from_a_chinese_intro(text, shown):
    assert thumbnails.leftover_markup(text) == shown


@pytest.mark.parametrize(
    "language, page, links",
    [
        (
            "en",
            "tutorials/page",
            [
                ("English", "page.html", "en", True),
                ("简体中文", "../zh_CN/tutorials/page.html", "zh-Hans", False),
            ],
        ),
        (
            "zh_CN",
            "tutorials/page",
            [
                ("English", "../../tutorials/page.html", "en", False),
                ("简体中文", "page.html", "zh-Hans", True),
            ],
        ),
        (
            "zh_CN",
            "index",
            [
                ("English", "../index.html", "en", False),
                ("简体中文", "index.html", "zh-Hans", True),
            ],
        ),
        (
            None,  # a build that names no language is the English one
            "index",
            [
                ("English", "index.html", "en", True),
                ("简体中文", "zh_CN/index.html", "zh-Hans", False),
            ],
        ),
    ],
)
def test_edition_links_are_relative_to_the_page(language, page, links):
    app = SimpleNamespace(config=SimpleNamespace(language=language))
    assert editions.edition_links(app, page) == links
