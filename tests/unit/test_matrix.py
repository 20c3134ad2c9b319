"""The version matrix's shards and their merge (tools/matrix.py), the GPU
lane's verdict (``--require-cuda``), the fan-out's list of releases
(tools/envs.py releases) and a run's verdict, without running a real page
(a stand-in page of a few lines runs in a temporary directory of its own)."""

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

import envs
import matrix
import pytest

from tests.support import pages

REPO = pages.REPO


def record(result="pass", digest="aaaa", **more):
    error = None if result == "pass" else "RuntimeError: boom"
    return pages.record("2.15.0", result, code_digest=digest, error=error, **more)


def write_shard(folder, records):
    for page, by_release in records.items():
        for release, one in by_release.items():
            matrix.save_record(page, release, one, folder)
    return folder


def test_merge_of_two_shards_is_their_union(tmp_path):
    first = {"a": {"2.14.1": record()}, "b": {"2.14.1": record("below-floor")}}
    second = {"a": {"2.15.0": record()}, "b": {"2.15.0": record("fail")}}
    merged = matrix.merge_records([("one", first), ("two", second)])
    assert merged == {
        "a": {"2.14.1": first["a"]["2.14.1"], "2.15.0": second["a"]["2.15.0"]},
        "b": {"2.14.1": first["b"]["2.14.1"], "2.15.0": second["b"]["2.15.0"]},
    }


def test_a_conflicting_pair_is_refused_and_named():
    first = {"a": {"2.15.0": record("pass")}, "b": {"2.15.0": record()}}
    second = {"a": {"2.15.0": record("fail")}, "b": {"2.15.0": record("below-floor")}}
    with pytest.raises(matrix.Conflict) as refused:
        matrix.merge_records([("one", first), ("two", second)])
    message = str(refused.value)
    assert "2 conflicting record(s)" in message
    assert "a, torch 2.15.0, code aaaa: pass in one but fail in two" in message
    assert "b, torch 2.15.0, code aaaa: pass in one but below-floor in two" in message


def test_the_same_result_twice_keeps_the_later_run():
    early = record(ran_at="2026-01-01T00:00:00+00:00", seconds=5.0)
    late = record(ran_at="2026-02-01T00:00:00+00:00", seconds=7.0)
    shards = [("x", {"a": {"2.15.0": early}}), ("y", {"a": {"2.15.0": late}})]
    assert matrix.merge_records(shards)["a"]["2.15.0"] is late
    assert matrix.merge_records(shards[::-1])["a"]["2.15.0"] is late


def test_records_of_other_code_do_not_conflict():
    old = record("fail", digest="old0", ran_at="2026-01-01T00:00:00+00:00")
    new = record("pass", digest="new0", ran_at="2026-02-01T00:00:00+00:00")
    shards = [("x", {"a": {"2.15.0": new}}), ("y", {"a": {"2.15.0": old}})]
    assert matrix.merge_records(shards)["a"]["2.15.0"] is new


def run_merge(*args):
    return subprocess.run(
        [sys.executable, str(REPO / "tools" / "matrix.py"), "merge", *map(str, args)],
        capture_output=True,
        text=True,
    )


def test_the_merge_command_writes_the_union_over_the_folder(tmp_path):
    into = write_shard(
        tmp_path / "records",
        {"a": {"2.14.1": record("fail")}, "c": {"2.15.0": record()}},
    )
    one = write_shard(tmp_path / "one", {"a": {"2.14.1": record()}})
    two = write_shard(tmp_path / "two", {"a": {"2.15.0": record()}})
    merged = run_merge("--into", into, one, two)
    assert merged.returncode == 0, merged.stderr
    assert "a torch 2.14.1: fail -> pass" in merged.stdout
    written = matrix.load_records(into)
    assert written == {
        "a": {"2.14.1": record(), "2.15.0": record()},
        "c": {"2.15.0": record()},
    }
    # In release order, as `make matrix` writes them.
    assert list(json.loads((into / "a.json").read_text())) == ["2.14.1", "2.15.0"]


