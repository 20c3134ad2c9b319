"""Every downloadable notebook starts by setting itself up for a reader.

Its first cell shows figures inline and names the packages the tutorials
need, with the line that installs them (commented out, so that running the
notebook never installs anything by surprise).
"""

import re

import nbformat
import pytest
from conftest import EXAMPLES

PACKAGES = ["torch", "torchvision", "pillow", "numpy", "matplotlib"]


@pytest.mark.parametrize("name", EXAMPLES)
def test_notebook_first_cell_sets_up_matplotlib_and_names_packages(site, name):
    html = site.page(name).read_text()
    (href,) = set(re.findall(rf'href="([^"]*_downloads/[^"]*/{name}\.ipynb)"', html))
    notebook = nbformat.read(site.page(name).parent / href, as_version=4)
    first = notebook.cells[0]
    assert first.cell_type == "code"
    lines = [line.strip() for line in first.source.splitlines()]
    assert "%matplotlib inline" in lines
    install = [line for line in lines if re.match(r"#\s*%?pip install\b", line)]
    assert install, f"no commented pip install line in:\n{first.source}"
    assert set(PACKAGES) <= set(install[0].split()), install[0]
    # The setup cell is extra: the script's own code follows it unchanged.
    assert any(cell.cell_type == "code" for cell in notebook.cells[1:])
