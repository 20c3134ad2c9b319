"""Stamp each tutorial page with the run that produced its output.

Sphinx-Gallery executes an example only when its source changed since its
last successful run; otherwise the page keeps the output of that earlier run.
A stamp computed while the page is rendered would therefore name whatever
PyTorch happens to be installed now, not the one that produced the output. So
the record is written when the example runs, and only read when it renders:

* ``record_execution`` is listed in ``sphinx_gallery_conf["reset_modules"]``.
  Sphinx-Gallery calls it right before it executes each example, in the
  worker processes as well when examples run in parallel. It writes
  ``<gallery>/<stem>.verified.json``: the PyTorch version, the devices the
  page can run on, the time, and the MD5 of the source about to run.
* Sphinx-Gallery writes ``<gallery>/<stem>.py.md5`` only after an example has
  run to the end without error. When a page's record names that same MD5 and
  is no newer than it, the page's output came from the recorded run; the
  ``doctree-read`` handler then puts the stamp under the page title.
  A page without such a record gets a build warning and a stamp that says so.
* Before the gallery is generated, an example that is about to be built with
  execution enabled but has no valid record loses its ``.md5`` file, so
  Sphinx-Gallery runs it again and the record gets written.

The stamp also names every PyTorch release the page passed on in the version
matrix (``version_records``), and the "PyTorch X.Y or later" bullet of the
page's Prerequisites card is rewritten from the same records. Records that no
longer match the page, or a floor the page states but did not measure, are
build warnings.
"""

import datetime
import hashlib
import json
import platform
import re
import sys
from pathlib import Path

import version_records
from docutils import nodes
from sphinx.locale import get_translation
from sphinx.util import logging

logger = logging.getLogger(__name__)
# Our strings, translated for the other editions from the "site" catalog
# (see editions.py).
_ = get_translation("site")

RECORD_SUFFIX = ".verified.json"


# -- Build side: runs in the process that executes the example ------------------


def _as_list(value):
    return [value] if isinstance(value, str) else list(value)


def _galleries(gallery_conf, src_dir):
    """(examples folder, gallery folder) pairs, as absolute paths."""
    src_dir = Path(src_dir)
    return [
        (src_dir / examples, src_dir / gallery)
        for examples, gallery in zip(
            _as_list(gallery_conf["examples_dirs"]),
            _as_list(gallery_conf["gallery_dirs"]),
            strict=False,
        )
    ]


def _source_md5(path):
    # The same digest Sphinx-Gallery stores in <stem>.py.md5 (text mode,
    # universal newlines).
    text = Path(path).read_text(encoding="utf-8", errors="surrogateescape")
    return hashlib.md5(text.encode("utf-8", errors="surrogateescape")).hexdigest()


def _devices():
    """The devices an example can use here: the CPU, and CUDA if present."""
    torch = sys.modules.get("torch")
    if torch is None:
        import torch
    devices = ["CPU"]
    try:
        if torch.cuda.is_available():
            name = torch.cuda.get_device_name(0)
            devices.append(f"{name} (CUDA {torch.version.cuda})")
    except Exception as error:  # noqa: BLE001 - a stamp must not stop a build
        devices.append(f"a CUDA device whose name could not be read ({error})")
    return torch.__version__, devices


def _locate(gallery_conf, fname):
    """The script Sphinx-Gallery is about to run, and its gallery folder."""
    for examples_dir, gallery_dir in _galleries(gallery_conf, gallery_conf["src_dir"]):
        source = Path(fname) if Path(fname).is_absolute() else examples_dir / fname
        if source.is_file() and source.is_relative_to(examples_dir):
            return source, gallery_dir / source.parent.relative_to(examples_dir)
    return None, None


def record_execution(gallery_conf, fname):
    """Write the record of the run of ``fname`` that is about to start.

    Called by Sphinx-Gallery as a ``reset_modules`` entry before each example
    runs (``fname`` is None when it enters a folder of examples).
    """
    source, target = _locate(gallery_conf, fname) if fname else (None, None)
    if source is None:
        return
    target.mkdir(parents=True, exist_ok=True)
    torch_version, devices = _devices()
    record = {
        "torch": torch_version,
        "devices": devices,
        "python": platform.python_version(),
        "ran_at": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "source_md5": _source_md5(source),
    }
    path = target / f"{source.stem}{RECORD_SUFFIX}"
    path.write_text(json.dumps(record, indent=2) + "\n")


