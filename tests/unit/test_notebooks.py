import notebooks

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
    import pytest

    from pagelib.markdown import UnsupportedMarkup

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
