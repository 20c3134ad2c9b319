"""The machine a measurement names, and the reference figures
(tools/benchmarks.py): a benchmark's headline kept only with its machine."""

import json

import benchmarks
import guide
import pytest

MACHINE = {
    "cpus": 2,
    "processor": "A processor",
    "memory_gib": 8,
    "python": "3.11.7",
    "platform": "Linux",
    "probe_s": 0.5,
}
BUILD = {
    "measured_at": "2030-01-02T03:04:05+00:00",
    "machine": MACHINE,
    "cold_build_s": 150.0,
    "noop_rebuild_s": 2.6,
    "prose_edit_rebuild_s": 18.3,
    "prose_edit_example": "python_custom_ops",
    "prose_edit_overhead_s": 12.5,
    "targets": {"noop_rebuild_s": 5, "prose_edit_overhead_s": 20},
    "example_execution_s": {"python_custom_ops": 5.8, "sharp_edges": 25.0},
    "heaviest_page": {"page": "tutorials/sharp_edges.html", "bytes": 409600},
}


@pytest.fixture
def reference(tmp_path, monkeypatch):
    path = tmp_path / "docs" / "benchmarks.json"
    monkeypatch.setattr(benchmarks, "REFERENCE", path)
    return path


def test_the_machine_names_what_a_figure_depends_on(monkeypatch):
    monkeypatch.setattr(benchmarks, "PROBE_LOOPS", 1000)
    machine = benchmarks.machine()
    assert set(machine) == set(MACHINE)
    assert machine["cpus"] >= 1 and machine["probe_s"] >= 0


def test_a_run_with_its_machine_becomes_the_reference(tmp_path, reference):
    (tmp_path / "bench-build.json").write_text(json.dumps(BUILD))
    said = benchmarks.record(tmp_path)
    assert "bench-build: kept the figures of 2030-01-02T03:04:05+00:00" in said
    assert any(line.startswith("bench-ci: no ") for line in said)
    kept = json.loads(reference.read_text())["bench-build"]
    assert kept["machine"] == MACHINE
    assert ["no-op build, both editions", 2.6, "s", 5] in kept["figures"]
    assert [
        "slowest page's run in the build: sharp_edges",
        25.0,
        "s",
        None,
    ] in kept["figures"]
    table = guide.reference_table(json.loads(reference.read_text()))
    assert "`make bench-build`, 2030-01-02, on 2 cores (A processor)" in table
    assert "| no-op build, both editions | 2.6 s | at most 5 s |" in table


def test_a_run_that_names_no_machine_keeps_the_reference(tmp_path, reference):
    reference.parent.mkdir()
    reference.write_text(json.dumps({"bench-build": {"kept": True}}))
    older = {key: value for key, value in BUILD.items() if key != "machine"}
    (tmp_path / "bench-build.json").write_text(json.dumps(older))
    said = benchmarks.record(tmp_path)
    assert (
        "bench-build: bench-build.json names no machine; run `make bench-build` again"
        in said
    )
    assert json.loads(reference.read_text()) == {"bench-build": {"kept": True}}


def test_the_checkers_overheads_are_percentages_against_their_target():
    figures = benchmarks.checker_figures(
        {
            "medians": {
                "full": 5.2,
                "quick": 0.03,
                "overhead": -0.03,
                "first overhead": 0.75,
            },
            "targets": {"full": 6.0, "quick": 1.0, "overhead": 0.3},
            "pytest_session": {"operators": ["a", "b"], "seconds": 20.0, "children": 1},
        }
    )
    assert ["median isolation overhead, in the kept child", -3, "%", 30] in figures
    assert ["child processes it started", 1, "", 1] in figures
    assert (
        guide.reference_table(
            {
                "x": {
                    "command": "c",
                    "measured_at": "d",
                    "machine": MACHINE,
                    "figures": figures,
                }
            }
        ).count("| median isolation overhead, in the kept child | -3% | at most 30% |")
        == 1
    )
