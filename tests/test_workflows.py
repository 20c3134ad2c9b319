"""The workflows of .github/workflows/, rehearsed on this machine.

GitHub Actions cannot run where this project is built, so
``tests/support/workflow_rehearsal.py`` runs the workflows' jobs here, step by step,
as a runner would (see its docstring for what is real and what is a
stand-in). These tests rehearse:

* the version matrix's CPU lane on one release, the guide's way to add a
  release: the plan, the shard (``make matrix`` for real, narrowed to one
  cheap page with ``PAGES``: about 5 s of one page's run), its upload as
  upload-artifact makes it, the merge job's download as download-artifact
  v8.0.1 places one artifact, the merge, the pull request (body and title)
  and the dispatch of the site's tests on its branch; then the merge job run
  again, as "Re-run failed jobs" does;
* the GPU lane on two releases (two artifacts) on this GPU-less machine, with
  a stand-in CUDA toolkit: the pages are recorded as failed ("no CUDA
  device"), and the merge keeps the committed CPU passes and lists the
  disagreements; without a toolkit the shard runs nothing and fails;
  without GPU_RUNNER the plan stops in one line;
* the site's workflow on a push to main with the repository variable COLAB
  set (tests, a no-plot build of both editions with the Pages address, the
  deployment, and the *notebooks* job: it downloads the built notebooks and
  runs its push step for real, with one change: it pushes to a local bare
  repository instead of GitHub, whose branch ``notebooks`` every "Open in
  Colab" link of both editions is checked against), on a pull request and on
  a dispatch from another branch, on a runner with a second disk and on one
  without. One push rehearsal serves both: without COLAB the workflow differs
  only in skipping the notebooks job and leaving the links out, which
  ``test_without_colab_the_notebooks_job_is_skipped`` and the site's own
  build (no repository address, no link) check;

and check, without running anything, each job's permissions against what its
actions need, and the disk each job's environments take (``du`` of the
environments on this machine) against what the job's disk step asks for.

The runs cost about a minute of CPU: one page on one release, two torch
imports for the GPU lane, and the no-plot build.
"""

import functools
import json
import re
import subprocess
from pathlib import Path

import bench_disk
import envs
import matrix
import pytest

from tests.support.helpers import MATRIX, REPO, in_ci, pinned_torch, release_python
from tests.support.workflow_rehearsal import (
    ACTION_PERMISSIONS,
    WORKFLOWS,
    Rehearsal,
    action_name,
    lint_python,
    load_workflows,
    needed_permissions,
    show,
)

pytestmark = pytest.mark.xdist_group("workflows")

MATRIX_YML = WORKFLOWS / "matrix.yml"
SITE_YML = WORKFLOWS / "site.yml"
PINNED = pinned_torch()
PREVIOUS = MATRIX["releases"][-2]["torch"]
# The cheapest page to run: about 5 s on one release, no compiler.
PAGE = "custom_op_transforms"
GPU_RUNNER = '["self-hosted", "linux", "gpu"]'
# The caches (environments) of this machine: a runner whose caches were
# restored. Only the site's test job, which never runs the suite here, gets
# an empty ~/.cache of its own.
CACHES = {"XDG_CACHE_HOME": str(envs.cache_home().parent)}

# An ubuntu-24.04 runner's disks, in GiB free (getsentry/self-hosted#4046,
# df on ubuntu-latest, 2025-11: / 72G with 19G free, /mnt 74G with 66G free),
# and what deleting each preinstalled folder frees on its system disk
# (actions/runner-images#10386: android 12G, CodeQL 5.0G; getsentry #4046:
# .ghcup 7G; argotorg/solc-bin#86: swift 1.3G; dotnet, 2 GiB, is an estimate;
# peer-observer#447 measured 27 GiB for the SDKs together).
SYSTEM_DISK_FREE = 19
SECOND_DISK_FREE = 66
FREED = {
    "/usr/local/lib/android": 12,
    "/usr/local/.ghcup": 7,
    "/opt/hostedtoolcache/CodeQL": 5,
    "/usr/share/dotnet": 2,
    "/usr/share/swift": 1,
}
SUITE = ("bash .ci/run", "bash -n .ci/run && echo 'stand-in: the whole suite'")


