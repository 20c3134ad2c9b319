"""The record of the run that produced a page's output in this build.

Sphinx-Gallery executes an example only when its source changed since its
last successful run; otherwise the page keeps the output of that earlier run.
So the record is written when the example starts (``hooks.record_execution``)
and checked when the page renders (``check``):

* ``<gallery>/<stem>.verified.json`` holds the PyTorch version, the devices,
  the Python, the time, Sphinx-Gallery's own digest of the script that ran
  (``source_md5``, ``sphinx_gallery.utils.get_md5sum``) and its code digest.
* Sphinx-Gallery writes ``<gallery>/<stem>.py.md5`` only after the example ran
  to the end. A record naming that same digest, and no newer than it,
  describes the run that produced the page.
"""

import datetime
import json
import platform
import sys
from pathlib import Path

from sphinx_gallery.utils import get_md5sum

from pagelib import contract

SUFFIX = ".verified.json"


def path_for(source, folder):
    return Path(folder) / f"{Path(source).stem}{SUFFIX}"


def devices():
    """(torch version, devices an example can use here: the CPU, and CUDA)."""
    torch = sys.modules.get("torch")
    if torch is None:
        import torch
    found = ["CPU"]
    try:
        if torch.cuda.is_available():
            name = torch.cuda.get_device_name(0)
            found.append(f"{name} (CUDA {torch.version.cuda})")
    except Exception as error:  # noqa: BLE001 - a stamp must not stop a build
        found.append(f"a CUDA device whose name could not be read ({error})")
    return torch.__version__, found


def write(source, folder):
    """Record the run of ``source`` that is about to start."""
    Path(folder).mkdir(parents=True, exist_ok=True)
    torch_version, found = devices()
    record = {
        "torch": torch_version,
        "devices": found,
        "python": platform.python_version(),
        "ran_at": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "source_md5": get_md5sum(source, mode="t"),
        "code_digest": contract.code_digest(source),
    }
    path_for(source, folder).write_text(json.dumps(record, indent=2) + "\n")


def check(source, folder):
    """(record, None) for a valid record of the page's last run, or (None, why)."""
    source, folder = Path(source), Path(folder)
    record_path = path_for(source, folder)
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
    if last_success != get_md5sum(source, mode="t"):
        return None, "the script changed after its last successful run"
    if last_success != record["source_md5"]:
        return None, "the record describes a run of another version of the script"
    finished = datetime.datetime.fromtimestamp(md5_path.stat().st_mtime, datetime.UTC)
    if finished < ran_at - datetime.timedelta(seconds=2):
        return None, "the recorded run did not finish"
    return record, None
