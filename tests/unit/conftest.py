"""The fast lane's fixtures: a folder laid out like the project, with a small
version matrix, and a Sphinx build run in this process.

`make unit` loads this conftest alone (``--confcutdir``): nothing here reads
the repository's matrix, imports nbformat or builds the site, so the lane
takes seconds.
"""

import gettext
import io
from types import SimpleNamespace

import pytest
import sphinx.locale
from babel.messages.mofile import write_mo
from babel.messages.pofile import read_po
from sphinx.application import Sphinx
from sphinx.util.docutils import docutils_namespace

from pagelib import layout
from tests.support.pages import SMALL_BELOW, SMALL_RELEASES, matrix_toml


@pytest.fixture
def chinese(monkeypatch):
    """A Chinese build's app, with site.po as our extensions' catalog: every
    ``_()`` of the extensions answers in Chinese while the test runs."""
    with layout.site_catalog_path("zh_CN").open("rb") as handle:
        catalog = read_po(handle)
    compiled = io.BytesIO()
    write_mo(compiled, catalog)
    compiled.seek(0)
    monkeypatch.setitem(
        sphinx.locale.translators,
        ("general", layout.SITE_CATALOG),
        gettext.GNUTranslations(compiled),
    )
    return SimpleNamespace(config=SimpleNamespace(language="zh_CN"))


@pytest.fixture
def matrix_project(tmp_path):
    """A project folder with a small versions/matrix.toml (``SMALL_RELEASES``
    above ``SMALL_BELOW``), an empty versions/records/ and advanced/."""
    (tmp_path / "versions" / "records").mkdir(parents=True)
    (tmp_path / "versions" / "matrix.toml").write_text(
        matrix_toml(SMALL_RELEASES, below=[SMALL_BELOW])
    )
    (tmp_path / "advanced").mkdir()
    return tmp_path


@pytest.fixture
def sphinx_build():
    """``build(srcdir, **confoverrides)``: build ``srcdir`` to HTML in this
    process, from scratch, into ``srcdir/_build``; returns what it warned.
    ``fresh=False`` builds on what the last build left there, and a
    ``status`` stream receives what it printed.

    For a test that needs Sphinx and the project's extensions but runs no
    example: it takes a fraction of a second, where `make html` takes many.
    """

    def build(srcdir, *, fresh=True, status=None, **confoverrides):
        warnings = []

        class Warnings:
            def write(self, text):
                warnings.append(text)

            def flush(self):
                pass

        # docutils_namespace: the directives and roles an extension registers
        # are forgotten after the build, so builds in one process stay apart.
        with docutils_namespace():
            app = Sphinx(
                srcdir,
                srcdir,
                srcdir / "_build",
                srcdir / "_build" / ".doctrees",
                "html",
                confoverrides=confoverrides,
                status=status,
                warning=Warnings(),
                freshenv=fresh,
            )
            app.build()
        return "".join(warnings)

    return build
