"""Stamp each tutorial page with the run that produced its output.

Sphinx-Gallery re-runs an example only when its source changed; otherwise the
page keeps the output of an earlier run. ``pagelib.run_record`` writes a
record when an example starts (``pagelib.hooks.record_execution``, a
``reset_modules`` entry) and tells whether it describes the run that produced
the page; the ``doctree-read`` handler here puts the stamp under the page
title, or a build warning and a stamp that says why not. Before the gallery is
generated, an example about to be built with execution enabled but without a
valid record loses its ``.md5`` file, so Sphinx-Gallery runs it again.

The stamp also names every PyTorch release the page passed on in the version
matrix (``pagelib.records``), and the "PyTorch X.Y or later" bullet of the
page's Prerequisites card is rewritten from the same records. Records of other
code than the page's, or a floor the page states but did not measure, are
build warnings that name the page and the ``make matrix`` command.
"""

import datetime
import re
from pathlib import Path

from docutils import nodes
from sphinx.locale import get_translation
from sphinx.util import logging

from pagelib import gallery, layout, records, run_record, wording

logger = logging.getLogger(__name__)
# Our strings, translated for the other editions from the "site" catalog
# (see editions.py).
_ = get_translation(layout.SITE_CATALOG)


def force_run_of_unrecorded(app):
    """Make Sphinx-Gallery re-run examples that lack a valid record.

    Only examples this build executes anyway (plot_gallery on, path matching
    filename_pattern) are touched: deleting the ``.md5`` of one it would not
    execute would drop that page's output.
    """
    gallery_conf = app.config.sphinx_gallery_conf
    if not gallery_conf.get("plot_gallery"):
        return
    for source, folder in gallery.examples(gallery_conf, app.srcdir).values():
        md5_path = folder / f"{source.name}.md5"
        if not md5_path.is_file():
            continue  # Sphinx-Gallery runs it anyway
        if not re.search(gallery_conf["filename_pattern"], str(source)):
            continue
        record, _problem = run_record.check(source, folder)
        if record is None:
            logger.info("verified_stamp: re-running %s to record its run", source.name)
            md5_path.unlink()


# Why a page has no stamp (``pagelib.run_record``), in the page's language.
PROBLEMS = {
    "no record of the run that produced this page": _(
        "no record of the run that produced this page"
    ),
    "the last run of this page did not finish": _(
        "the last run of this page did not finish"
    ),
    "the script changed after its last successful run": _(
        "the script changed after its last successful run"
    ),
    "the record describes a run of another version of the script": _(
        "the record describes a run of another version of the script"
    ),
    "the recorded run did not finish": _("the recorded run did not finish"),
}


def stamp_sentences(record, versions):
    """The stamp's sentences in the page's language (for the page and the
    notebook)."""
    sentences = []
    if versions.trusted:
        sentences.append(
            _("this page ran to the end on PyTorch {releases} ({devices}).").format(
                releases=wording.join_list(versions.passed),
                devices=wording.describe_devices(versions.devices),
            )
        )
    ran_at = datetime.datetime.fromisoformat(record["ran_at"])
    sentences.append(
        _(
            "Every output on it came from running it with PyTorch {torch} on "
            "{devices}, {time} UTC."
        ).format(
            torch=record["torch"],
            devices=wording.join_devices(record["devices"]),
            time=f"{ran_at:%Y-%m-%d %H:%M}",
        )
    )
    return sentences


def _stamp(record, versions):
    label = str(_("Verified:"))
    text = wording.join_sentences([label, *stamp_sentences(record, versions)])
    paragraph = nodes.paragraph()
    paragraph += nodes.strong(text=label)
    paragraph += nodes.Text(text[len(label) :])
    return paragraph


def _rewrite_prerequisite(doctree, versions):
    """Put the measured floor into the Prerequisites card's PyTorch bullet.

    The bullet reads "PyTorch X.Y or later" in the page's language; it becomes
    the floor and the range of releases the records measured.
    """
    if not versions.trusted:
        return True
    stated = wording.stated_floor_pattern()
    for item in doctree.findall(nodes.list_item):
        for node in item.findall(nodes.Text):
            match = stated.match(node.astext())
            if match:
                text = wording.measured_floor(versions) + node.astext()[match.end() :]
                node.parent.replace(node, nodes.Text(text))
                return True
    return False


def add_stamp(app, doctree):
    docname = app.env.docname
    page = gallery.examples(app.config.sphinx_gallery_conf, app.srcdir).get(docname)
    if page is None:
        return
    source, folder = page
    # Re-read the page whenever a run rewrites its record or finishes.
    app.env.note_dependency(str(run_record.path_for(source, folder)))
    app.env.note_dependency(str(folder / f"{source.name}.md5"))
    record, problem = run_record.check(source, folder)
    app.env.note_dependency(
        str(Path(app.srcdir) / records.RECORDS / f"{source.stem}.json")
    )
    versions = records.read(app.srcdir, source)
    for version_problem in versions.problems:
        logger.warning(
            "%s: version matrix: %s",
            source.name,
            version_problem,
            location=docname,
            type="version_records",
        )
    if not _rewrite_prerequisite(doctree, versions):
        logger.warning(
            "%s: its Prerequisites card has no bullet that reads %r",
            source.name,
            _("PyTorch {version} or later"),
            location=docname,
            type="version_records",
        )
    stamp = nodes.container(classes=["verified-stamp"])
    if record is None:
        executing = app.config.sphinx_gallery_conf.get("plot_gallery")
        (logger.warning if executing else logger.info)(
            "%s: %s; this page has no verified stamp",
            source.name,
            problem,
            location=docname,
            type="verified_stamp",
        )
        stamp["classes"].append("verified-stamp-missing")
        stamp += nodes.paragraph(
            text=_(
                "Not verified: {problem}. Build the site with the examples "
                "enabled to run this page."
            ).format(problem=PROBLEMS.get(problem, problem))
        )
    else:
        stamp += _stamp(record, versions)
    section = next(iter(doctree.findall(nodes.section)), None)
    if section is None or not isinstance(section[0], nodes.title):
        doctree.insert(0, stamp)
    else:
        section.insert(1, stamp)


def setup(app):
    # After Sphinx-Gallery has completed its configuration (priority 10) and
    # before it generates the gallery.
    app.connect(
        "builder-inited", force_run_of_unrecorded, priority=layout.FORCE_RUNS_PRIORITY
    )
    app.connect("doctree-read", add_stamp)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
