"""A build with nothing to do reports no configuration change
(``_ext/config_as_read.py``), although the gallery, the theme and the other
extensions change options after ``config-inited``. Two in-process builds of a
small project with the site's third-party extensions, running no example."""

import io

CONF = """
extensions = [
    "sphinx_gallery.gen_gallery",
    "sphinx_design",
    "sphinx_copybutton",
    "config_as_read",
]
sphinx_gallery_conf = {"examples_dirs": "examples", "gallery_dirs": "gallery"}
html_theme = "pydata_sphinx_theme"
html_static_path = ["_static"]
# Set, as the site sets it: Sphinx-Gallery appends to the list, and the
# default's one list lives as long as the process, over both builds.
templates_path = ["_templates"]
html_css_files = ["site.css"]
html_theme_options = {"navbar_align": "left"}
exclude_patterns = ["_build"]
"""
EXAMPLE = '''"""
A page
======

It prints.
"""

print("hello")
'''


def build(sphinx_build, srcdir):
    """What the build printed, building on what the last one left."""
    status = io.StringIO()
    sphinx_build(srcdir, fresh=False, status=status, plot_gallery=0)
    return status.getvalue()


def test_a_second_build_finds_the_configuration_unchanged(tmp_path, sphinx_build):
    (tmp_path / "conf.py").write_text(CONF)
    (tmp_path / "index.rst").write_text(
        "Site\n====\n\n.. toctree::\n\n   gallery/index\n"
    )
    (tmp_path / "_static").mkdir()
    (tmp_path / "_static" / "site.css").write_text("")
    (tmp_path / "examples").mkdir()
    (tmp_path / "examples" / "GALLERY_HEADER.rst").write_text("Gallery\n=======\n")
    (tmp_path / "examples" / "plot_page.py").write_text(EXAMPLE)
    first = build(sphinx_build, tmp_path)
    assert "build succeeded" in first, first
    second = build(sphinx_build, tmp_path)
    assert "build succeeded" in second, second
    assert "configuration has changed" not in second, second
