"""Every downloadable notebook reads well in Jupyter and runs top to bottom.

The notebooks are read from the download links of the pages this session
built, rendered to HTML with nbconvert the way Jupyter renders them, and run
in a fresh kernel.
"""

import ast
import copy
import re
import shlex
import sys

import pytest
from bs4 import BeautifulSoup
from nbconvert import HTMLExporter

from pagelib import contract, pagelint, records
from tests.support.helpers import (
    EXAMPLES,
    REPO,
    notebook_of,
    notebook_release,
)

# reST that must never reach a Jupyter reader, as it would read it. The last
# two may occur in code (C++'s ``::``), so they are looked for in prose only.
REST_LEFTOVERS = {
    "a directive": re.compile(r"^\s*\.\. [\w:-]+::", re.M),
    "a role": re.compile(r":[\w:-]+:`"),
    "an option line": re.compile(r"^\s*:[\w-]+:(\s|$)", re.M),
    "octicon syntax": re.compile(r"octicon|mortar-board;"),
    "a Sphinx-Gallery label": re.compile(r"sphx_glr_"),
    "a reST link or target": re.compile(r"`_|`__|^\s*\.\. _", re.M),
    "reST literal quotes": re.compile(r"``"),
    "a literal-block marker": re.compile(r"::\s*$", re.M),
}
PROSE_ONLY = {"reST literal quotes", "a literal-block marker"}
# The package that provides each module a notebook imports is not a table of
# ours: the build's install line and this test both ask the installed
# packages' metadata (pagelint.package_of), which fails naming what to edit.
# What this test checks on its own is the notebook: every import in its cells,
# as Jupyter would run them, is named on the install line.


def rendered_markdown(notebook):
    """(prose, code) of each markdown cell as Jupyter shows it.

    Only the markdown cells are rendered: each renders on its own, and the
    code cells' highlighting was most of the exporter's time (0.5 to 0.8 s
    a notebook, against 0.1 s for its markdown)."""
    markdown = copy.copy(notebook)  # the exporter works on a deep copy of its own
    markdown.cells = [cell for cell in notebook.cells if cell.cell_type == "markdown"]
    body, _ = HTMLExporter(template_name="lab").from_notebook_node(markdown)
    soup = BeautifulSoup(body, "html.parser")
    cells = soup.select("div.jp-MarkdownCell div.jp-RenderedMarkdown")
    assert cells, "nbconvert rendered no markdown cells"
    rendered = []
    for cell in cells:
        code = "\n".join(element.get_text() for element in cell.select("code, pre"))
        for element in cell.select("code, pre"):
            element.decompose()
        rendered.append((cell.get_text("\n"), code))
    return rendered


def rest_leftovers(notebook):
    found = []
    for prose, code in rendered_markdown(notebook):
        for what, pattern in REST_LEFTOVERS.items():
            texts = [prose] if what in PROSE_ONLY else [prose, code]
            for text in texts:
                for match in pattern.finditer(text):
                    context = text[max(0, match.start() - 40) : match.end() + 40]
                    found.append(f"{what}: ...{context.strip()!r}...")
    return found


def requirement_name(spec):
    """The distribution a pip requirement names: ``name>=1``, ``name @ url``,
    or a wheel's file name or address (``operator_checker-1.0-py3-none-any.whl``)."""
    if spec.endswith(".whl"):
        return spec.rsplit("/", 1)[-1].split("-")[0].replace("_", "-")
    return re.split(r"[<>=!~@ ]", spec, maxsplit=1)[0]


def imported_packages(notebook):
    packages = set()
    for cell in notebook.cells:
        if cell.cell_type != "code" or cell.source.lstrip().startswith("%"):
            continue
        for node in ast.walk(ast.parse(cell.source)):
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                modules = [node.module]
            else:
                continue
            for module in modules:
                top = module.split(".")[0]
                if top not in sys.stdlib_module_names:
                    packages.add(pagelint.package_of(top))
    return packages


@pytest.mark.parametrize("name", EXAMPLES)
def test_first_cell_names_every_package_the_notebook_needs(site, name):
    notebook = notebook_of(site, name)
    first = notebook.cells[0]
    assert first.cell_type == "code"
    lines = [line.strip() for line in first.source.splitlines()]
    assert "%matplotlib inline" in lines
    install = [line for line in lines if re.match(r"#\s*%pip install\b", line)]
    assert len(install) == 1, f"no commented %pip install line in:\n{first.source}"
    # Names, without the quotes and oldest versions a page's NEEDS adds
    # ("setuptools>=70.1").
    named = {
        requirement_name(spec) for spec in shlex.split(install[0].split(None, 3)[3])
    }
    needed = imported_packages(notebook)
    code = "\n".join(c.source for c in notebook.cells if c.cell_type == "code")
    if re.search(r"load_inline|CppExtension|cpp_extension", code):
        needed |= {"ninja", "setuptools"}
    assert needed <= named, f"the install line lacks {sorted(needed - named)}"


@pytest.mark.parametrize("name", EXAMPLES)
def test_first_markdown_cell_says_where_the_page_was_verified(site, name):
    notebook = notebook_of(site, name)
    intro = next(c for c in notebook.cells if c.cell_type == "markdown").source
    versions = records.read(REPO, REPO / "advanced" / f"{name}.py")
    assert versions.trusted, versions.problems
    assert f"ran to the end on PyTorch {', '.join(versions.passed)} (" in intro
    assert f"PyTorch {versions.floor} or later" in intro
    title = contract.read_script(REPO / "advanced" / f"{name}.py")["title"]
    assert intro.startswith(f"# {title}\n")


@pytest.mark.parametrize("name", EXAMPLES)
def test_rendered_notebook_shows_no_rest(site, name):
    found = rest_leftovers(notebook_of(site, name))
    assert not found, "\n".join(found[:20])


@pytest.mark.parametrize("name", EXAMPLES)
def test_cross_references_show_the_titles_of_real_pages(site, name):
    source = (REPO / "advanced" / f"{name}.py").read_text()
    labels = set(
        re.findall(r":ref:`(?:[^`<]*<)?(sphx_glr_tutorials_(\w+)\.py)>?`", source)
    )
    prose = "\n".join(
        c.source for c in notebook_of(site, name).cells if c.cell_type == "markdown"
    )
    for _, target in labels:
        page = REPO / "advanced" / f"{target}.py"
        assert page.is_file(), (
            f"{name} refers to a page the site does not have: {target}"
        )
        title = contract.read_script(page)["title"]
        assert f"*{title}*" in prose or f"[{title}](" in prose, title


@pytest.mark.parametrize("name", EXAMPLES)
def test_downloaded_notebook_executes_in_a_fresh_kernel(executed_notebooks, name):
    # On the page's floor release, but for the shipping pages (see
    # notebook_release); there this run also stands for the standalone one.
    notebook, error, version = executed_notebooks[name]
    assert error is None, str(error)[-4000:]
    assert version.split("+")[0] == notebook_release(name), version
    outputs = [o for cell in notebook.cells for o in cell.get("outputs", [])]
    assert not [o for o in outputs if o.output_type == "error"]
    assert any(o.output_type == "stream" for o in outputs), (
        "the notebook printed nothing"
    )
