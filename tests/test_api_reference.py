"""The API reference and the Colab links, on a project of one page of our own.

Each test copies the project with one example (``project_with_example``) and
builds it as ``make html-noplot`` does (``-W``, nothing run: Sphinx-Gallery
reads the names from the code), then reads the HTML:

* the page's torch names link to entry pages that document them, decorators
  included, at anchors that exist; each entry lists the page as a card, and
  the API index lists the entries with the page; an edit to the card shows
  on the entries without their being read again;
* an entry that documents nothing (its page left out of the build) fails the
  build, naming it: a code link must not point nowhere;
* a docstring that is not valid reST, or has math, shows as plain text under
  the signature, with a line saying so, and the build stays clean;
* "Open in Colab": with a made-up repository address, each edition's page
  links to its own notebook on the branch ``notebooks``, at the path the
  workflow publishes it (the file the build wrote); without an address, no
  link and no warning; an address that is not GitHub's fails the build.
"""

import os
import re
import sys

from tests.support.helpers import REPO, example_source, project_with_example, run

PAGE = "api_user"
BODY = """import torch


@torch.library.custom_op("apitest::twice", mutates_args=())
def twice(x: torch.Tensor) -> torch.Tensor:
    return x * 2


@twice.register_fake
def _(x):
    return torch.empty_like(x)


torch.library.opcheck(torch.ops.apitest.twice.default, (torch.randn(3),))
compiled = torch.compile(twice)
"""
NAMES = {"torch.library.custom_op", "torch.library.opcheck", "torch.compile"}
COLAB = "https://colab.research.google.com/github/octo-org/custom-ops/blob/notebooks/"


def project(tmp_path, conf_tail=""):
    source = example_source("Using the API", BODY)
    folder = project_with_example(tmp_path, f"{PAGE}.py", source)
    if conf_tail:
        with open(folder / "conf.py", "a") as conf:
            conf.write("\n" + conf_tail + "\n")
    return folder


def build(folder, language="en", address=None):
    env = {k: v for k, v in os.environ.items() if k != "REPOSITORY_URL"}
    if address is not None:
        env["REPOSITORY_URL"] = address
    out = "_build/html" + ("" if language == "en" else f"/{language}")
    return run(
        [sys.executable, "-m", "sphinx", "-b", "html", "-W", "--keep-going", "-q"]
        + ["-D", "plot_gallery=0", "-D", f"language={language}", ".", out],
        cwd=folder,
        env=env,
        timeout=900,
    )


def code_links(html):
    """(href, title) of every link Sphinx-Gallery or we put in code."""
    return re.findall(
        r'<a class="sphx-glr-backref-module-[^"]*" href="([^"]+)" title="([^"]+)"',
        html,
    )


def test_code_names_link_to_entries_that_document_them_and_list_the_page(tmp_path):
    folder = project(tmp_path)
    process = build(folder)
    assert process.returncode == 0, process.stderr[-3000:]
    html = folder / "_build" / "html"
    page = html / "tutorials" / f"{PAGE}.html"
    links = code_links(page.read_text())
    assert {title for _href, title in links} >= NAMES, links
    for href, title in links:
        target, _, anchor = href.partition("#")
        assert target == f"../api/{title}.html", href
        entry = (page.parent / target).resolve().read_text()
        assert f'id="{anchor}"' in entry, href
    # The decorator is a link too, though Pygments makes `@torch` one token.
    assert re.search(
        r'<span class="nd">&#64;</span><a [^>]*title="torch.library.custom_op"',
        page.read_text(),
    )
    entry = (html / "api" / "torch.library.opcheck.html").read_text()
    assert 'class="api-docstring' in entry and 'lang="en"' in entry
    assert f"../tutorials/{PAGE}.html" in entry  # the page's card
    assert "sphx-glr-thumbcontainer" in entry
    index = (html / "api_index.html").read_text()
    for name in NAMES:
        assert f'href="api/{name}.html#{name}"' in index, name
    assert f'href="tutorials/{PAGE}.html"' in index
    # No address, no Colab link, and nothing said about it.
    assert "colab" not in page.read_text().lower()
    assert "colab" not in process.stderr.lower()

    # The page's card is edited (its summary): the entries show the new card
    # at once, written again without being read again (no autodoc rerun).
    entry_doctree = html / ".doctrees" / "api" / "torch.library.opcheck.doctree"
    read_at = entry_doctree.stat().st_mtime_ns
    script = folder / "advanced" / f"{PAGE}.py"
    script.write_text(script.read_text().replace("by a test.", "by a test, edited."))
    process = build(folder)
    assert process.returncode == 0, process.stderr[-3000:]
    entry = (html / "api" / "torch.library.opcheck.html").read_text()
    assert "made by a test, edited." in entry
    assert entry_doctree.stat().st_mtime_ns == read_at