# -- Sphinx side -------------------------------------------------------------------


def _examples(app):
    """Map each tutorial's docname to its (source script, gallery folder)."""
    gallery_conf = app.config.sphinx_gallery_conf
    pages = {}
    for examples_dir, gallery_dir in _galleries(gallery_conf, app.srcdir):
        for source in sorted(examples_dir.rglob("*.py")):
            relative = source.relative_to(examples_dir).with_suffix("")
            folder = gallery_dir / relative.parent
            docname = (gallery_dir / relative).relative_to(app.srcdir).as_posix()
            pages[docname] = (source, folder)
    return pages


def _check_record(source, folder):
    """Return (record, None) for a valid record, or (None, why not)."""
    record_path = folder / f"{source.stem}{RECORD_SUFFIX}"
    md5_path = folder / f"{source.name}.md5"
    if not record_path.is_file():
        return None, "no record of the run that produced this page"
    try:
        record = json.loads(record_path.read_text())
        ran_at = datetime.datetime.fromisoformat(record["ran_at"])
        record["torch"], record["devices"], record["source_md5"]  # noqa: B018
    except (ValueError, KeyError, TypeError) as error:
        return None, f"unreadable record {record_path.name} ({error})"
    if not md5_path.is_file():
        return None, "the last run of this page did not finish"
    last_success = md5_path.read_text().strip()
    if last_success != _source_md5(source):
        return None, "the script changed after its last successful run"
    if last_success != record["source_md5"]:
        return None, "the record describes a run of another version of the script"
    finished = datetime.datetime.fromtimestamp(md5_path.stat().st_mtime, datetime.UTC)
    if finished < ran_at - datetime.timedelta(seconds=2):
        return None, "the recorded run did not finish"
    return record, None


def force_run_of_unrecorded(app):
    """Make Sphinx-Gallery re-run examples that lack a valid record.

    Only examples this build executes anyway (plot_gallery on, path matching
    filename_pattern) are touched: deleting the ``.md5`` of one it would not
    execute would drop that page's output.
    """
    gallery_conf = app.config.sphinx_gallery_conf
    if not gallery_conf.get("plot_gallery"):
        return
    for source, folder in _examples(app).values():
        md5_path = folder / f"{source.name}.md5"
        if not md5_path.is_file():
            continue  # Sphinx-Gallery runs it anyway
        if not re.search(gallery_conf["filename_pattern"], str(source)):
            continue
        record, _ = _check_record(source, folder)
        if record is None:
            logger.info("verified_stamp: re-running %s to record its run", source.name)
            md5_path.unlink()


def join_devices(devices):
    """['CPU', 'NVIDIA H100 (CUDA 13.2)'] -> 'CPU and NVIDIA H100 (CUDA 13.2)'."""
    text = devices[0]
    for device in devices[1:]:
        text = _("{first} and {second}").format(first=text, second=device)
    if len(devices) == 1:
        text = _("{devices} (no CUDA device)").format(devices=text)
    return text


def _stamp(record, versions):
    ran_at = datetime.datetime.fromisoformat(record["ran_at"])
    paragraph = nodes.paragraph()
    paragraph += nodes.strong(text=_("Verified:"))
    paragraph += nodes.Text(" ")
    if versions.trusted:
        paragraph += nodes.Text(
            _("this page ran to the end on PyTorch {releases} ({devices}).").format(
                releases=", ".join(versions.passed),
                devices=version_records.describe_devices(versions.devices),
            )
        )
        paragraph += nodes.Text(" ")
    paragraph += nodes.Text(
        _(
            "Every output on it came from running it with PyTorch {torch} on "
            "{devices}, {time} UTC."
        ).format(
            torch=record["torch"],
            devices=join_devices(record["devices"]),
            time=f"{ran_at:%Y-%m-%d %H:%M}",
        )
    )
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
    page = _examples(app).get(docname)
    if page is None:
        return
    source, folder = page
    # Re-read the page whenever a run rewrites its record or finishes.
    app.env.note_dependency(str(folder / f"{source.stem}{RECORD_SUFFIX}"))
    app.env.note_dependency(str(folder / f"{source.name}.md5"))
    record, problem = _check_record(source, folder)
    app.env.note_dependency(
        str(Path(app.srcdir) / version_records.RECORDS / f"{source.stem}.json")
    )
    versions = version_records.read(app.srcdir, source)
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
            ).format(problem=problem)
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