@pytest.fixture(scope="module")
def rehearsal(tmp_path_factory):
    scratch = tmp_path_factory.mktemp("rehearsal")
    (scratch / "mnt").mkdir()
    return Rehearsal(
        scratch,
        disks={"/": SYSTEM_DISK_FREE, str(scratch.resolve() / "mnt"): SECOND_DISK_FREE},
        freed=FREED,
    )


def failed_steps(run):
    return {
        f"{job.job} {job.matrix}: {step.name}": show(step.output)
        for jobs in run.jobs.values()
        for job in jobs
        for step in job.steps
        if step.outcome == "failure"
    }


def committed(workspace, page):
    return json.loads((workspace / "versions" / "records" / f"{page}.json").read_text())


def report(name, text):
    """Write what a rehearsal showed to _build/workflow-rehearsal/, for a
    person to read (not under CI, where nobody does). A `make clean` running
    beside it (the site's build, in another worker) may take it away: the
    report is lost, not the test."""
    if in_ci():
        return
    folder = REPO / "_build" / "workflow-rehearsal"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    except OSError:
        pass


# -- The version matrix: the CPU lane, one release ----------------------------------


@pytest.fixture(scope="module")
def cpu_run(rehearsal):
    release_python(PINNED)
    return rehearsal.run(
        MATRIX_YML,
        "workflow_dispatch",
        inputs={"releases": PINNED, "lane": "cpu"},
        ref="refs/heads/add-a-release",
        job_env={"cpu": {**CACHES, "PAGES": PAGE}},
    )


def test_one_release_makes_one_shard_whose_records_are_merged(cpu_run):
    assert not failed_steps(cpu_run), failed_steps(cpu_run)
    assert [job.matrix for job in cpu_run.jobs["cpu"]] == [{"release": PINNED}]
    assert cpu_run.results("gpu") == "skipped"
    # One artifact, holding the release's folder.
    assert sorted(cpu_run.artifacts["records-cpu-" + PINNED]) == [
        f"{PINNED}/{PAGE}.json"
    ]
    merge = cpu_run.job("merge")
    assert (merge.workspace / "shards" / PINNED / f"{PAGE}.json").is_file()
    shard = json.loads(
        cpu_run.artifacts["records-cpu-" + PINNED][f"{PINNED}/{PAGE}.json"]
    )
    merged = committed(merge.workspace, PAGE)
    assert merged[PINNED] == shard[PINNED]
    assert merged[PINNED]["result"] == "pass"
    assert merged[PINNED]["ran_at"] != committed(REPO, PAGE)[PINNED]["ran_at"]
    # Only that record changed.
    others = {k: v for k, v in merged.items() if k != PINNED}
    assert others == {k: v for k, v in committed(REPO, PAGE).items() if k != PINNED}
    report("cpu-merged-records.json", json.dumps(merged, indent=1))


def test_the_shard_and_the_merge_show_a_release_by_page_table(cpu_run):
    shard = cpu_run.job("cpu", release=PINNED).summary
    merge = cpu_run.job("merge").summary
    for summary in (shard, merge):
        assert f"| page | {PINNED} |" in summary, summary
        assert re.search(rf"^\| {PAGE} \| ✓( new code)? \|$", summary, re.M), summary
    assert (
        "### Version matrix, CPU lane: 1 record(s) of 1 page(s) on 1 release(s)"
        in merge
    )
    report("cpu-summary.md", cpu_run.summary())


def test_the_records_pull_request_targets_the_branch_and_gets_the_tests(
    cpu_run, rehearsal
):
    branch = f"matrix/records-cpu-{cpu_run.run_id}"
    pull = rehearsal.pulls[branch]
    assert pull["base"] == "add-a-release"
    assert pull["files"] == [f"versions/records/{PAGE}.json"]
    assert pull["title"].startswith("Version matrix records, CPU lane: 1 record(s)")
    assert f"| {PAGE} |" in pull["body"]
    assert f"/actions/runs/{cpu_run.run_id})" in pull["body"]
    # GITHUB_TOKEN's pull request starts no workflow: the merge job
    # dispatches the site's tests on its branch.
    dispatches = [
        call for call in rehearsal.gh_calls() if call["argv"][:2] == ["workflow", "run"]
    ]
    assert {
        "argv": ["workflow", "run", "site.yml", "--ref", branch],
        "repo": "octo-org/custom-ops",
        "token": True,
    } in dispatches
    report("cpu-pull-request.md", f"# {pull['title']}\n\n{pull['body']}")


