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

from pagelib import gallery, records, run_record

logger = logging.getLogger(__name__)
# Our strings, translated for the other editions from the "site" catalog
# (see editions.py).
_ = get_translation("site")


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
        record, _ = run_record.check(source, folder)
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


def join_list(items):
    """['2.7', '2.8', '2.9'] -> '2.7, 2.8, 2.9' in English, '2.7、2.8、2.9' in
    Chinese: the separator is a message of its own."""
    items = list(items)
    text = items[0] if items else ""
    for item in items[1:]:
        text = _("{first}, {second}").format(first=text, second=item)
    return text


def join_and(items):
    """['CPU', 'CUDA'] -> 'CPU and CUDA'; three or more: 'A, B and C'."""
    items = list(items)
    if len(items) < 2:
        return join_list(items)
    return _("{first} and {second}").format(
        first=join_list(items[:-1]), second=items[-1]
    )


# Full-width punctuation and CJK characters: no space is wanted next to them
# (Chinese sets no space after "：" or "。", nor between two sentences).
_NO_SPACE = re.compile(r"[\u3000-\u303f\u3400-\u9fff\uff00-\uffef]")


def join_sentences(parts):
    """Sentences (and a leading label) joined as the language writes them:
    with a space in English, without one where either side is Chinese."""
    text = ""
    for part in parts:
        if text and not (_NO_SPACE.match(text[-1]) or _NO_SPACE.match(part[:1])):
            text += " "
        text += part
    return text


def describe_devices(devices):
    """['cpu', 'cuda'] -> 'CPU and CUDA' (the matrix's devices), translated."""
    if not devices:
        return _("no device recorded")
    return join_and(device.upper() for device in devices)


def join_devices(devices):
    """['CPU', 'NVIDIA H100 (CUDA 13.2)'] -> 'CPU and NVIDIA H100 (CUDA 13.2)'."""
    text = join_and(devices)
    if len(devices) == 1:
        text = _("{devices} (no CUDA device)").format(devices=text)
    return text


def stamp_sentences(record, versions):
    """The stamp's sentences in the page's language (for the page and the
    notebook)."""
    sentences = []
    if versions.trusted:
        sentences.append(
            _("this page ran to the end on PyTorch {releases} ({devices}).").format(
                releases=join_list(versions.passed),
                devices=describe_devices(versions.devices),
            )
        )
    ran_at = datetime.datetime.fromisoformat(record["ran_at"])
    sentences.append(
        _(
            "Every output on it came from running it with PyTorch {torch} on "
            "{devices}, {time} UTC."
        ).format(
            torch=record["torch"],
            devices=join_devices(record["devices"]),
            time=f"{ran_at:%Y-%m-%d %H:%M}",
        )
    )
    return sentences


def _stamp(record, versions):
    label = str(_("Verified:"))
    text = join_sentences([label, *stamp_sentences(record, versions)])
    paragraph = nodes.paragraph()
    paragraph += nodes.strong(text=label)
    paragraph += nodes.Text(text[len(label) :])
    return paragraph


def stated_floor_pattern():
    """The Prerequisites bullet "PyTorch X.Y or later".

    It matches the page's language and, for a page whose catalog has not
    translated the bullet yet, the English source text.
    """
    wordings = {_("PyTorch {version} or later"), "PyTorch {version} or later"}
    stated = "|".join(
        re.escape(wording).replace(re.escape("{version}"), r"\d+\.\d+")
        for wording in sorted(wordings)
    )
    return re.compile(f"(?:{stated})")


def measured_floor(versions):
    return _("PyTorch {version} or later (verified on {first} to {last})").format(
        version=versions.floor, first=versions.passed[0], last=versions.passed[-1]
    )


def _rewrite_prerequisite(doctree, versions):
    """Put the measured floor into the Prerequisites card's PyTorch bullet.

    The bullet reads "PyTorch X.Y or later" in the page's language; it becomes
    the floor and the range of releases the records measured.
    """
    if not versions.trusted:
        return True
    stated = stated_floor_pattern()
    for item in doctree.findall(nodes.list_item):
        for node in item.findall(nodes.Text):
            match = stated.match(node.astext())
            if match:
                text = measured_floor(versions) + node.astext()[match.end() :]
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
    # before it generates the gallery (default priority, 500).
    app.connect("builder-inited", force_run_of_unrecorded, priority=400)
    app.connect("doctree-read", add_stamp)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