def test_the_merge_command_refuses_a_conflict_and_writes_nothing(tmp_path):
    into = write_shard(tmp_path / "records", {"c": {"2.15.0": record()}})
    before = {path.name: path.read_text() for path in into.iterdir()}
    one = write_shard(tmp_path / "one", {"a": {"2.15.0": record("pass")}})
    two = write_shard(tmp_path / "two", {"a": {"2.15.0": record("fail")}})
    merged = run_merge("--into", into, one, two)
    assert merged.returncode == 1
    assert "conflicting record(s), nothing merged" in merged.stderr
    assert f"a, torch 2.15.0, code aaaa: pass in {one} but fail in {two}" in (
        merged.stderr
    )
    assert {path.name: path.read_text() for path in into.iterdir()} == before


def test_the_merge_command_needs_folders(tmp_path):
    merged = run_merge("--into", tmp_path, tmp_path / "missing")
    assert merged.returncode != 0
    assert "is not a folder of records" in merged.stderr


def test_require_cuda_fails_a_pass_without_cuda():
    on_cuda = record(devices=["cpu", "cuda"])
    assert matrix.require_cuda(on_cuda, cuda=True) is on_cuda
    cpu_only = matrix.require_cuda(record(devices=["cpu"]), cuda=True)
    assert cpu_only["result"] == "fail"
    assert "without cuda" in cpu_only["error"]
    no_line = matrix.require_cuda(record(devices=None), cuda=True)
    assert no_line["result"] == "fail"
    no_gpu = matrix.require_cuda(on_cuda, cuda=False)
    assert no_gpu["result"] == "fail"
    assert "torch.cuda.is_available() is False" in no_gpu["error"]


def test_require_cuda_keeps_failures_and_stops_below_the_floor():
    for result in ("fail", "below-floor"):
        kept = record(result, devices=None)
        assert matrix.require_cuda(kept, cuda=False) is kept


