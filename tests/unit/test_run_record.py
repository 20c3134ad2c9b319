"""The record of a page's run (pagelib/hooks.record_execution writes it,
pagelib/run_record.check trusts it): trusted only when it describes the run
whose output the page shows."""

import json
import os
import sys
import time
from types import SimpleNamespace

import pytest
from sphinx_gallery.utils import get_md5sum

from pagelib import hooks, run_record


class FakeTorch:
    """What run_record reads of torch, without importing it (a second)."""

    __version__ = "2.9.1+planted"

    def __init__(self, cuda):
        self.version = SimpleNamespace(cuda="12.8")
        self.cuda = SimpleNamespace(
            is_available=lambda: cuda, get_device_name=lambda index: "Planted GPU"
        )


@pytest.fixture(autouse=True)
def torch(monkeypatch):
    fake = FakeTorch(cuda=False)
    monkeypatch.setitem(sys.modules, "torch", fake)
    return fake


def _gallery(tmp_path):
    (tmp_path / "advanced").mkdir()
    (tmp_path / "tutorials").mkdir()
    source = tmp_path / "advanced" / "page.py"
    source.write_text('"""\nPage\n====\n"""\nprint(1)\n')
    conf = {
        "src_dir": str(tmp_path),
        "examples_dirs": "advanced",
        "gallery_dirs": "tutorials",
    }
    return conf, source, tmp_path / "tutorials"


def test_record_of_a_finished_run_is_trusted(tmp_path):
    conf, source, gallery = _gallery(tmp_path)
    hooks.record_execution(conf, "page.py")
    record = json.loads((gallery / "page.verified.json").read_text())
    assert (record["torch"], record["devices"]) == ("2.9.1+planted", ["CPU"])
    # Sphinx-Gallery writes the .md5 once the run has finished.
    (gallery / "page.py.md5").write_text(record["source_md5"])
    assert run_record.check(source, gallery) == (record, None)


def test_record_is_not_trusted_once_the_script_changes(tmp_path):
    conf, source, gallery = _gallery(tmp_path)
    hooks.record_execution(conf, "page.py")
    record = json.loads((gallery / "page.verified.json").read_text())
    (gallery / "page.py.md5").write_text(record["source_md5"])
    source.write_text(source.read_text() + "print(2)\n")
    record, problem = run_record.check(source, gallery)
    assert record is None and "changed" in problem


def test_record_of_a_run_that_did_not_finish_is_not_trusted(tmp_path):
    conf, source, gallery = _gallery(tmp_path)
    md5 = gallery / "page.py.md5"
    md5.write_text(get_md5sum(source, mode="t"))
    # The .md5 is left from a success long ago; the recorded run came later
    # and never finished (it failed, so the .md5 was not rewritten).
    old = time.time() - 3600
    os.utime(md5, (old, old))
    hooks.record_execution(conf, "page.py")
    record, problem = run_record.check(source, gallery)
    assert record is None and "did not finish" in problem


def test_page_without_record_is_reported(tmp_path):
    _, source, gallery = _gallery(tmp_path)
    record, problem = run_record.check(source, gallery)
    assert record is None and "no record" in problem


def test_a_cuda_device_is_named_with_its_cuda_version(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", FakeTorch(cuda=True))
    assert run_record.devices() == (
        "2.9.1+planted",
        ["CPU", "Planted GPU (CUDA 12.8)"],
    )
