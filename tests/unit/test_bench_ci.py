"""`make bench-ci`'s timeline: each worker's test modules, in the order it ran them."""

import bench_ci


def test_a_worker_s_modules_follow_one_another_and_interruptions_split_them():
    durations = {
        "tests/a.py::one": {"call": 59, "start": 100, "stop": 160, "worker": "gw0"},
        "tests/a.py::two": {"call": 30, "start": 160, "stop": 190, "worker": "gw0"},
        "tests/b.py::one": {"call": 60, "start": 130, "stop": 250, "worker": "gw1"},
        "tests/c.py::one": {"call": 60, "start": 190, "stop": 250, "worker": "gw0"},
        "tests/a.py::three": {"call": 50, "start": 250, "stop": 310, "worker": "gw0"},
        "tests/d.py::untimed": {"call": 1},
    }
    rows = [
        (row["worker"], row["module"], row["tests"], row["from"], row["to"])
        for row in bench_ci.timeline(durations)
    ]
    assert rows == [
        ("gw0", "tests/a.py", 2, 0.0, 1.5),
        ("gw0", "tests/c.py", 1, 1.5, 2.5),
        ("gw0", "tests/a.py", 1, 2.5, 3.5),
        ("gw1", "tests/b.py", 1, 0.5, 2.5),
    ]


def test_no_timed_test_makes_no_timeline():
    assert bench_ci.timeline({"tests/a.py::one": {"call": 1}}) == []
