"""Every example is a script a reader can download and run on its own."""

import sys

import pytest
from conftest import EXAMPLES, REPO, run


@pytest.mark.parametrize("name", EXAMPLES)
def test_example_runs_standalone(name, tmp_path):
    # Run from an empty directory, so the script can rely on nothing in the
    # repository but itself.
    script = REPO / "advanced" / f"{name}.py"
    # -X faulthandler: should the interpreter itself crash, its traceback
    # shows where.
    command = [sys.executable, "-X", "faulthandler", str(script)]
    process = run(command, cwd=tmp_path, timeout=900)
    assert process.returncode == 0, (
        f"python advanced/{name}.py exited with {process.returncode}:\n"
        f"{process.stderr[-4000:]}"
    )
