"""The built site: no warnings, a page per example with its figures and downloads."""

import re
import zipfile
from pathlib import Path

import nbformat
import pytest
from conftest import EXAMPLES, GALLERY_DIR, REPO, make, project_with_example
from PIL import Image

# Pages whose figures the issue tracker spells out: at least this many.
MINIMUM_FIGURES = {"python_custom_ops": 5}


def links(html, pattern):
    return re.findall(rf'(?:href|src)="([^"]*{pattern}[^"]*)"', html)


def test_build_finishes_without_warnings(site):
    output = site.process.stdout[-3000:] + site.process.stderr[-3000:]
    assert site.process.returncode == 0, f"make html failed:\n{output}"
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
    assert len(shown) >= MINIMUM_FIGURES.get(name, 0)
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
    assert any(cell.cell_type == "code" for cell in nb.cells)


def test_gallery_offers_every_example_in_one_zip(site):
    html = (site.html / GALLERY_DIR / "index.html").read_text()
    for suffix, kind in [(".py", "python"), (".ipynb", "jupyter")]:
        (archive,) = {
            u for u in links(html, "_downloads/") if u.endswith(f"_{kind}.zip")
        }
        with zipfile.ZipFile(site.html / GALLERY_DIR / archive) as zipped:
            names = {Path(n).name for n in zipped.namelist()}
        assert names >= {f"{name}{suffix}" for name in EXAMPLES}


BROKEN_EXAMPLE = '''"""
A Broken Page
=============

This page fails on purpose.
"""

# %%
import torch

x = torch.ones(2)
raise ValueError("this example is broken on purpose")
'''


def test_failing_example_fails_the_build_naming_file_and_error(tmp_path):
    # A copy of the project whose only example raises on its line 12.
    project = project_with_example(tmp_path, "broken_page.py", BROKEN_EXAMPLE)

    process = make("html", cwd=project, timeout=600)
    output = process.stdout + process.stderr
    assert process.returncode != 0, "a failing example must fail the build"
    assert "broken_page.py" in output
    assert re.search(r'broken_page\.py", line 12\b', output), output[-3000:]
    assert "ValueError: this example is broken on purpose" in output
