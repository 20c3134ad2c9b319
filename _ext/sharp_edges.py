"""The table of PyTorch's sharp edges, release by release, from the records.

A page that tracks PyTorch behaviours prints ``sharp edge <name>: <status>``
for each (``pagelib.contract.EDGE_LINE``), and ``make matrix`` keeps those
statuses in its version records. ``.. sharp-edges-table::`` in that page
turns them into a table: one row per edge, linked to the page's section
labelled ``edge-<name>``, with the releases of the matrix where it is
present, gone or not applicable, one line per run ("present 2.7–2.12",
"gone 2.13–2.15"). A release that fixes an edge shows up as "gone" after
``make matrix``, with no edit to the page. The table is built from the
records at every build, in the page's language; an edge whose section label
is missing, or records that name no edge, are build warnings.
"""

from pathlib import Path

from docutils import nodes
from docutils.statemachine import StringList
from sphinx.locale import get_translation
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective

from pagelib import gallery, records

logger = logging.getLogger(__name__)
# The statuses are our strings, translated from the "site" catalog (see
# editions.py), not the page's: they change with the version records.
_ = get_translation("site")


def status_text(status):
    return {
        "present": _("present"),
        "gone": _("gone"),
        "not applicable": _("not applicable"),
        records.NOT_RUN: _("not run"),
    }[status]


def releases_lines(releases, statuses):
    """["present 2.7–2.12", "gone 2.13–2.15"]: one line per run of a status,
    so the table keeps two narrow columns however many releases the matrix
    has."""
    lines = []
    for first, last, status in records.edge_spans(releases, statuses):
        # No line break after the dash of a range.
        where = first if first == last else f"{first}–\u2060{last}"
        lines.append(
            _("{status} {releases}").format(status=status_text(status), releases=where)
        )
    return lines


def table_rst(table):
    """The reST list-table of an ``records.EdgeTable``."""
    edge_header, releases_header = _("Sharp edge"), _("PyTorch releases")
    lines = [
        ".. list-table::",
        "   :header-rows: 1",
        "   :class: sharp-edges-table",
        "",
        f"   * - {edge_header}",
        f"     - {releases_header}",
    ]
    for edge, statuses in table.rows:
        lines.append(f"   * - :ref:`edge-{edge}`")
        spans = releases_lines(table.releases, statuses)
        lines.append(f"     - | {spans[0]}")
        lines += [f"       | {span}" for span in spans[1:]]
    return lines


class SharpEdgesTable(SphinxDirective):
    """``.. sharp-edges-table::``: the page's tracked edges per release."""

    has_content = False

    def run(self):
        source = self._source()
        if source is None:
            logger.warning(
                "sharp-edges-table: %s is not a page of the gallery",
                self.env.docname,
                location=self.get_location(),
                type="sharp_edges",
            )
            return []
        record_path = Path(self.env.srcdir) / records.RECORDS / f"{source.stem}.json"
        self.env.note_dependency(str(record_path))
        table = records.edge_table(self.env.srcdir, source)
        for problem in table.problems:
            logger.warning(
                "sharp-edges-table: %s",
                problem,
                location=self.get_location(),
                type="sharp_edges",
            )
        if not table.rows:
            return []
        container = nodes.container()
        self.state.nested_parse(
            StringList(table_rst(table), source="<sharp-edges-table>"),
            self.content_offset,
            container,
        )
        # Translated from our catalog; the page's catalog must not get them.
        for text in container.findall(nodes.TextElement):
            text["translatable"] = False
        return container.children

    def _source(self):
        """The example script the current document was generated from."""
        pages = gallery.examples(self.config.sphinx_gallery_conf, self.env.srcdir)
        source, _folder = pages.get(self.env.docname, (None, None))
        return source


def setup(app):
    app.add_directive("sharp-edges-table", SharpEdgesTable)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