def test_an_entry_that_documents_nothing_fails_the_build(tmp_path):
    folder = project(tmp_path, 'exclude_patterns = ["api/torch.library.opcheck.rst"]')
    process = build(folder)
    assert process.returncode != 0
    assert "torch.library.opcheck is used by tutorials/api_user" in process.stderr
    assert "torch.library.opcheck in this page's code links to no API entry" in (
        process.stderr
    )


BROKEN_DOCSTRING = '''
import torch.library

torch.library.opcheck.__doc__ = """Check an operator.

  an indented line that reST does not expect
*emphasis never closed
"""
torch.compile.__doc__ = """Compile.

.. math:: y = 2x
"""
'''


def test_a_docstring_that_does_not_render_shows_as_plain_text(tmp_path):
    folder = project(tmp_path, BROKEN_DOCSTRING)
    process = build(folder)
    assert process.returncode == 0, process.stderr[-3000:]
    api = folder / "_build" / "html" / "api"
    for name, reason in [
        ("torch.library.opcheck", "unexpected unindent)"),
        ("torch.compile", "mathematics"),
    ]:
        entry = (api / f"{name}.html").read_text()
        assert 'class="api-plain-note"' in entry, name
        assert reason in entry, name
        assert 'class="api-plain-docstring' in entry, name
        # The signature is still there, as autodoc renders it.
        assert f'id="{name}"' in entry, name
    assert "never closed" in (api / "torch.library.opcheck.html").read_text()
    # Only as text: none of the docstring is rendered beside it.
    assert 'class="math' not in (api / "torch.compile.html").read_text()
    # A docstring that renders is rendered, not shown as text.
    custom_op = (api / "torch.library.custom_op.html").read_text()
    assert "api-plain-note" not in custom_op


def test_colab_links_name_each_editions_notebook_only_with_an_address(tmp_path):
    folder = project(tmp_path)
    address = "https://github.com/octo-org/custom-ops"
    for language in ("en", "zh_CN"):
        process = build(folder, language, address)
        assert process.returncode == 0, process.stderr[-3000:]
    html = folder / "_build" / "html"
    for page, notebook in [
        (html / "tutorials" / f"{PAGE}.html", f"tutorials/{PAGE}.ipynb"),
        (
            html / "zh_CN" / "tutorials" / f"{PAGE}.html",
            f"tutorials_zh_CN/{PAGE}.ipynb",
        ),
    ]:
        hrefs = re.findall(r'class="colab-link[^"]*" href="([^"]+)"', page.read_text())
        assert hrefs == [COLAB + notebook], (page, hrefs)
        # The file site.yml publishes at that path is the one the build wrote.
        assert (folder / notebook).is_file(), notebook
    chinese = (html / "zh_CN" / "tutorials" / f"{PAGE}.html").read_text()
    assert "在 Colab 中打开" in chinese
    # Pages other than tutorials get no link.
    assert "colab-link" not in (html / "api_index.html").read_text()

    process = build(folder, "en", "https://gitlab.com/octo-org/custom-ops")
    assert process.returncode != 0
    assert "not a GitHub repository's address" in process.stderr


CHECKER_USER = """import torch
from operator_checker import check_operator

torch.library.opcheck
check_operator
"""


def test_the_checkers_entries_are_translated_and_refuse_a_missing_catalog(tmp_path):
    """The checker's docstrings are the course's own prose: the Chinese
    edition translates them from their entries' catalogs (which `make
    catalogs` keeps current), while torch's stay English, marked so. An entry
    whose catalog is missing fails the Chinese build, naming the command."""
    source = example_source("Using the checker", CHECKER_USER)
    folder = project_with_example(tmp_path, f"{PAGE}.py", source)
    entry = "operator_checker.check_operator"
    process = build(folder, "zh_CN")
    assert process.returncode != 0
    assert f"{entry} has no zh_CN catalog" in process.stderr
    assert "run `make catalogs`" in process.stderr

    catalogs = "locale/zh_CN/LC_MESSAGES/api"
    (folder / catalogs).mkdir(parents=True)
    (folder / catalogs / f"{entry}.po").write_text(
        (REPO / catalogs / f"{entry}.po").read_text(encoding="utf-8"),
        encoding="utf-8",
    )
    process = build(folder, "zh_CN")
    assert process.returncode == 0, process.stderr[-3000:]
    api = folder / "_build" / "html" / "zh_CN" / "api"
    checker = (api / f"{entry}.html").read_text()
    docstring = checker[checker.index("api-docstring") :][:600]
    assert 'lang="en"' not in docstring
    assert "运行本课程的所有检查" in checker and "Run every check" not in checker
    assert 'lang="en"' in (api / "torch.library.opcheck.html").read_text()
