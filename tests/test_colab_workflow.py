"""site.yml with the repository variable COLAB set: every tutorial's "Open in
Colab" link names a notebook that the workflow publishes at that path.

The workflow is rehearsed on a push to main (``tests/workflow_rehearsal.py``,
as ``tests/test_workflows.py`` does without COLAB): the build job builds both
editions with no page run, gathers the notebooks and uploads them; the
*notebooks* job downloads them and runs its push step for real, with one
change: it pushes to a local bare repository instead of GitHub. The test then
reads the branch ``notebooks`` of that repository and checks each link of
each built tutorial, in both editions, against it.
"""

import re
import subprocess

import pytest

from tests.test_workflows import (
    CACHES,
    FREED,
    SECOND_DISK_FREE,
    SITE_YML,
    SUITE,
    SYSTEM_DISK_FREE,
    failed_steps,
    workflows,
)

pytestmark = pytest.mark.xdist_group("workflows")

PUSH_STEP = "Push them to the branch notebooks"
COLAB = re.compile(
    r'class="colab-link[^"]*" href="https://colab\.research\.google\.com/github/'
    r'octo-org/custom-ops/blob/notebooks/([^"]+)"'
)


def push_script():
    for step in workflows()[SITE_YML]["jobs"]["notebooks"]["steps"]:
        if step.get("name") == PUSH_STEP:
            return step["run"].strip()
    raise AssertionError(f"site.yml has no step {PUSH_STEP!r}")


@pytest.fixture(scope="module")
def colab_run(tmp_path_factory):
    from tests.workflow_rehearsal import Rehearsal

    scratch = tmp_path_factory.mktemp("colab-rehearsal")
    (scratch / "mnt").mkdir()
    remote = scratch / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
    original = push_script()
    stand_in = original.replace('"$REMOTE"', str(remote))
    assert stand_in != original, "the push step no longer pushes to $REMOTE"
    disks = {"/": SYSTEM_DISK_FREE, str(scratch.resolve() / "mnt"): SECOND_DISK_FREE}
    run = Rehearsal(scratch, disks=disks, freed=FREED).run(
        SITE_YML,
        "push",
        variables={"COLAB": "true"},
        job_env={
            "test": {"ROOMY_DISKS": str(scratch / "mnt")},
            "build": {**CACHES, "SPHINXOPTS": "-q -D plot_gallery=0"},
        },
        replace={"Run the test suite": SUITE, PUSH_STEP: (original, stand_in)},
    )
    return run, remote


def test_every_colab_link_names_a_notebook_the_workflow_publishes(colab_run):
    run, remote = colab_run
    assert not failed_steps(run), failed_steps(run)
    for job in ("build", "deploy", "notebooks"):
        assert run.results(job) == "success", job
    published = set(
        subprocess.run(
            ["git", "ls-tree", "-r", "--name-only", "notebooks"],
            cwd=remote,
            check=True,
            capture_output=True,
            text=True,
        ).stdout.split()
    )
    html = run.job("build").workspace / "_build" / "html"
    tutorials = sorted((html / "tutorials").glob("*.html"))
    pages = [p for p in tutorials if p.stem not in ("index", "sg_execution_times")]
    assert pages
    for page in pages:
        for edition, folder in [("", "tutorials"), ("zh_CN/", "tutorials_zh_CN")]:
            built = html / edition / "tutorials" / page.name
            links = COLAB.findall(built.read_text())
            assert links == [f"{folder}/{page.stem}.ipynb"], (built, links)
            assert links[0] in published, (links[0], sorted(published)[:5])


def test_without_colab_the_notebooks_job_is_skipped():
    notebooks = workflows()[SITE_YML]["jobs"]["notebooks"]
    assert notebooks["if"] == "vars.COLAB == 'true'"
    assert notebooks["permissions"] == {"contents": "write"}