def test_a_rerun_of_the_merge_job_overwrites_its_artifact(cpu_run, rehearsal):
    rerun = rehearsal.run(
        MATRIX_YML,
        "workflow_dispatch",
        inputs={"releases": PINNED, "lane": "cpu"},
        ref="refs/heads/add-a-release",
        only=["merge"],
        previous=cpu_run,
    )
    assert rerun.results("merge") == "success", failed_steps(rerun)


# -- The version matrix: the GPU lane -----------------------------------------------


def toolkits(folder, releases):
    """A stand-in for /usr/local with a CUDA toolkit (bin/nvcc) of each
    release's CUDA version: the GPU runner's."""
    for release in releases:
        venv = envs.matrix_venv(
            next(r for r in envs.all_releases() if r["torch"] == release)
        )
        nvcc = folder / f"cuda-{matrix.torch_cuda_version(venv[0])}" / "bin" / "nvcc"
        nvcc.parent.mkdir(parents=True, exist_ok=True)
        nvcc.write_text("#!/bin/sh\n")
    return str(folder)


@pytest.fixture(scope="module")
def gpu_run(rehearsal, tmp_path_factory):
    for release in (PREVIOUS, PINNED):
        release_python(release)
    local = toolkits(tmp_path_factory.mktemp("local"), (PREVIOUS, PINNED))
    return rehearsal.run(
        MATRIX_YML,
        "workflow_dispatch",
        inputs={"releases": f"{PREVIOUS} {PINNED}", "lane": "gpu"},
        variables={"GPU_RUNNER": GPU_RUNNER},
        job_env={"gpu": {**CACHES, "PAGES": PAGE, "PYTORCH_SITE_CUDA_TOOLKITS": local}},
    )


def test_the_gpu_lane_records_failures_but_keeps_the_cpu_passes(gpu_run):
    assert gpu_run.results("cpu") == "skipped"
    shards = gpu_run.jobs["gpu"]
    assert [job.matrix["release"] for job in shards] == [PREVIOUS, PINNED]
    for job in shards:
        # torch sees no GPU here: the page is recorded as failed, and STRICT
        # fails the shard; its records are uploaded all the same.
        assert job.result == "failure"
        step = job.step(f"Run every page on CUDA under torch {job.matrix['release']}")
        assert "--require-cuda: no CUDA device" in step.output, show(step.output)
    # Two artifacts, each in its release's folder.
    merge = gpu_run.job("merge")
    assert merge.result == "success", failed_steps(gpu_run)
    for release in (PREVIOUS, PINNED):
        assert (merge.workspace / "shards" / release / f"{PAGE}.json").is_file()
    # The CPU lane's passes stay; nothing changed, so no pull request.
    assert committed(merge.workspace, PAGE) == committed(REPO, PAGE)
    assert merge.step("Open a pull request").outcome == "success"
    assert merge.step("Run the site's tests on the pull request").outcome == "skipped"
    summary = merge.summary
    assert f"| {PAGE} | ✓ kept, GPU ✗ | ✓ kept, GPU ✗ |" in summary, summary
    assert f"- `{PAGE}`, torch {PINNED} (GPU lane only, kept out): " in summary
    report("gpu-summary.md", gpu_run.summary())


def test_the_gpu_lane_without_a_toolkit_runs_nothing(rehearsal, tmp_path):
    run = rehearsal.run(
        MATRIX_YML,
        "workflow_dispatch",
        inputs={"releases": PINNED, "lane": "gpu"},
        variables={"GPU_RUNNER": "gpu"},
        job_env={
            "gpu": {
                **CACHES,
                "PAGES": PAGE,
                "PYTORCH_SITE_CUDA_TOOLKITS": str(tmp_path),
            }
        },
    )
    shard = run.job("gpu", release=PINNED)
    step = shard.step(f"Run every page on CUDA under torch {PINNED}")
    assert step.outcome == "failure"
    assert f"torch {PINNED}: not run: --require-cuda: no CUDA" in step.output
    assert "toolkit" in step.output
    assert f"records-gpu-{PINNED}" not in run.artifacts
    # Nothing to merge: the run fails rather than going green with nothing.
    merge = run.job("merge")
    assert merge.result == "failure"
    assert (
        "no shard of this run wrote any"
        in merge.step("Merge the shards into versions/records").output
    )


