"""The 简体中文 edition: complete, current, and built from the English run.

``make html`` builds it right after the English edition, from the gettext
catalogs in ``locale/zh_CN``. CI refuses a catalog that is not current with
the English source, any untranslated or fuzzy message (read with Babel, a
gettext library), and downloads whose code differs from the English scripts'.
"""

import re
import subprocess
import sys

import nbformat
import pytest

from pagelib import layout, translation
from tests.support.helpers import EXAMPLES, GALLERY_DIR, REPO, downloads

(LANGUAGE,) = layout.TRANSLATIONS


def test_catalogs_are_current_and_fully_translated():
    process = subprocess.run(
        [sys.executable, "tools/catalogs.py", "check", "--language", LANGUAGE],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert process.returncode == 0, process.stdout[-6000:] + process.stderr[-3000:]


def test_every_page_has_a_chinese_edition(site):
    english = sorted(
        p.relative_to(site.html).as_posix()
        for p in site.html.rglob("*.html")
        if not {"_static", "_sources", "_downloads", "_images", LANGUAGE}
        & set(p.relative_to(site.html).parts)
    )
    chinese = site.html / LANGUAGE
    missing = [page for page in english if not (chinese / page).is_file()]
    assert not missing, missing
    html = (chinese / "index.html").read_text()
    assert '<html lang="zh-CN"' in html or 'lang="zh_CN"' in html, html[:300]


@pytest.mark.parametrize("name", EXAMPLES)
def test_chinese_downloads_are_the_translated_script_and_its_notebook(site, name):
    # What the translation makes of a script (the English code, the prose in
    # Chinese) is checked in tests/unit/test_translation.py; here, that the
    # Chinese page's download links serve it.
    english = (REPO / "advanced" / f"{name}.py").read_text()
    messages = translation.catalog(REPO, LANGUAGE, f"{GALLERY_DIR}/{name}")
    files = downloads(site.html / LANGUAGE / GALLERY_DIR / f"{name}.html")
    chinese = files["py"].read_text(encoding="utf-8")
    assert chinese == translation.translate_script(english, messages)[0]

    notebook = nbformat.read(files["ipynb"], as_version=4)
    english_notebook = nbformat.read(downloads(site.page(name))["ipynb"], as_version=4)
    code_cells = [c.source for c in notebook.cells[1:] if c.cell_type == "code"]
    english_cells = [
        c.source for c in english_notebook.cells[1:] if c.cell_type == "code"
    ]
    assert code_cells == english_cells
    assert notebook.cells != english_notebook.cells  # its prose is Chinese


@pytest.mark.parametrize("name", EXAMPLES)
def test_chinese_page_says_its_output_is_the_english_run(site, name):
    html = (site.html / LANGUAGE / GALLERY_DIR / f"{name}.html").read_text()
    stamp = html[html.index("verified-stamp") :][:3000]
    assert "translation-note" in stamp
    assert "verified-stamp-missing" not in html


HAN = re.compile(r"[\u4e00-\u9fff]")


def test_chinese_gallery_index_titles_and_summaries_are_chinese(site):
    """Sphinx-Gallery writes the thumbnails' titles and hover summaries as raw
    HTML; _ext/editions.py takes them from each page's catalog."""
    html = (site.html / LANGUAGE / GALLERY_DIR / "index.html").read_text()
    titles = re.findall(r'sphx-glr-thumbnail-title">(.*?)</div>', html, re.S)
    summaries = re.findall(r'sphx-glr-thumbcontainer"[^>]*tooltip="([^"]*)"', html)
    assert len(titles) == len(summaries) == len(EXAMPLES)
    english = [text for text in titles + summaries if not HAN.search(text)]
    assert not english, english


@pytest.mark.parametrize("name", EXAMPLES)
def test_chinese_stamp_and_alt_text_read_as_chinese(site, name):
    html = (site.html / LANGUAGE / GALLERY_DIR / f"{name}.html").read_text()
    start = html.index("verified-stamp")
    stamp = re.sub(r"<[^>]+>", "", html[start : html.index("</div>", start)])
    assert HAN.search(stamp), stamp
    # Chinese punctuation, and no space after it or between two sentences.
    assert not re.search(r"[：。，）] |\d, \d| and ", stamp), stamp
    alts = re.findall(r'<img [^>]*alt="([^"]+)"', html)
    assert all(HAN.search(alt) for alt in alts), alts
