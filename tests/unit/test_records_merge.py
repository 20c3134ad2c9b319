"""The version matrix's shards and their merge (tools/matrix.py), the GPU
lane's verdict (``--require-cuda``) and the fan-out's list of releases
(tools/envs.py releases), without running a page."""

import json
import subprocess
import sys
from pathlib import Path

import envs
import matrix
import pytest

REPO = Path(__file__).resolve().parents[2]


def record(result="pass", digest="aaaa", ran_at="2026-01-01T00:00:00+00:00", **more):
    return {
        "code_digest": digest,
        "result": result,
        "error": None if result == "pass" else "RuntimeError: boom",
        "seconds": 1.0,
        "torch": "2.15.0",
        "devices": ["cpu"],
        "ran_at": ran_at,
        **more,
    }


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
