"""The notebooks' first cell and links (_ext/notebooks.py): the packages a
script needs, its ignore blocks kept, references made links."""

import notebooks
import pytest

from pagelib.markdown import UnsupportedMarkup
from pagelib.records import PageVersions
from tests.support.pages import REPO

EXAMPLES = sorted(p.stem for p in (REPO / "advanced").glob("*.py"))

PAGE = '''"""
T
=
"""
import torch
import numpy as np
from torch.utils import cpp_extension

NEEDS = {"setuptools": "70.1", "build": "1.0"}

# sphinx_gallery_start_ignore
def helper():
    return 2
# sphinx_gallery_end_ignore

print(helper())
'''


def test_packages_include_imports_needs_and_minimum_versions():
    packages = notebooks.packages_for(PAGE)
    assert packages[:2] == ["torch", "numpy"]
    assert '"setuptools>=70.1"' in packages and '"build>=1.0"' in packages
    assert "ninja" in packages  # cpp_extension compiles with ninja


def test_notebook_code_keeps_ignore_blocks_without_their_flags(tmp_path):
    path = tmp_path / "page.py"
    path.write_text(PAGE)
    code = "".join(
        c for label, c, _ in notebooks.script_blocks(path) if label == "code"
    )
    assert "def helper():" in code and "sphinx_gallery_" not in code


def test_an_unknown_import_is_an_error():
    with pytest.raises(UnsupportedMarkup, match="mystery"):
        notebooks.packages_for("import mystery\n")


def test_a_labelled_section_is_a_link_to_its_anchor():
    script = (
        "# %%\n# .. _edge-lost-call:\n#\n# A ``lost`` call\n# -----------------\n"
        "#\n# Text.\n"
    )
    labels = notebooks.SECTION_LABEL.findall(script)
    assert [(label, title) for label, title, _ in labels] == [
        ("edge-lost-call", "A ``lost`` call")
    ]
    titles = {
        "edge-lost-call": ("tutorials/edges.html#edge-lost-call", "A lost call"),
        "sphx_glr_tutorials_edges.py": ("tutorials/edges", "Edges"),
    }
    resolve = notebooks.resolver(titles, "https://example.org/site/")
    assert (
        resolve("ref", "edge-lost-call", None)
        == "[A lost call](https://example.org/site/tutorials/edges.html#edge-lost-call)"
    )
    assert (
        resolve("ref", "sphx_glr_tutorials_edges.py", "the page")
        == "[the page](https://example.org/site/tutorials/edges.html)"
    )
    assert notebooks.resolver(titles, "")("ref", "edge-lost-call", None) == (
        "*A lost call*"
    )


def test_references_resolve_by_role_and_escape_the_title():
    titles = {
        "start_here": ("start_here", "Which *page* do I need?"),
        "sphx_glr_tutorials_edges.py": ("tutorials/edges", "Edges"),
    }
    resolve = notebooks.resolver(titles, "https://example.org/site")
    # A :doc: target is a document name, as written; a :ref: label is
    # case-insensitive, as Sphinx reads it.
    assert resolve("doc", "start_here", None) == (
        r"[Which \*page\* do I need?](https://example.org/site/start_here.html)"
    )
    assert resolve("ref", "SPHX_GLR_TUTORIALS_EDGES.PY", None) == (
        "[Edges](https://example.org/site/tutorials/edges.html)"
    )
    assert notebooks.resolver(titles, None)("doc", "start_here", None) == (
        r"*Which \*page\* do I need?*"
    )


def test_a_reference_to_no_page_is_an_error():
    resolve = notebooks.resolver({"start_here": ("start_here", "Start")}, "")

    with pytest.raises(UnsupportedMarkup, match="names no page of the site"):
        resolve("doc", "Start_Here", None)  # a :doc: name keeps its case
    with pytest.raises(UnsupportedMarkup, match="sphx_glr_tutorials_gone.py"):
        resolve("ref", "sphx_glr_tutorials_gone.py", None)


VERIFIED = {
    "torch": "2.9.1+cpu",
    "devices": ["CPU"],
    "ran_at": "2026-03-04T05:06:07+00:00",
}
TRUSTED = PageVersions(floor="2.8", passed=["2.8", "2.9"], devices=["cpu"])


def test_the_verified_line_quotes_the_releases_and_the_run():
    assert notebooks.verified_line(TRUSTED, VERIFIED) == (
        "> **Verified**: This notebook's code ran to the end on PyTorch 2.8, 2.9 "
        "(CPU). The outputs on the site came from PyTorch 2.9.1+cpu on CPU "
        "(no CUDA device), 2026-03-04."
    )
    assert notebooks.verified_line(TRUSTED, None) == (
        "> **Verified**: This notebook's code ran to the end on PyTorch 2.8, 2.9 (CPU)."
    )
    assert notebooks.verified_line(PageVersions(), VERIFIED).startswith(
        "> **Verified**: The outputs on the site came from PyTorch 2.9.1+cpu"
    )
    assert notebooks.verified_line(PageVersions(), None) is None


def test_the_chinese_verified_line_has_no_space_after_its_label(chinese):
    line = notebooks.verified_line(TRUSTED, VERIFIED)
    assert line.startswith("> **已验证**：本 notebook 的代码已在 PyTorch 2.8、2.9 上")
    assert "。网站上的输出" in line  # no space between Chinese sentences


@pytest.mark.parametrize("name", EXAMPLES)
def test_every_page_names_the_packages_it_imports(name):
    # packages_for refuses an import notebooks.PACKAGES does not name, so
    # this is the fast lane's check of the install line of every notebook.
    source = (REPO / "advanced" / f"{name}.py").read_text()
    packages = notebooks.packages_for(source)
    assert packages[0] == "torch" and len(set(packages)) == len(packages)
    if "cpp_extension" in source:
        assert {"ninja", "setuptools"} <= {p.strip('"').split(">")[0] for p in packages}
    cell = notebooks.first_cell(packages)
    assert cell.splitlines()[-1] == f"# %pip install {' '.join(packages)}"
