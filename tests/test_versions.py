"""Every page runs on its own on its floor release, as its records say.

The version matrix (``make matrix``) ran every page under every release of
``versions/matrix.toml`` and committed the records; the build shows each
page's floor and releases from them, and tests/unit/test_pages.py checks
that those records are current and consistent. Here CI runs each page again
on its floor release, on its own: as its downloaded notebook, in a kernel of
that release (the shipping pages, whose notebooks run on the pinned release,
run on their floor in a reader's plain venv: test_download_environments).
The build ran every page on the pinned release.
"""

import json
import sys

import pytest

from tests.support.helpers import (
    EXAMPLES,
    MATRIX,
    WHEEL_PAGES,
    floor_release,
    pinned_torch,
    project_with_example,
    run,
)
from tests.support.pages import page_source

# The shipping pages run on their floor in test_download_environments.
NOTEBOOK_FLOORS = [name for name in EXAMPLES if name not in WHEEL_PAGES]


@pytest.mark.parametrize("name", NOTEBOOK_FLOORS)
def test_page_runs_standalone_on_its_floor_release(executed_notebooks, name):
    # Its downloaded notebook ran on the floor, from an empty folder in a
    # fresh interpreter: that run stands for the standalone one.
    release = floor_release(name)
    assert release, f"{name} has no measured floor"
    notebook, error, version = executed_notebooks[name]
    assert error is None, str(error)[-4000:]
    assert version.split("+")[0] == release, version


BELOW_FLOOR = page_source("Too new", 'print("unreachable")\n', floor="99.0")


def test_matrix_records_a_clean_stop_and_reports_a_release_it_cannot_install(
    tmp_path,
):
    project = project_with_example(tmp_path, "too_new.py", BELOW_FLOOR, records=False)
    versions = project / "versions"
    versions.mkdir()
    pinned = next(r for r in MATRIX["releases"] if r["torch"] == pinned_torch())
    packages = ", ".join(f'"{p}"' for p in MATRIX["pages"]["packages"])
    (versions / "matrix.toml").write_text(
        f"[pages]\npackages = [{packages}]\n\n"
        '[[releases]]\ntorch = "0.0.1"\n\n'
        f'[[releases]]\ntorch = "{pinned_torch()}"\n'
        + "with = ["
        + ", ".join(f'"{w}"' for w in pinned["with"])
        + "]\n"
    )
    process = run(
        [sys.executable, "tools/matrix.py", "run", "--page", "too_new"],
        cwd=project,
        timeout=900,
    )
    output = process.stdout + process.stderr
    assert "torch 0.0.1 could not be installed" in output, output[-3000:]
    assert process.returncode != 0
    record = json.loads((versions / "records" / "too_new.json").read_text())
    assert list(record) == [pinned_torch()]
    assert record[pinned_torch()]["result"] == "below-floor"
    assert "needs PyTorch 99.0 or later" in record[pinned_torch()]["error"]
