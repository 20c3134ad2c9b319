"""tools/catalogs.py's check of a translated catalog: every message
translated, none fuzzy, no English prose left in a translation, every link
pointing where its English does."""

import catalogs
from babel.messages.catalog import Catalog


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


def test_a_translation_that_links_elsewhere_is_named(tmp_path, monkeypatch):
    # A fuzzy guess reviewed in haste keeps another message's label: the
    # Chinese page would link to the wrong tutorial, and nothing else says so.
    monkeypatch.setattr(catalogs, "REPO", tmp_path)
    path = write_po(
        tmp_path,
        [
            'msgid ":ref:`sphx_glr_tutorials_demo.py`"\n'
            'msgstr ":ref:`sphx_glr_tutorials_custom_op_dtensor.py`"\n\n',
            'msgid "See `the docs <https://a.example/x>`__."\n'
            'msgstr "见\\\\ `文档 <https://a.example/x>`__。"\n\n',
            'msgid "Use :func:`torch.compile` and :ref:`Steps <steps>`."\n'
            'msgstr "使用 :func:`~torch.compile` 与\\\\ :ref:`步骤 <steps>`。"\n\n',
        ],
    )
    (problem,) = catalogs.problems_in(path, "zh_CN")
    assert problem.startswith(
        "page.po: the translation of ':ref:`sphx_glr_tutorials_demo.py`' links "
        "elsewhere than its English"
    )
    assert "custom_op_dtensor" in problem


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


def test_a_new_pages_gallery_boilerplate_is_translated_from_another_page():
    def page(name, translated, fuzzy_from=None):
        catalog = Catalog(locale="zh_CN")
        link = f":ref:`Go to the end <sphx_glr_download_tutorials_{name}.py>`"
        done = f":ref:`跳转到末尾 <sphx_glr_download_tutorials_{name}.py>`"
        guess = done.replace(name, fuzzy_from) if fuzzy_from else ""
        catalog.add(link, done if translated else guess, flags=["fuzzy"] * bool(guess))
        catalog.add(f"How {name} works", f"{name} 的原理" if translated else "")
        return catalog

    by_page = {
        "tutorials/old_page": page("old_page", True),
        # Babel's fuzzy guess keeps old_page's link: it is replaced.
        "tutorials/new_page": page("new_page", False, fuzzy_from="old_page"),
        "tutorials/newer_page": page("newer_page", False),
        "index": page("index", False),
    }
    by_page["tutorials/newer_page"].add("Alone in its page", "")
    catalogs.fill_page_boilerplate(by_page)
    for name in ("new_page", "newer_page"):
        catalog = by_page[f"tutorials/{name}"]
        link = catalog[f":ref:`Go to the end <sphx_glr_download_tutorials_{name}.py>`"]
        assert (
            link.string == f":ref:`跳转到末尾 <sphx_glr_download_tutorials_{name}.py>`"
        )
        assert not link.fuzzy
        # Prose that names the page is also the same sentence but for the name.
        assert catalog[f"How {name} works"].string == f"{name} 的原理"
    assert by_page["tutorials/newer_page"]["Alone in its page"].string == ""
    # Only the gallery's pages: "index" is a word as well as a name.
    assert by_page["index"]["How index works"].string == ""