def test_the_gpu_lane_without_a_runner_stops_at_the_plan(rehearsal):
    run = rehearsal.run(
        MATRIX_YML, "workflow_dispatch", inputs={"lane": "gpu"}, variables={}
    )
    assert run.results("plan") == "failure"
    step = run.job("plan").step("List the releases of versions/matrix.toml")
    assert "set the repository variable GPU_RUNNER" in step.output
    for job in ("cpu", "gpu", "merge"):
        assert run.results(job) == "skipped"


# -- The site ------------------------------------------------------------------------


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
def notebooks_remote(rehearsal):
    """The bare repository the notebooks job pushes to, in GitHub's place."""
    remote = rehearsal.scratch / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
    return remote


@pytest.fixture(scope="module")
def push_run(rehearsal, notebooks_remote):
    original = push_script()
    stand_in = original.replace('"$REMOTE"', str(notebooks_remote))
    assert stand_in != original, "the push step no longer pushes to $REMOTE"
    return rehearsal.run(
        SITE_YML,
        "push",
        variables={"COLAB": "true"},
        job_env={
            "test": {"ROOMY_DISKS": str(rehearsal.scratch / "mnt")},
            # A build that runs no page (plot_gallery=0) and tolerates the
            # warnings of pages without their outputs.
            "build": {**CACHES, "SPHINXOPTS": "-q -D plot_gallery=0"},
        },
        replace={"Run the test suite": SUITE, PUSH_STEP: (original, stand_in)},
    )


def test_a_push_to_main_is_tested_built_and_deployed(push_run):
    assert not failed_steps(push_run), failed_steps(push_run)
    for job in ("test", "build", "deploy", "notebooks"):
        assert push_run.results(job) == "success", job
    test = push_run.job("test")
    assert test.step("Run the test suite").outcome == "success"
    files = push_run.artifacts["github-pages"]
    assert "index.html" in files and "zh_CN/index.html" in files
    assert not any(name.startswith(".") for name in files)


def test_the_tests_get_the_second_disk_when_the_system_disk_is_short(
    push_run, rehearsal
):
    test = push_run.job("test")
    mnt = rehearsal.scratch / "mnt"
    assert (Path(test.env["HOME"]) / ".cache").resolve() == mnt / "cache"
    assert test.env["TMPDIR"] == str(mnt / "tmp")
    output = test.step("Make room for the environments").output
    assert f"now a link to {mnt}/cache ({SECOND_DISK_FREE} GiB free)" in output, output


def test_without_a_second_disk_the_clean_up_makes_room(rehearsal):
    before = len(rehearsal.sudo_calls())
    run = rehearsal.run(
        SITE_YML,
        "pull_request",
        ref="refs/pull/1/merge",
        job_env={"test": {"ROOMY_DISKS": ""}},
        replace={"Run the test suite": SUITE},
        only=["test"],
    )
    test = run.job("test")
    assert test.result == "success", failed_steps(run)
    removed = {
        path
        for call in rehearsal.sudo_calls()[before:]
        if call["argv"][0] == "rm"
        for path in call["argv"][1:]
    }
    assert set(FREED) <= removed
    output = test.step("Make room for the environments").output
    freed = SYSTEM_DISK_FREE + sum(FREED.values())
    assert (
        f"{freed} GiB free for {test.env['HOME']}/.cache after the clean-up" in output
    )


def test_a_runner_that_stays_short_fails_at_once_with_the_reason(tmp_path):
    short = Rehearsal(tmp_path, disks={"/": 12}, freed={})
    run = short.run(
        SITE_YML,
        "pull_request",
        ref="refs/pull/1/merge",
        job_env={"test": {"ROOMY_DISKS": ""}},
        replace={"Run the test suite": SUITE},
        only=["test"],
    )
    test = run.job("test")
    step = test.step("Make room for the environments")
    assert step.outcome == "failure"
    assert "::error::only 12 GiB free for" in step.output
    assert test.step("Run the test suite").outcome == "skipped"


@pytest.mark.parametrize(
    ("event", "ref"),
    [("pull_request", "refs/pull/1/merge"), ("workflow_dispatch", "refs/heads/topic")],
)
def test_pull_requests_and_dispatches_are_tested_not_published(rehearsal, event, ref):
    run = rehearsal.run(
        SITE_YML,
        event,
        ref=ref,
        job_env={"test": {"ROOMY_DISKS": str(rehearsal.scratch / "mnt")}},
        replace={"Run the test suite": SUITE},
    )
    assert run.results("test") == "success", failed_steps(run)
    assert run.results("build") == "skipped"
    assert run.results("deploy") == "skipped"


