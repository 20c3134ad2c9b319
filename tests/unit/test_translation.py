import ast
import re

import pytest

from pagelib import translation
from tests.pages import REPO

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