def test_the_fan_out_lists_every_release_of_matrix_toml():
    listed = subprocess.run(
        [sys.executable, str(REPO / "tools" / "envs.py"), "releases", "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(listed.stdout) == [r["torch"] for r in envs.all_releases()]
    below = envs.load_matrix()["below"][0]["torch"]
    assert json.loads(listed.stdout)[0] == below


def test_the_fan_out_can_be_narrowed_and_refuses_unknown_releases():
    newest = envs.releases()[-1]["torch"]
    command = [sys.executable, str(REPO / "tools" / "envs.py"), "releases", "--json"]
    narrowed = subprocess.run(command + [newest], capture_output=True, text=True)
    assert json.loads(narrowed.stdout) == [newest]
    unknown = subprocess.run(command + ["0.0.1"], capture_output=True, text=True)
    assert unknown.returncode != 0
    assert "not in matrix.toml: 0.0.1" in unknown.stderr


# -- The workflow's layouts, lanes and summaries ---------------------------------


def test_a_folder_of_shards_and_a_single_shard_merge_alike(tmp_path):
    # download-artifact puts one artifact straight into its path and several
    # each into a subfolder; the shards upload their release's folder, so the
    # merge job sees shards/<release>/ either way, and a flat folder still
    # counts as one shard.
    nested = tmp_path / "nested"
    write_shard(nested / "2.14.1", {"a": {"2.14.1": record()}})
    write_shard(nested / "2.15.0", {"a": {"2.15.0": record()}})
    flat = write_shard(tmp_path / "flat", {"a": {"2.15.0": record()}})
    assert matrix.shard_folders(nested) == [nested / "2.14.1", nested / "2.15.0"]
    assert matrix.shard_folders(flat) == [flat]
    for folder, releases in ((nested, ["2.14.1", "2.15.0"]), (flat, ["2.15.0"])):
        into = tmp_path / f"into-{folder.name}"
        merged = run_merge("--into", into, folder)
        assert merged.returncode == 0, merged.stderr
        assert list(matrix.load_records(into)["a"]) == releases


def test_a_merge_that_finds_no_record_fails(tmp_path):
    (tmp_path / "shards" / "2.15.0").mkdir(parents=True)
    merged = run_merge("--into", tmp_path / "records", tmp_path / "shards")
    assert merged.returncode == 1
    assert "no shard of this run wrote any" in merged.stderr
    assert not (tmp_path / "records").exists()


def test_a_gpu_failure_never_replaces_a_cpu_result_of_the_same_code():
    cpu_pass = record(devices=["cpu"])
    before = {
        "a": {"2.15.0": cpu_pass},
        "b": {"2.15.0": cpu_pass},
        "c": {"2.15.0": record(digest="old0")},
    }
    merged = {
        "a": {"2.15.0": record("fail")},  # same code: the CPU pass stays
        "b": {"2.15.0": record(devices=["cpu", "cuda"])},  # adds CUDA
        "c": {"2.15.0": record("fail")},  # other code: the newer record
        "d": {"2.15.0": record("fail")},  # nothing before it
    }
    updates, disagreements = matrix.lane_updates(before, merged, "gpu")
    assert disagreements == {"a": {"2.15.0": merged["a"]["2.15.0"]}}
    assert sorted(updates) == ["b", "c", "d"]
    # The CPU lane replaces whatever was there, as make matrix does.
    updates, disagreements = matrix.lane_updates(before, merged, "cpu")
    assert disagreements == {} and updates == merged


def test_the_gpu_lane_merge_keeps_cpu_passes_and_reports_why(tmp_path):
    into = write_shard(
        tmp_path / "records", {"a": {"2.15.0": record()}, "b": {"2.15.0": record()}}
    )
    gpu = write_shard(
        tmp_path / "shards" / "2.15.0",
        {
            "a": {"2.15.0": record("fail", devices=None)},
            "b": {"2.15.0": record(devices=["cpu", "cuda"])},
        },
    )
    summary, outputs = tmp_path / "summary.md", tmp_path / "outputs"
    merged = run_merge(
        "--into",
        into,
        "--lane",
        "gpu",
        "--summary",
        summary,
        "--github-output",
        outputs,
        gpu.parent,
    )
    assert merged.returncode == 0, merged.stderr
    written = matrix.load_records(into)
    assert written["a"]["2.15.0"] == record()
    assert written["b"]["2.15.0"]["devices"] == ["cpu", "cuda"]
    assert "a torch 2.15.0: the GPU lane says fail" in merged.stdout
    table = summary.read_text()
    assert "| page | 2.15.0 |" in table
    assert "| a | ✓ kept, GPU ✗ |" in table
    assert "| b | ✓ +CUDA |" in table
    assert "- `a`, torch 2.15.0 (GPU lane only, kept out): RuntimeError: boom" in table
    assert (
        "title=Version matrix records, GPU lane: 2 record(s) (1 GPU disagreement(s))"
        in (outputs.read_text())
    )


def test_the_summary_is_a_release_by_page_table_of_what_changed(tmp_path):
    into = write_shard(
        tmp_path / "records",
        {"a": {"2.14.1": record(), "2.15.0": record()}, "b": {"2.15.0": record()}},
    )
    shards = tmp_path / "shards"
    write_shard(shards / "2.14.1", {"a": {"2.14.1": record("fail")}})
    write_shard(
        shards / "2.15.0",
        {"a": {"2.15.0": record()}, "b": {"2.15.0": record(digest="new0")}},
    )
    write_shard(shards / "2.16.0", {"c": {"2.16.0": record()}})
    summary, outputs = tmp_path / "summary.md", tmp_path / "outputs"
    merged = run_merge(
        "--into", into, "--summary", summary, "--github-output", outputs, shards
    )
    assert merged.returncode == 0, merged.stderr
    lines = summary.read_text().splitlines()
    assert lines[0] == (
        "### Version matrix, CPU lane: 4 record(s) of 3 page(s) on 3 release(s)"
    )
    assert "Results changed: 1; new records: 1; failing: 1." in lines
    assert "| page | 2.14.1 | 2.15.0 | 2.16.0 |" in lines
    assert "| a | **✗** was ✓ | ✓ | · |" in lines
    assert "| b | · | ✓ new code | · |" in lines
    assert "| c | · | · | ✓ new |" in lines
    assert "- `a`, torch 2.14.1 (recorded): RuntimeError: boom" in lines
    assert (
        "title=Version matrix records, CPU lane: 4 record(s) (1 changed, 1 failing)"
        in outputs.read_text().splitlines()
    )


def test_a_dry_run_reports_and_writes_nothing(tmp_path):
    into = write_shard(tmp_path / "records", {"a": {"2.15.0": record()}})
    before = (into / "a.json").read_text()
    shard = write_shard(tmp_path / "shard", {"a": {"2.15.0": record("fail")}})
    summary = tmp_path / "summary.md"
    merged = run_merge("--into", into, "--dry-run", "--summary", summary, shard)
    assert merged.returncode == 0, merged.stderr
    assert "would merge 1 records" in merged.stdout
    assert "| a | **✗** was ✓ |" in summary.read_text()
    assert (into / "a.json").read_text() == before


# -- The GPU lane's CUDA toolkits ----------------------------------------------


def toolkit(folder):
    (folder / "bin").mkdir(parents=True)
    (folder / "bin" / "nvcc").write_text("#!/bin/sh\n")
    return folder


def test_the_toolkit_of_the_release_cuda_major_is_found(tmp_path):
    root = tmp_path / "local"
    toolkit(root / "cuda-12.6")
    toolkit(root / "cuda-12.9")
    toolkit(root / "cuda-13.0")
    (root / "cuda-12.10").mkdir()  # no nvcc: not a toolkit
    assert matrix.cuda_toolkit("12.6", {}, root)[0] == root / "cuda-12.6"
    assert matrix.cuda_toolkit("12.8", {}, root)[0] == root / "cuda-12.9"
    assert matrix.cuda_toolkit("13.2", {}, root)[0] == root / "cuda-13.0"
    home, why = matrix.cuda_toolkit("11.8", {}, root)
    assert home is None
    assert why.startswith("no CUDA 11 toolkit for its CUDA 11.8: set CUDA_HOME_11")


def test_a_toolkit_named_by_a_variable_comes_first_and_must_hold_nvcc(tmp_path):
    root = tmp_path / "local"
    toolkit(root / "cuda-12.8")
    named = toolkit(tmp_path / "opt" / "cuda")
    environ = {"CUDA_HOME_12": str(named)}
    assert matrix.cuda_toolkit("12.8", environ, root) == (
        named,
        f"CUDA_HOME_12={named}",
    )
    exact = {"CUDA_HOME_12_8": str(tmp_path / "none"), **environ}
    home, why = matrix.cuda_toolkit("12.8", exact, root)
    assert home is None and why.endswith("holds no bin/nvcc")


def test_torch_cuda_version_is_read_without_importing_torch(tmp_path):
    version = tmp_path / "env" / "lib" / "python3.11" / "site-packages" / "torch"
    version.mkdir(parents=True)
    (version / "version.py").write_text(
        "__version__ = '2.15.0+cu132'\ncuda: Optional[str] = '13.2'\n"
    )
    assert matrix.torch_cuda_version(tmp_path / "env") == "13.2"
    (version / "version.py").write_text("cuda: Optional[str] = None\n")
    assert matrix.torch_cuda_version(tmp_path / "env") is None


# -- The fan-out -------------------------------------------------------------------


def plan(capsys, *releases, lane="cpu", gpu_runner=""):
    """matrix.py plan's step outputs, or its one line on stderr."""
    args = argparse.Namespace(releases=list(releases), lane=lane, gpu_runner=gpu_runner)
    try:
        assert matrix.plan(args) == 0
    except SystemExit as stopped:
        assert stopped.code != 0
        return capsys.readouterr().err
    return dict(line.split("=", 1) for line in capsys.readouterr().out.splitlines())


def test_the_plan_names_the_releases_lane_and_gpu_runner(capsys):
    newest = envs.releases()[-1]["torch"]
    outputs = plan(capsys, lane="gpu", gpu_runner='["self-hosted", "gpu"]')
    assert json.loads(outputs["releases"]) == envs.release_names()
    assert outputs["lane"] == "gpu"
    assert json.loads(outputs["gpu-runner"]) == ["self-hosted", "gpu"]
    outputs = plan(capsys, newest, gpu_runner="gpu")
    assert json.loads(outputs["releases"]) == [newest]
    assert outputs["lane"] == "cpu"
    assert json.loads(outputs["gpu-runner"]) == ["gpu"]


def test_the_gpu_lane_without_a_runner_stops_in_one_line(capsys):
    for runner in ("", "  "):
        stopped = plan(capsys, lane="gpu", gpu_runner=runner)
        assert stopped.count("\n") == 1
        assert "set the repository variable GPU_RUNNER" in stopped
    for bad in ("gpu linux", "[]", '["gpu", ""]', "[gpu"):
        stopped = plan(capsys, lane="gpu", gpu_runner=bad)
        assert stopped.count("\n") == 1 and "GPU_RUNNER" in stopped, bad


TRACEBACK = """\
Traceback (most recent call last):
  File "/tmp/page.py", line 12, in <module>
    assert out.shape == (2, 3)
           ^^^^^^^^^^^^^^^^^^^
AssertionError
"""
ASSERTION = "AssertionError at: assert out.shape == (2, 3)"


def test_the_error_line_is_the_last_exception_line():
    stderr = (
        "Traceback (most recent call last):\n"
        '  File "page.py", line 3, in <module>\n'
        "    torch.ops.mylib.crop(x)\n"
        "RuntimeError: first\n\nDuring handling, another:\n"
        "torch._dynamo.exc.Unsupported: a graph break\n"
        "warning: something after it\n"
    )
    assert matrix.first_error_line(stderr) == (
        "torch._dynamo.exc.Unsupported: a graph break"
    )


def test_a_bare_assertion_names_the_failing_line():
    assert matrix.first_error_line(TRACEBACK) == ASSERTION


def test_without_an_exception_the_last_line_or_no_output():
    assert matrix.first_error_line("one\nKilled\n\n") == "Killed"
    assert matrix.first_error_line("") == "no output"
    assert len(matrix.first_error_line("ValueError: " + "x" * 500)) == 300


@pytest.mark.parametrize(
    "returncode, stderr, timed_out, verdict",
    [
        (0, "a warning\n", False, ("pass", None)),
        (None, "", True, ("fail", "timed out")),
        (
            1,
            "This page needs PyTorch 2.8 or later; this is 2.7.1.\n",
            False,
            ("below-floor", "This page needs PyTorch 2.8 or later; this is 2.7.1."),
        ),
        # The floor message with anything else on stderr is a failure.
        (
            1,
            "This page needs PyTorch 2.8 or later; this is 2.7.1.\nValueError: x\n",
            False,
            ("fail", "ValueError: x"),
        ),
        (
            1,
            TRACEBACK,
            False,
            ("fail", "AssertionError at: assert out.shape == (2, 3)"),
        ),
    ],
    ids=["pass", "timeout", "below floor", "floor and noise", "error"],
)
def test_a_run_is_classified_by_its_exit_and_stderr(
    returncode, stderr, timed_out, verdict
):
    assert matrix.classify(returncode, stderr, timed_out) == verdict


def test_a_passing_run_that_left_files_fails_and_names_them():
    left = ["aotinductor_Ab12 (doubled)", "checkop-x1 (nms.json)"]
    assert matrix.classify(0, "", False, left) == (
        "fail",
        "left files in TMPDIR: aotinductor_Ab12 (doubled); checkop-x1 (nms.json)",
    )
    # What the run raised stays the first thing its record says.
    assert matrix.classify(1, TRACEBACK, False, left)[1].startswith("AssertionError")


def test_what_pytorch_itself_leaves_in_tmpdir_is_not_the_pages(tmp_path):
    for pytorchs in ("torchinductor_root", "export_root"):
        (tmp_path / pytorchs / "inside").mkdir(parents=True)
    (tmp_path / "pytorch-errorfile-ab12.pickle").touch()
    (tmp_path / "tmpab12").mkdir()
    (tmp_path / "tmpab12" / "_remote_module_non_scriptable.py").touch()
    assert matrix.left_in_tmpdir(tmp_path) == []
    (tmp_path / "tmpab12" / "notes.txt").touch()  # no longer PyTorch's alone
    (tmp_path / "sent.txt").touch()
    (tmp_path / "tmpcd34" / "__pycache__").mkdir(parents=True)  # a page's module's
    assert matrix.left_in_tmpdir(tmp_path) == [
        "sent.txt",
        "tmpab12 (_remote_module_non_scriptable.py, notes.txt)",
        "tmpcd34 (__pycache__)",
    ]


LEAVES_FILES = """
import os, tempfile
unpacked = tempfile.mkdtemp(prefix="aotinductor_")
os.mkdir(os.path.join(unpacked, "doubled"))
own = tempfile.mkdtemp(prefix="checkop-")
open(os.path.join(own, "nms.json"), "w").close()
"""


@pytest.mark.parametrize("cleans_up", [False, True], ids=["leaves it", "cleans up"])
def test_a_page_runs_with_a_temporary_directory_of_its_own(
    tmp_path, monkeypatch, cleans_up
):
    cleanup = "import shutil; shutil.rmtree(unpacked); shutil.rmtree(own)\n"
    page = LEAVES_FILES + cleanup * cleans_up
    (tmp_path / "leaky.py").write_text(page)
    monkeypatch.setattr(matrix, "EXAMPLES", tmp_path)
    monkeypatch.setenv("TMPDIR", str(tmp_path / "not-here"))  # not the caller's
    (tmp_path / "not-here").mkdir()
    venv = Path(sys.prefix)
    one = matrix.run_page(venv, {"torch": "2.15.0"}, "leaky", "aaaa", 60, False)
    assert list((tmp_path / "not-here").iterdir()) == []
    if cleans_up:
        assert (one["result"], one["error"]) == ("pass", None)
    else:
        assert one["result"] == "fail"
        said = r"left files in TMPDIR: aotinductor_\w+ \(doubled\); "
        said += r"checkop-\w+ \(nms.json\)"
        assert re.fullmatch(said, one["error"]), one["error"]


def test_a_shards_cost_is_its_setup_plus_its_pages_over_the_cores():
    # Three real pages (only the pages of advanced/ count) on one release: 14
    # minutes, the slowest 5. On 2 cores 4 + 14 / 2 = 11 minutes; on 4 cores
    # the slowest page bounds it: 4 + max(14 / 4, 5) = 9.
    by_page = {
        "python_custom_ops": {"2.15.0": record(seconds=300.0)},
        "sharp_edges": {"2.15.0": record(seconds=300.0)},
        "cpp_custom_ops": {"2.15.0": record(seconds=240.0)},
        "no_such_page": {"2.15.0": record(seconds=9999.0)},
    }
    table = matrix.costs(by_page, ["2.15.0", "2.14.1"])
    rows = table.splitlines()
    assert rows[2] == "| 2.15.0 | 3 | 14 min | 5.0 min | ~11 min | ~9 min |"
    assert rows[3].startswith("| 2.14.1 | 0 |")