def canonical(page):
    (found,) = re.findall(r'<link rel="canonical" href="([^"]+)"', page.read_text())
    return found


def notebook_links(page, site):
    """The addresses under ``site`` that the notebook a built page offers
    links to."""
    (href,) = set(
        re.findall(r'href="([^"]*_downloads/[^"]*\.ipynb)"', page.read_text())
    )
    notebook = json.loads((page.parent / href).read_text())
    prose = "\n".join(
        "".join(cell["source"])
        for cell in notebook["cells"]
        if cell["cell_type"] == "markdown"
    )
    return [
        link
        for link in re.findall(r"\]\((https://[^)]+)\)", prose)
        if link.startswith(site)
    ]


def test_each_edition_names_its_own_pages_at_the_pages_address(push_run):
    html = push_run.job("build").workspace / "_build" / "html"
    site = "https://octo-org.github.io/custom-ops/"
    page = "tutorials/python_custom_ops.html"
    assert canonical(html / page) == site + page
    assert canonical(html / "zh_CN" / page) == site + "zh_CN/" + page
    assert canonical(html / "zh_CN" / "index.html") == site + "zh_CN/index.html"
    english = notebook_links(html / page, site)
    chinese = notebook_links(html / "zh_CN" / page, site)
    assert english and chinese
    assert all(link.startswith(site + "tutorials/") for link in english), english
    assert all(link.startswith(site + "zh_CN/tutorials/") for link in chinese), chinese
    assert [link.replace("zh_CN/", "") for link in chinese] == english


def test_every_colab_link_names_a_notebook_the_workflow_publishes(
    push_run, notebooks_remote
):
    published = set(
        subprocess.run(
            ["git", "ls-tree", "-r", "--name-only", "notebooks"],
            cwd=notebooks_remote,
            check=True,
            capture_output=True,
            text=True,
        ).stdout.split()
    )
    html = push_run.job("build").workspace / "_build" / "html"
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


# -- Permissions --------------------------------------------------------------------


@functools.cache
def workflows():
    return load_workflows()


def test_every_action_used_has_a_row_in_the_permissions_table():
    used = {
        action_name(step["uses"])
        for data in workflows().values()
        for job in data["jobs"].values()
        for step in job.get("steps", [])
        if "uses" in step
    }
    assert used <= set(ACTION_PERMISSIONS), used - set(ACTION_PERMISSIONS)
    assert set(ACTION_PERMISSIONS) <= used, set(ACTION_PERMISSIONS) - used


def test_each_job_has_exactly_the_permissions_its_actions_need():
    wrong = {}
    for path, data in workflows().items():
        assert data.get("permissions") == {}, f"{path.name}: workflow permissions"
        for name, job in data["jobs"].items():
            needed = needed_permissions(job)
            given = job.get("permissions")
            if given != needed:
                wrong[f"{path.name} {name}"] = {"given": given, "needed": needed}
    assert not wrong, wrong


# -- Triggers ------------------------------------------------------------------------


def test_the_matrix_runs_only_by_hand():
    # A push to main that adds a release would fail main's build until its
    # records land; the matrix runs on the branch that adds the release.
    triggers = workflows()[MATRIX_YML]["on"]
    assert set(triggers) == {"workflow_dispatch"}


def test_dependabot_keeps_the_pinned_actions_current():
    script = (
        "import json, sys\nfrom ruamel.yaml import YAML\n"
        "print(json.dumps(YAML(typ='safe').load(open(sys.argv[1]))))\n"
    )
    process = subprocess.run(
        [str(lint_python()), "-c", script, str(REPO / ".github" / "dependabot.yml")],
        capture_output=True,
        text=True,
        check=True,
    )
    updates = json.loads(process.stdout)["updates"]
    assert {"package-ecosystem": "github-actions", "directory": "/"}.items() <= (
        updates[0].items()
    )


# -- Caches --------------------------------------------------------------------------


