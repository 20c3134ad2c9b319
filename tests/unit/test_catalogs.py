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


def test_a_space_beside_a_chinese_link_is_named(tmp_path, monkeypatch):
    monkeypatch.setattr(catalogs, "REPO", tmp_path)
    path = write_po(
        tmp_path,
        [
            'msgid "See :ref:`intro`."\nmsgstr "见 :ref:`intro`。"\n\n',
            'msgid "See :ref:`intro` too."\nmsgstr "也见\\\\ :ref:`intro`。"\n\n',
        ],
    )
    titles = {("ref", "intro"): "简介"}
    (problem,) = catalogs.problems_in(path, "zh_CN", titles)
    assert problem.startswith("page.po: a space between Chinese text and the link")
    assert "'简介'" in problem and "'See :ref:`intro`.'" in problem
    # Without the titles, a reference's text is unknown: nothing is said.
    assert catalogs.problems_in(path, "zh_CN") == []


def test_a_link_shows_its_titles_translation_from_its_documents_catalog(
    tmp_path, monkeypatch
):
    monkeypatch.setattr(catalogs, "REPO", tmp_path)
    folder = tmp_path / "locale" / "zh_CN" / "LC_MESSAGES" / "tutorials"
    folder.mkdir(parents=True)
    write_po(
        folder, ['msgid "``opcheck``, step by step"\nmsgstr "逐步使用 ``opcheck``"\n\n']
    )
    (folder / "page.po").rename(folder / "a.po")
    targets = {
        ("ref", "steps"): ("tutorials/a", "opcheck, step by step"),
        ("doc", "tutorials/a"): ("tutorials/a", "opcheck, step by step"),
        ("ref", "elsewhere"): ("tutorials/b", "Untranslated"),
    }
    assert catalogs.link_titles(targets, "zh_CN") == {
        ("ref", "steps"): "逐步使用 ``opcheck``",
        ("doc", "tutorials/a"): "逐步使用 ``opcheck``",
        ("ref", "elsewhere"): "Untranslated",
    }
