"""Every downloadable notebook runs top to bottom in a fresh Jupyter kernel."""

import re

import nbformat
import pytest
from conftest import EXAMPLES
from nbclient import NotebookClient


@pytest.mark.parametrize("name", EXAMPLES)
def test_downloaded_notebook_executes_in_a_fresh_kernel(site, name, tmp_path):
    html = site.page(name).read_text()
    (href,) = set(re.findall(rf'href="([^"]*_downloads/[^"]*/{name}\.ipynb)"', html))
    notebook = nbformat.read(site.page(name).parent / href, as_version=4)
    nbformat.validate(notebook)
    client = NotebookClient(
        notebook,
        kernel_name="python3",
        timeout=900,
        resources={"metadata": {"path": str(tmp_path)}},
    )
    client.execute()  # raises CellExecutionError naming the failing cell
    outputs = [o for cell in notebook.cells for o in cell.get("outputs", [])]
    assert not [o for o in outputs if o.output_type == "error"]
    assert any(o.output_type == "stream" for o in outputs), (
        "the notebook printed nothing"
    )
