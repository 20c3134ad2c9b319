"""The landing page's cards and the verified stamp, checked without a browser.

The cards come from the example scripts' docstrings and the version matrix's
records; a script that does not state what a card needs is a build warning.
The stamp trusts a record only when it describes the run whose output the
page shows, and shows what that record says, not what is installed now.
"""

import json
import os
import re
import sys
import time

import pytest
from conftest import (
    EXAMPLES,
    GALLERY_DIR,
    REPO,
    example_source,
    make,
    project_with_example,
    run,
)

sys.path.insert(0, str(REPO / "_ext"))
from sphinx_gallery.utils import get_md5sum  # noqa: E402

from pagelib import (  # noqa: E402
    contract,  # noqa: E402
    hooks,
    run_record,
)
from pagelib import course as course_order  # noqa: E402

NO_VERSION = '''"""
A Page Without a Version
========================

This page forgot to say which PyTorch it needs. It has a second sentence.

.. grid:: 2

    .. grid-item-card:: Prerequisites

       * NumPy
"""

print("hello")
'''


@pytest.mark.parametrize("name", EXAMPLES)
def test_every_example_states_what_its_card_shows(name):
    card = contract.read_script(REPO / "advanced" / f"{name}.py")
    assert card["problems"] == []
    assert card["title"] and card["summary"]


@pytest.mark.parametrize("name", EXAMPLES)
def test_every_example_has_a_place_and_a_one_line_summary_in_the_course(name):
    summary = course_order.COURSE.get(f"{name}.py")
    assert summary, f"advanced/{name}.py is missing from pagelib/course.py"
    assert len(summary) <= 90 and "\n" not in summary


def test_reading_a_script_finds_its_title_and_intro_and_reports_no_version(tmp_path):
    script = tmp_path / "page.py"
    script.write_text(NO_VERSION)
    card = contract.read_script(script)
    assert card["title"] == "A Page Without a Version"
    assert card["summary"] == ("This page forgot to say which PyTorch it needs.")
    assert card["version"] is None
    assert any("PyTorch X.Y or later" in p for p in card["problems"])


def test_script_without_version_bullet_fails_a_strict_build(tmp_path):
    project = project_with_example(tmp_path, "no_version.py", NO_VERSION)
    process = run(
        [sys.executable, "-m", "sphinx", "-b", "html", "-W", "-q"]
        + ["-D", "plot_gallery=0", ".", "_build/html"],
        cwd=project,
        timeout=600,
    )
    assert process.returncode != 0
    assert "WARNING: tutorial card for no_version.py" in process.stderr, process.stderr[
        -3000:
    ]
    assert "PyTorch X.Y or later" in process.stderr


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
    import torch

    assert record["torch"] == torch.__version__
    assert record["devices"][0] == "CPU"
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


def test_computation_times_page_loses_its_cdn_scripts(site):
    import offline_pages

    # What Sphinx-Gallery wrote in this session's build.
    generated = (REPO / "sg_execution_times.rst").read_text()
    assert "https://" in generated  # what Sphinx-Gallery writes
    source = [generated]
    offline_pages.drop_cdn_tables(None, "sg_execution_times", source)
    assert "https://" not in source[0]
    assert ".. list-table::" in source[0] and ":ref:" in source[0]


def test_remote_assets_are_found_in_a_page():
    import offline_pages

    context = {
        "script_files": ["_static/local.js", "https://cdn.example.org/lib.js"],
        "css_files": ["//fonts.example.org/font.css"],
        "body": '<img src="../_images/a.png" srcset="http://x.org/b.png 2x">'
        '<a href="https://example.org/">a link is fetched only when followed</a>',
    }
    remote = [
        url for url in offline_pages._urls(context) if offline_pages.REMOTE.match(url)
    ]
    assert remote == [
        "https://cdn.example.org/lib.js",
        "//fonts.example.org/font.css",
        "http://x.org/b.png",
    ]


STAMPED = example_source("A Stamped Page", "print(torch.ones(2))")


def test_stamp_shows_the_recorded_run_not_the_installed_torch(tmp_path):
    # Build the page once, so that its run is recorded; then plant a record of
    # a run with another PyTorch on another device and render the page again
    # without running it. The stamp must name the recorded run.
    project = project_with_example(tmp_path, "stamped.py", STAMPED)
    first = make("html", cwd=project, timeout=600)
    assert first.returncode == 0, first.stderr[-3000:]
    record_path = project / GALLERY_DIR / "stamped.verified.json"
    record = json.loads(record_path.read_text())
    record["torch"] = "9.8.7+planted"
    record["devices"] = ["CPU", "Planted Accelerator (CUDA 99.1)"]
    record_path.write_text(json.dumps(record))
    again = make("html", cwd=project, variables=["SPHINXOPTS=-W -E -D plot_gallery=0"])
    assert again.returncode == 0, again.stderr[-3000:]
    html = (project / "_build" / "html" / GALLERY_DIR / "stamped.html").read_text()
    stamp = html[html.index("verified-stamp") :][:2000]
    assert "PyTorch 9.8.7+planted on CPU and Planted Accelerator" in stamp, stamp
    import torch

    assert f"PyTorch {torch.__version__} on" not in stamp


@pytest.mark.parametrize("name", EXAMPLES)
def test_which_page_do_i_need_lists_every_page(name):
    table = (REPO / "start_here.rst").read_text()
    assert f":ref:`sphx_glr_tutorials_{name}.py`" in table, (
        f"start_here.rst has no row for {name}"
    )


@pytest.mark.parametrize("name", EXAMPLES)
def test_no_section_is_stuck_in_a_code_cell(name):
    # A heading written in comments without `# %%` before it stays inside the
    # code cell above: the reader sees it as code, and it is not translated.
    from sphinx_gallery import py_source_parser

    _, blocks = py_source_parser.split_code_and_text_blocks(
        str(REPO / "advanced" / f"{name}.py")
    )
    stuck = [
        f"line {start + index}: {lines[index - 1]!r}"
        for label, content, start in blocks
        if label == "code"
        for lines in [content.split("\n")]
        for index in range(1, len(lines))
        if re.match(r"^# ([=\-~^])\1{3,}$", lines[index])
        and lines[index - 1].startswith("# ")
    ]
    assert not stuck, f"headings inside code cells (add `# %%` above them): {stuck}"
