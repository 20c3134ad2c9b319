"""A page's catalog into a translated script (pagelib/translation.py), and the
catalog checks: English left in a translation, a space before a Chinese link."""

import ast
import re

import pytest

from pagelib import translation
from tests.support.pages import REPO

EXAMPLES = sorted(p.stem for p in (REPO / "advanced").glob("*.py"))
LANGUAGE = "zh_CN"

SCRIPT = '''"""
Title
=====

A first paragraph that is long enough to be wrapped when it is
translated.
"""

x = 1

# %%
# A heading
# ---------
#
# * an item
'''

MESSAGES = {
    "Title": "标题很长",
    "A first paragraph that is long enough to be wrapped when it is translated.": (
        "第一段 " * 40
    ),
    "A heading": "一个标题",
    "an item": "一项",
}


def test_a_script_is_translated_around_unchanged_code():
    text, missing = translation.translate_script(SCRIPT, MESSAGES)
    assert missing == []
    assert "x = 1" in text and "A first paragraph" not in text
    assert "# * 一项" in text


def test_headings_get_adornments_as_wide_as_their_translation():
    text, _ = translation.translate_script(SCRIPT, MESSAGES)
    lines = text.split("\n")
    title = lines.index("标题很长")
    assert lines[title + 1] == "=" * 8  # four wide characters
    heading = lines.index("# 一个标题")
    assert lines[heading + 1] == "# " + "-" * 9  # as long as the old underline


def test_long_translations_are_wrapped_within_the_width():
    text, _ = translation.translate_script(SCRIPT, MESSAGES)
    assert max(translation.display_width(line) for line in text.split("\n")) <= 81


def test_messages_are_found_across_line_breaks():
    pattern = translation.message_pattern("one two three")
    assert pattern.search("one\n   two three")
    assert not pattern.search("one two four")


def test_a_message_not_in_the_script_is_reported():
    _, missing = translation.translate_script(SCRIPT, {"Not here": "不在"})
    assert missing == ["Not here"]


def test_wrap_keeps_reST_escapes_together():
    wrapped = translation.wrap("算子\\ ``crop``\\ 的 " * 10, 0, 0)
    assert all(not line.endswith("\\") for line in wrapped.split("\n"))


def test_fix_adornments_widens_over_and_underlines():
    fixed = translation.fix_adornments("===\n中文标题\n===\n")
    assert fixed.split("\n")[:3] == ["=" * 8, "中文标题", "=" * 8]


def test_english_left_in_a_translation_is_found_outside_literals():
    find = translation.english_in_translation
    assert find("加载器记录它“failed to resolve”该算子") == ["failed to resolve"]
    assert find("加载器记录它无法解析（``failed to resolve``）该算子") == []
    assert find("见 :ref:`the page on strides <strides>` 一节") == []
    assert find("用 PyTorch 的 torch.compile 编译 Triton 内核") == []


TITLES = {
    ("ref", "sphx_glr_tutorials_mutable_custom_ops.py"): "函数式算子与可变算子",
    ("ref", "edge-unbacked-minimum-two"): "``create_unbacked_symint`` 假定至少为 2",
    ("doc", "api_index"): "API 索引",
    ("doc", "tutorials/index"): "教程",
}


def spaced(message, docname=None):
    return translation.spaces_beside_chinese_links(message, TITLES, docname)


def test_a_space_between_chinese_and_a_chinese_link_is_found():
    # A hyperlink's own text, a reference to a translated title, either side.
    assert spaced("用 pip 安装 `它的 wheel 包 <w.whl>`_。") == ["它的 wheel 包"]
    assert spaced("见 :ref:`sphx_glr_tutorials_mutable_custom_ops.py`。") == [
        "函数式算子与可变算子"
    ]
    assert spaced("（:ref:`x <sphx_glr_tutorials_mutable_custom_ops.py>` 一节）") == []
    assert spaced("（:ref:`某一节 <anywhere>` 一节）") == ["某一节"]
    # The title's own ends decide: "API 索引" starts with a Latin word.
    assert spaced("本页的 :doc:`api_index` 列出") == ["API 索引"]
    assert spaced("本页的 :doc:`api_index`，列出") == []
    # A :doc: target relative to the catalog's document; an absolute one.
    assert spaced("回到 :doc:`index`。", "tutorials/sharp_edges") == ["教程"]
    assert spaced("回到 :doc:`/api_index`。", "tutorials/sharp_edges") == []
    assert spaced("回到 :doc:`index`。") == []  # no such document: unknown


def test_a_chinese_link_without_a_visible_space_passes():
    assert spaced("用 pip 安装\\ `它的 wheel 包 <w.whl>`_\\ 即可。") == []
    assert spaced("见\\ :ref:`sphx_glr_tutorials_mutable_custom_ops.py`。") == []
    assert spaced("相关页面：:ref:`sphx_glr_tutorials_mutable_custom_ops.py`、") == []
    # A title that starts with a literal reads as Latin: its space stays.
    assert spaced("见 :ref:`edge-unbacked-minimum-two` 一节") == []
    # Code and literals are not links; an English link keeps its spaces.
    assert spaced("调用 :func:`torch.compile` 编译") == []
    assert spaced("调用 ``torch.compile`` 编译") == []
    assert spaced("阅读 `the forum <https://discuss.pytorch.org/>`_ 上的讨论") == []


def prose_of(script):
    """A script's prose (docstring and comment blocks), comment marks removed."""
    lines = script.split("\n")
    prose = "\n".join(
        "\n".join(lines[first : last + 1])
        for first, last, _ in translation.prose_regions(lines, script)
    )
    return re.sub(r"^# ?", "", prose, flags=re.M)


def prose_messages(name, messages):
    """(English, translation) of the page's messages that its prose contains."""
    prose = prose_of((REPO / "advanced" / f"{name}.py").read_text())
    return [
        (english, chinese)
        for english, chinese in messages.items()
        if translation.message_pattern(english).search(prose)
    ]


@pytest.mark.parametrize("name", EXAMPLES)
def test_a_translated_script_keeps_the_code_and_translates_the_prose(name):
    english = (REPO / "advanced" / f"{name}.py").read_text()
    messages = translation.catalog(REPO, LANGUAGE, f"tutorials/{name}")
    chinese, _ = translation.translate_script(english, messages)

    def code(text):
        tree = ast.parse(text)
        tree.body = tree.body[1:]  # the module docstring is prose
        return ast.dump(tree)

    assert code(chinese) == code(english), "the Chinese script's code differs"
    translated = prose_messages(name, messages)
    assert translated, f"no message of {name}'s catalog occurs in its script"
    plain = prose_of(chinese)
    left = [
        english_text[:60]
        for english_text, chinese_text in translated
        if english_text != chinese_text
        and re.search(
            rf"(?<!\w){translation.message_pattern(english_text).pattern}(?!\w)", plain
        )
    ]
    assert not left, f"English prose left in the Chinese script: {left}"


def test_link_targets_are_where_links_point_not_what_they_show():
    targets = translation.link_targets
    assert targets(
        "See :ref:`Steps <steps>` and `the docs <https://x.example>`__."
    ) == [
        ("ref", "steps"),
        ("url", "https://x.example"),
    ]
    # The shown text, a ~ or a case change of a label does not move a link.
    assert targets(":func:`~torch.compile`, :ref:`步骤 <STEPS>`") == targets(
        ":py:func:`torch.compile`, :ref:`steps`"
    )
    assert targets("``:ref:`x` in a literal`` and `default role`") == []
    assert targets(":doc:`a`") != targets(":doc:`b`")
