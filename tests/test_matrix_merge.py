"""The matrix workflow's shard-and-merge path, run for real.

Two tiny pages under two releases: each release as its own
``tools/matrix.py run`` process writing its own folder (``--records``), as the
workflow's shard jobs do, then ``tools/matrix.py merge`` over both folders,
equal to one unsharded run's records but for the run's time (``seconds``,
``ran_at``); and a conflicting pair of shards refused. It uses the two
releases' matrix environments (made first where missing, as on a fresh
machine, by the helper the notebook kernels use), and the runs make no other:
the scratch project's matrix.toml names them exactly as versions/matrix.toml
does, so their requirements, and so their folders, are the same.

The pure merge logic is tested in tests/unit/test_matrix.py.
"""

import json
import os
import shutil
import subprocess
import sys

import envs
import matrix
import pytest

from pagelib import contract
from tests.support import pages
from tests.support.helpers import (
    MATRIX,
    example_source,
    pinned_torch,
    project_with_example,
    release_python,
)

# Two releases on either side of the pages' floor: the pinned one, where they
# pass, and the one before it, where one stops below its floor.
PINNED = pinned_torch()
PREVIOUS = MATRIX["releases"][-2]["torch"]
RELEASES = [PREVIOUS, PINNED]
BODY = """\
values = torch.arange(4.0)
torch.testing.assert_close(values.sum(), torch.tensor(6.0))
print(values.sum().item())
"""
OTHER_BODY = """\
values = torch.ones(3)
torch.testing.assert_close(values.sum(), torch.tensor(3.0))
print(values.sum().item())
"""
VOLATILE = ("seconds", "ran_at")


def older_floor(source):
    """``source`` with its floor lowered to the release before the pinned one."""
    (pinned_major, pinned_minor) = PINNED.split(".")[:2]
    (major, minor) = PREVIOUS.split(".")[:2]
    return source.replace(
        f"({pinned_major}, {pinned_minor})", f"({major}, {minor})"
    ).replace(
        f"PyTorch {pinned_major}.{pinned_minor} or later",
        f"PyTorch {major}.{minor} or later",
    )


def matrix_toml():
    """versions/matrix.toml with the two releases only, each as it is there."""
    packages = ", ".join(json.dumps(p) for p in MATRIX["pages"]["packages"])
    text = f"[pages]\npackages = [{packages}]\n"
    for release in MATRIX["releases"]:
        if release["torch"] in RELEASES:
            with_ = ", ".join(json.dumps(w) for w in release.get("with", []))
            text += f'\n[[releases]]\ntorch = "{release["torch"]}"\nwith = [{with_}]\n'
    return text


def environments():
    return sorted(path.name for path in (envs.cache_home() / "matrix").glob("torch-*"))


def matrix_py(project, *args, timeout=300, env=None):
    return subprocess.run(
        [sys.executable, "tools/matrix.py", *args],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
        env=None if env is None else {**without_toolkits(os.environ), **env},
    )


def without_toolkits(environ):
    """The environment less the variables that name CUDA toolkits."""
    return {k: v for k, v in environ.items() if not k.startswith("CUDA_HOME")}


def toolkits(folder, release):
    """A stand-in for /usr/local holding a CUDA toolkit (a folder with a
    bin/nvcc) of the CUDA major version ``release``'s torch was built with:
    the GPU lane runs nothing without one."""
    venv = envs.matrix_venv(
        next(r for r in MATRIX["releases"] if r["torch"] == release)
    )
    cuda = matrix.torch_cuda_version(venv[0])
    nvcc = folder / f"cuda-{cuda}" / "bin" / "nvcc"
    nvcc.parent.mkdir(parents=True)
    nvcc.write_text("#!/bin/sh\n")
    return {"PYTORCH_SITE_CUDA_TOOLKITS": str(folder)}


def without_run_time(records):
    return {
        page: {
            release: {k: v for k, v in record.items() if k not in VOLATILE}
            for release, record in by_release.items()
        }
        for page, by_release in records.items()
    }


def read(folder):
    return {path.stem: json.loads(path.read_text()) for path in folder.glob("*.json")}


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("shards")
    first = example_source("Shard A", BODY)
    project = project_with_example(tmp_path, "shard_a.py", first, records=False)
    second = older_floor(example_source("Shard B", OTHER_BODY))
    (project / "advanced" / "shard_b.py").write_text(second)
    (project / "versions" / "records").mkdir(parents=True)
    (project / "versions" / "matrix.toml").write_text(matrix_toml())
    # The scratch project must name the very environments the real one has.
    listed = subprocess.run(
        [
            sys.executable,
            "-c",
            "import json, sys; sys.path.insert(0, 'tools'); import envs; "
            "print(json.dumps([str(envs.matrix_venv(r)[0]) "
            "for r in envs.all_releases()]))",
        ],
        cwd=project,
        capture_output=True,
        text=True,
        check=True,
    )
    real = [
        envs.matrix_venv(r)[0] for r in MATRIX["releases"] if r["torch"] in RELEASES
    ]
    assert json.loads(listed.stdout) == [str(path) for path in real]
    for release in RELEASES:
        release_python(release)
    return project


