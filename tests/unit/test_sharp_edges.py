"""The sharp-edges table: edge lines in a page's output, kept in its version
records, rendered by ``.. sharp-edges-table::`` in a real (small) Sphinx build.

The build is in-process and runs no example: a hand-written document stands
for the page Sphinx-Gallery would generate, and the records are planted, so
the test sees the table change when a release's record says an edge is gone.
"""

import json
import re

import pytest

from pagelib import contract, records
from tests.support.pages import SMALL_BELOW as BELOW
from tests.support.pages import SMALL_RELEASES as RELEASES
from tests.support.pages import page_source, record

PAGE = page_source("Edges", floor="2.7")
DOCUMENT = """
Edges
=====

.. sharp-edges-table::

.. _edge-slow-cache:

A slow cache
------------

.. _edge-lost-tangent:

A lost tangent
--------------
"""


def test_edge_lines_are_read_in_order_and_other_lines_ignored():
    stdout = (
        "PyTorch 2.9.1; devices exercised: ['cpu'] (no CUDA)\n"
        "sharp edge slow-cache: present\n"
        "a sharp edge slow-cache: gone\n"  # not at the start of a line
        "sharp edge lost-tangent: not applicable (arrived in 2.10)\n"
        "sharp edge Bad_Name: present\n"
    )
    assert contract.edges_in_output(stdout) == {
        "slow-cache": "present",
        "lost-tangent": "not applicable",
    }


@pytest.fixture
def project(matrix_project, sphinx_build):
    source = matrix_project / "advanced" / "edges.py"
    source.write_text(PAGE)
    (matrix_project / "tutorials").mkdir()
    (matrix_project / "tutorials" / "edges.rst").write_text(DOCUMENT)
    (matrix_project / "index.rst").write_text(
        "Site\n====\n\n.. toctree::\n\n   tutorials/edges\n"
    )
    (matrix_project / "conf.py").write_text(
        "extensions = ['sharp_edges']\n"
        "sphinx_gallery_conf = {'examples_dirs': ['advanced'],"
        " 'gallery_dirs': ['tutorials']}\n"
        "def setup(app):\n"
        "    app.add_config_value('sphinx_gallery_conf', {}, 'env')\n"
    )
    digest = contract.code_digest(source)

    def plant(edges_by_release):
        data = {BELOW: record(BELOW, "below-floor", code_digest=digest)}
        for release in RELEASES:
            edges = edges_by_release.get(release)
            data[release] = record(release, code_digest=digest, edges=edges)
        (matrix_project / "versions" / "records" / "edges.json").write_text(
            json.dumps(data)
        )

    def build(srcdir):
        """The table's rows as [[cell text, ...], ...], its links and the
        build's warnings."""
        warnings = sphinx_build(srcdir)
        html = (srcdir / "_build" / "tutorials" / "edges.html").read_text()
        rows = []
        for row in re.findall(r"<tr[^>]*>(.*?)</tr>", html, re.S):
            cells = re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", row, re.S)
            # As a reader sees it: no tags, spaces (no-break ones too) as one
            # space, no invisible word joiners.
            text = [
                re.sub(r"<[^>]+>|\s+", " ", cell).replace("\u2060", "")
                for cell in cells
            ]
            rows.append([" ".join(cell.split()) for cell in text])
        links = re.findall(r'href="#(edge-[a-z-]+)"', html)
        return rows, links, warnings

    return matrix_project, source, plant, build


def test_the_table_follows_the_records(project):
    srcdir, source, plant, build = project
    present = {"slow-cache": "present", "lost-tangent": "present"}
    plant({release: present for release in RELEASES})
    rows, links, warnings = build(srcdir)
    assert "sharp-edges" not in warnings, warnings
    assert rows == [
        ["Sharp edge", "PyTorch releases"],
        ["A slow cache", "present 2.7–2.9"],
        ["A lost tangent", "present 2.7–2.9"],
    ]
    assert links == ["edge-slow-cache", "edge-lost-tangent"]

    # A new release of the matrix fixes one edge: the table says so.
    gone = {"slow-cache": "gone", "lost-tangent": "present"}
    plant({"2.7.1": present, "2.8.0": present, "2.9.1": gone})
    rows, _, _ = build(srcdir)
    assert rows[1] == ["A slow cache", "present 2.7–2.8 gone 2.9"]
    assert rows[2] == ["A lost tangent", "present 2.7–2.9"]


def test_missing_feature_and_unrun_release(project):
    srcdir, source, plant, build = project
    plant(
        {
            "2.7.1": {"slow-cache": "not applicable", "lost-tangent": "present"},
            "2.9.1": {"slow-cache": "present", "lost-tangent": "gone"},
        }
    )
    table = records.edge_table(srcdir, source)
    assert table.rows == [
        ("slow-cache", ["not applicable", records.NOT_RUN, "present"]),
        ("lost-tangent", ["present", records.NOT_RUN, "gone"]),
    ]
    rows, _, _ = build(srcdir)
    assert rows[1] == ["A slow cache", "not applicable 2.7 not run 2.8 present 2.9"]
    assert rows[2] == ["A lost tangent", "present 2.7 not run 2.8 gone 2.9"]


def test_spans_of_one_status():
    releases = ["2.7", "2.8", "2.9", "2.10"]
    assert records.edge_spans(releases, ["present"] * 2 + ["gone"] * 2) == [
        ("2.7", "2.8", "present"),
        ("2.9", "2.10", "gone"),
    ]
    assert records.edge_spans(releases, ["gone", "present", "gone", "gone"]) == [
        ("2.7", "2.7", "gone"),
        ("2.8", "2.8", "present"),
        ("2.9", "2.10", "gone"),
    ]


def test_stale_records_and_missing_labels_are_warnings(project):
    srcdir, source, plant, build = project
    plant({release: {"slow-cache": "present"} for release in RELEASES})
    source.write_text(PAGE + "\nprint('new code')\n")  # the records are now stale
    table = records.edge_table(srcdir, source)
    assert table.rows == [] and "make matrix PAGES=edges" in table.problems[0]
    _, _, warnings = build(srcdir)
    assert "no current record of edges names a sharp edge" in warnings

    source.write_text(PAGE)
    plant({release: {"unknown-edge": "present"} for release in RELEASES})
    _, _, warnings = build(srcdir)
    assert "edge-unknown-edge" in warnings  # a row whose section does not exist
