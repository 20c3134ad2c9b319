"""tools/catalogs.py's check of a translated catalog: every message
translated, none fuzzy, no English prose left in a translation."""

import catalogs


def write_po(folder, entries):
    path = folder / "page.po"
    path.write_text(
        'msgid ""\nmsgstr ""\n"Content-Type: text/plain; charset=UTF-8\\n"\n\n'
        + "".join(entries),
        encoding="utf-8",
    )
    return path


def test_a_complete_catalog_has_no_problems(tmp_path, monkeypatch):
    monkeypatch.setattr(catalogs, "REPO", tmp_path)
    path = write_po(
        tmp_path,
        [
            'msgid "A page"\nmsgstr "一页"\n\n',
            'msgid "Call ``torch.compile``."\nmsgstr "调用 ``torch.compile``。"\n\n',
        ],
    )
    assert catalogs.problems_in(path, "zh_CN") == []


def test_fuzzy_untranslated_and_english_left_are_named(tmp_path, monkeypatch):
    monkeypatch.setattr(catalogs, "REPO", tmp_path)
    path = write_po(
        tmp_path,
        [
            '#, fuzzy\nmsgid "Old words"\nmsgstr "旧的话"\n\n',
            'msgid "Not yet"\nmsgstr ""\n\n',
            'msgid "Run the whole suite"\nmsgstr "运行 the whole suite"\n\n',
        ],
    )
    problems = catalogs.problems_in(path, "zh_CN")
    assert problems[:2] == [
        "page.po: fuzzy: 'Old words'",
        "page.po: untranslated: 'Not yet'",
    ]
    (english,) = problems[2:]
    assert english.startswith("page.po: English left in the translation of ")
    assert "the whole suite" in english