def test_two_shards_merged_equal_one_unsharded_run(project):
    before = environments()
    # The shards, at once, as separate processes writing separate folders.
    shards = [project / f"shard-{release}" for release in RELEASES]
    running = [
        subprocess.Popen(
            [sys.executable, "tools/matrix.py", "run", "--release", release]
            + ["--records", str(folder), "--jobs", "1"],
            cwd=project,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            stdin=subprocess.DEVNULL,
        )
        for release, folder in zip(RELEASES, shards, strict=True)
    ]
    for process in running:
        output, _ = process.communicate(timeout=300)
        assert process.returncode == 0, output[-3000:]
    for release, folder in zip(RELEASES, shards, strict=True):
        for page in read(folder).values():
            assert list(page) == [release]  # a shard holds its release only
    merged = project / "merged"
    merging = matrix_py(project, "merge", "--into", str(merged), *map(str, shards))
    assert merging.returncode == 0, merging.stderr

    whole = matrix_py(project, "run", "--jobs", "2")
    assert whole.returncode == 0, whole.stdout[-3000:] + whole.stderr[-3000:]
    unsharded = read(project / "versions" / "records")

    assert without_run_time(read(merged)) == without_run_time(unsharded)
    for page in ("shard_a", "shard_b"):
        assert (merged / f"{page}.json").read_text().count("code_digest") == 2
    results = {
        page: {release: record["result"] for release, record in by_release.items()}
        for page, by_release in unsharded.items()
    }
    assert results == {
        "shard_a": {PREVIOUS: "below-floor", PINNED: "pass"},
        "shard_b": {PREVIOUS: "pass", PINNED: "pass"},
    }
    assert environments() == before, "the test created a matrix environment"


def test_a_conflicting_pair_of_shards_is_refused(project, tmp_path):
    page = project / "advanced" / "shard_a.py"
    digest = contract.code_digest(page)
    record = pages.record(PINNED, code_digest=digest)
    one, two = tmp_path / "one", tmp_path / "two"
    for folder, result in ((one, "pass"), (two, "fail")):
        folder.mkdir()
        (folder / "shard_a.json").write_text(
            json.dumps({PINNED: {**record, "result": result}})
        )
    into = tmp_path / "records"
    shutil.copytree(project / "versions" / "records", into)
    before = read(into)
    merging = matrix_py(project, "merge", "--into", str(into), str(one), str(two))
    assert merging.returncode == 1
    assert (
        f"shard_a, torch {PINNED}, code {digest}: pass in {one} but fail in {two}"
        in merging.stderr
    )
    assert read(into) == before


def test_the_gpu_lane_fails_pages_that_did_not_run_on_cuda(project, tmp_path):
    # The tiny pages print devices ['cpu']: under --require-cuda they fail,
    # here because torch sees no GPU, on a GPU machine because their devices
    # line lacks cuda.
    folder = tmp_path / "gpu-shard"
    process = matrix_py(
        project,
        "run",
        "--release",
        PINNED,
        "--records",
        str(folder),
        "--require-cuda",
        "--strict",
        env=toolkits(tmp_path / "local", PINNED),
    )
    assert process.returncode == 1, process.stdout[-3000:] + process.stderr[-3000:]
    records = read(folder)
    assert sorted(records) == ["shard_a", "shard_b"]
    for by_release in records.values():
        assert by_release[PINNED]["result"] == "fail"
        assert by_release[PINNED]["error"].startswith("--require-cuda: ")


def test_the_gpu_lane_runs_nothing_without_the_release_cuda_toolkit(project, tmp_path):
    # A runner without the toolkit would record the pages that build CUDA
    # kernels as failed on every release; the release is refused instead,
    # by name, and records nothing.
    folder = tmp_path / "gpu-shard"
    (tmp_path / "local").mkdir()
    process = matrix_py(
        project,
        "run",
        "--release",
        PINNED,
        "--records",
        str(folder),
        "--require-cuda",
        env={"PYTORCH_SITE_CUDA_TOOLKITS": str(tmp_path / "local")},
    )
    assert process.returncode == 1, process.stdout[-3000:] + process.stderr[-3000:]
    assert f"torch {PINNED}: not run: --require-cuda: no CUDA " in process.stdout
    assert "toolkit for its CUDA" in process.stdout
    assert not folder.exists()
