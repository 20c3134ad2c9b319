"""The landing page's cards and the verified stamp, in a scratch build.

The cards come from the example scripts' docstrings and the version matrix's
records; a script that does not state what a card needs is a build warning.
The stamp shows what the record of the page's run says, not what is
installed now. (Reading a card and trusting a run record: tests/unit.)
"""

import json
import sys

from tests.support.helpers import (
    GALLERY_DIR,
    example_source,
    make,
    project_with_example,
    run,
)
from tests.support.pages import NO_VERSION


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
