"""The Chinese edition's rewrites of Sphinx-Gallery's own text (_ext/editions.py),
with the strings of the site catalog as the build has them."""

import gettext
import io
from pathlib import Path
from types import SimpleNamespace

import pytest
import sphinx.locale
import translated_gallery
from babel.messages.mofile import write_mo
from babel.messages.pofile import read_po
from docutils import nodes

from pagelib import layout

SITE_PO = Path(translated_gallery.__file__).parent / "locale/zh_CN/LC_MESSAGES/site.po"


@pytest.fixture
def chinese(monkeypatch):
    """A Chinese build's app, with site.po as our extensions' catalog."""
    with SITE_PO.open("rb") as handle:
        catalog = read_po(handle)
    compiled = io.BytesIO()
    write_mo(compiled, catalog)
    compiled.seek(0)
    monkeypatch.setitem(
        sphinx.locale.translators,
        ("general", layout.SITE_CATALOG),
        gettext.GNUTranslations(compiled),
    )
    return SimpleNamespace(config=SimpleNamespace(language="zh_CN"))


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
    summary, title = translated_gallery.intro_and_title(SCRIPT, "internals.py")
    assert title == "深入 custom_op 内部"  # Latin words keep their spaces
    assert summary == (
        "它会在 PyTorch 的算子注册表，即分发器（dispatcher）中留下条目；"
        "``custom_op`` 是一个装饰器，不是一个 dispatch key。"
    )


def test_an_english_thumbnail_is_as_sphinx_gallery_writes_it():
    from sphinx_gallery.gen_rst import extract_intro_and_title

    script = '"""\nTitle\n=====\n\nThe *dispatcher* and **bold** text, a * b.\n"""\n'
    docstring = "Title\n=====\n\nThe *dispatcher* and **bold** text, a * b."
    assert translated_gallery.intro_and_title(
        script, "x.py"
    ) == extract_intro_and_title("x.py", docstring)


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
