"""The built site: no warnings, a page per example with its figures and downloads."""

import ast
import re
import sys
import zipfile
from pathlib import Path

import nbformat
import pytest
from PIL import Image

from tests.support.helpers import (
    EXAMPLES,
    GALLERY_DIR,
    REPO,
    example_source,
    make,
    project_with_example,
    run,
)

# Every page draws at least one figure (its landing card shows it); these draw
# more, and a page that silently stops drawing one of them fails.
MINIMUM_FIGURES = {"python_custom_ops": 6, "custom_op_performance": 2}


def links(html, pattern):
    return re.findall(rf'(?:href|src)="([^"]*{pattern}[^"]*)"', html)


def test_build_finishes_without_warnings(site):
    assert site.process.returncode == 0
    assert site.warnings.strip() == "", f"Sphinx warnings:\n{site.warnings}"


@pytest.mark.parametrize("name", EXAMPLES)
def test_every_example_has_a_page_with_its_figures(site, name):
    page = site.page(name)
    assert page.exists(), f"no page for advanced/{name}.py"
    html = page.read_text()
    # The figures this run of the example produced, as Sphinx-Gallery listed
    # them in the generated reST, must all reach the HTML and decode.
    produced = set(
        re.findall(
            rf"sphx_glr_{name}_\d{{3}}\.png",
            (REPO / GALLERY_DIR / f"{name}.rst").read_text(),
        )
    )
    shown = set(re.findall(rf"sphx_glr_{name}_\d{{3}}\.png", html))
    assert shown == produced
    assert len(shown) >= MINIMUM_FIGURES.get(name, 1), (
        f"{name} drew {len(shown)} figures, fewer than it should"
    )
    for src in links(html, rf"sphx_glr_{name}_\d{{3}}\.png"):
        with Image.open(page.parent / src) as image:
            image.verify()


@pytest.mark.parametrize("name", EXAMPLES)
def test_every_page_offers_py_and_ipynb_downloads(site, name):
    page = site.page(name)
    html = page.read_text()
    script = [u for u in links(html, "_downloads/") if u.endswith(f"/{name}.py")]
    notebook = [u for u in links(html, "_downloads/") if u.endswith(f"/{name}.ipynb")]
    assert script and notebook, f"{name}: download links missing"
    source = (REPO / "advanced" / f"{name}.py").read_text()
    assert (page.parent / script[0]).read_text() == source
    nb = nbformat.read(page.parent / notebook[0], as_version=4)
    nbformat.validate(nb)
    # After the setup cell the notebook holds the script's code, all of it, in
    # order (comments aside: prose cells come from the script's comments).
    code_cells = [cell.source for cell in nb.cells[1:] if cell.cell_type == "code"]
    assert code_lines("\n".join(code_cells)) == code_lines(script_body(source))


def script_body(source):
    """The script without its module docstring."""
    tree = ast.parse(source)
    docstring = tree.body[0]
    return "\n".join(source.splitlines()[docstring.end_lineno :])


def code_lines(text):
    return [
        line.rstrip()
        for line in text.splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]


def test_gallery_offers_every_example_in_one_zip(site):
    html = (site.html / GALLERY_DIR / "index.html").read_text()
    for suffix, kind in [(".py", "python"), (".ipynb", "jupyter")]:
        (archive,) = {
            u for u in links(html, "_downloads/") if u.endswith(f"_{kind}.zip")
        }
        with zipfile.ZipFile(site.html / GALLERY_DIR / archive) as zipped:
            names = {Path(n).name for n in zipped.namelist()}
        assert names >= {f"{name}{suffix}" for name in EXAMPLES}


BROKEN_EXAMPLE = example_source(
    "A Broken Page",
    'x = torch.ones(2)\nraise ValueError("this example is broken on purpose")',
)
BROKEN_LINE = BROKEN_EXAMPLE.splitlines().index(
    'raise ValueError("this example is broken on purpose")'
)


def test_failing_example_fails_the_build_naming_file_and_error(tmp_path):
    # A copy of the project whose only example raises.
    project = project_with_example(tmp_path, "broken_page.py", BROKEN_EXAMPLE)

    process = make("html", cwd=project, timeout=600)
    output = process.stdout + process.stderr
    assert process.returncode != 0, "a failing example must fail the build"
    assert "broken_page.py" in output
    line = BROKEN_LINE + 1
    assert re.search(rf'broken_page\.py", line {line}\b', output), output[-3000:]
    assert "ValueError: this example is broken on purpose" in output


DANGLING_REFERENCE = example_source(
    "A Page With a Dangling Reference",
    "print(torch.ones(2))\n\n# %%\n# See :ref:`a-label-that-no-page-defines`.\n\n"
    "print(torch.zeros(2))",
)


def test_make_html_fails_on_a_sphinx_warning(tmp_path):
    # `make html` itself, with nothing passed on the command line, must turn
    # a warning into a failed build: readers get no page with a broken link.
    project = project_with_example(tmp_path, "dangling.py", DANGLING_REFERENCE)
    process = make("html", cwd=project, timeout=600)
    output = process.stdout + process.stderr
    assert "a-label-that-no-page-defines" in output, output[-3000:]
    assert process.returncode != 0, "a Sphinx warning must fail make html"
    assert "warnings treated as errors" in output, output[-3000:]


EDITED = example_source(
    "A Page Under Edit",
    "x = torch.ones(2)\n\n# %%\n# A paragraph of prose.\n\nprint(x.sum())",
)


def test_a_code_edit_fails_the_build_naming_the_matrix_command(tmp_path):
    # The records name the page's code as it was: a code edit makes them
    # stale, and the build fails naming the page and the command that brings
    # its records back. (A prose edit keeps them current, which
    # tests/unit/test_records.py checks on the records themselves.) The
    # warning comes from the records, so a build that runs no example shows it.
    project = project_with_example(tmp_path, "edited_page.py", EDITED)
    page = project / "advanced" / "edited_page.py"
    page.write_text(EDITED.replace("print(x.sum())", "print(x.sum() + 1)"))
    process = run(
        [sys.executable, "-m", "sphinx", "-b", "html", "-W", "--keep-going", "-q"]
        + ["-D", "plot_gallery=0", ".", "_build/html"],
        cwd=project,
        timeout=600,
    )
    output = process.stdout + process.stderr
    assert process.returncode != 0
    assert "edited_page.py: version matrix: its code changed" in output, output[-3000:]
    assert "run `make matrix PAGES=edited_page`" in output