def test_only_mains_build_saves_caches_and_they_fit_the_budget():
    # GitHub keeps 10 GB of caches per repository. Saved: uv's cache of the
    # site's wheels (2.9 GB compressed, measured) and the compiler caches.
    saving = {}
    for path, data in workflows().items():
        for name, job in data["jobs"].items():
            for step in job.get("steps", []):
                action = action_name(step.get("uses", ""))
                if action.startswith("actions/cache"):
                    key = step["with"]["key"]
                    assert "runner.os" in key and "runner.arch" in key, key
                if action == "actions/cache":  # restores, then saves
                    saving.setdefault(f"{path.name} {name}", []).append(
                        step["with"]["path"].strip()
                    )
    assert saving == {
        "matrix.yml cpu": [
            "~/.cache/pytorch-custom-ops-site/matrix/caches-${{ matrix.release }}"
        ],
        "site.yml build": [
            "~/.cache/uv",
            "~/.cache/pytorch-custom-ops-site/inductor-cache\n"
            "~/.cache/pytorch-custom-ops-site/torch-extensions",
        ],
    }
    # The compiler caches' paths are where make and make matrix keep them.
    assert envs.release_caches("X")["TORCHINDUCTOR_CACHE_DIR"].endswith(
        "pytorch-custom-ops-site/matrix/caches-X/inductor"
    )


# -- Disk ------------------------------------------------------------------------------


def disk_step_need(workflow, job):
    """The GiB a job's `.ci/free-disk` step asks for."""
    for step in workflows()[workflow]["jobs"][job]["steps"]:
        found = re.search(r"\.ci/free-disk (\d+)", step.get("run", ""))
        if found:
            return int(found.group(1))
    raise AssertionError(f"{workflow.name} {job} has no .ci/free-disk step")


# Beyond the environments: the build's and the tests' files, the compiler
# caches (under a GiB each here), and for the build job the archive of uv's
# cache while it is restored (about 3 GiB).
MARGIN_GIB = {"test": 3, "cpu": 2, "build": 4}


def test_each_job_asks_for_the_disk_its_environments_were_measured_to_take():
    # The figures are measured by `make bench-disk` (tools/bench_disk.py), for
    # the site's pins and the matrix as they are now.
    figures = json.loads(bench_disk.FIGURES.read_text())
    assert figures["measured_for"] == bench_disk.key(), (
        "the requirements or the version matrix changed since the disk was "
        "measured: run make bench-disk and commit .ci/environment-disk.json"
    )
    for job, workflow in (("test", SITE_YML), ("cpu", MATRIX_YML), ("build", SITE_YML)):
        need = disk_step_need(workflow, job)
        measured = figures["jobs"][job]
        assert measured + MARGIN_GIB[job] <= need, (job, measured, need)
        # What the runner offers: its system disk after the clean-up, or its
        # second disk.
        assert need <= max(SYSTEM_DISK_FREE + sum(FREED.values()), SECOND_DISK_FREE), (
            job
        )


def test_the_disk_step_runs_first():
    # Before setup-python and the caches fill the disk it measures.
    for workflow, job in ((SITE_YML, "test"), (MATRIX_YML, "cpu")):
        steps = workflows()[workflow]["jobs"][job]["steps"]
        names = [step.get("uses", step.get("run", "")) for step in steps]
        disk = next(i for i, n in enumerate(names) if ".ci/free-disk" in n)
        assert all(
            "setup-python" not in n and "cache" not in n for n in names[:disk]
        ), names


PLANTED_RUN = """
name: Planted
on: push
permissions: {}
jobs:
  job:
    runs-on: ubuntu-24.04
    steps:
      - name: Copy the files
        run: cp $SOURCE ${{ runner.temp }}/there
"""


def test_a_run_step_shellcheck_finds_fault_with_fails_the_workflow_lint(tmp_path):
    for workflow in WORKFLOWS.glob("*.yml"):  # the real ones are clean
        clean = subprocess.run(
            [str(lint_python()), "tools/workflow_shell.py", str(workflow)],
            cwd=REPO, capture_output=True, text=True, check=False,
        )  # fmt: skip
        assert clean.returncode == 0, clean.stdout
    planted = tmp_path / "planted.yml"
    planted.write_text(PLANTED_RUN)
    found = subprocess.run(
        [str(lint_python()), "tools/workflow_shell.py", str(planted)],
        cwd=REPO, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert found.returncode == 1, found.stdout + found.stderr
    assert "job job, step 'Copy the files'" in found.stdout
    assert "SC2086" in found.stdout  # $SOURCE unquoted
