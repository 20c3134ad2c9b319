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


KINDS_BY_COMMAND = [
    ("/usr/lib/chromium/chromium --type=renderer --lang=en-US", "browser: renderers"),
    ("/usr/lib/chromium/chromium --headless", "browser: its other processes"),
    ("/v/bin/python -m ipykernel_launcher -f k.json", "notebook kernels"),
    ("/v/bin/python /v/bin/sphinx-build -b html . out", "Sphinx"),
    ("/v/bin/python -m pytest -n auto --dist loadgroup", "pytest: the run's own"),
    ("/v/bin/python -m pytest -q tests/test_a.py", "pytest: in a test's child process"),
    (
        "/usr/lib/gcc/x86_64-linux-gnu/12/cc1plus -quiet a.cpp",
        "C++ compiler and linker",
    ),
    ("ccache /v/nvidia/cu13/bin/nvcc -c cuda.cu -o cuda.o", "C++ compiler and linker"),
    ("/v/bin/python -c import torch", "python -c"),
    ("/v/bin/python -u /r/advanced/cpp_stable_abi.py", "Python: cpp_stable_abi.py"),
    ("/v/bin/python3.11 -m auditwheel repair x.whl", "Python: -m auditwheel"),
    ("/v/bin/python -X faulthandler /t/run.py", "Python: run.py"),
    ("[kdamond.0]", "kernel threads"),
    ("/usr/bin/optipng -o2 a.png", "other: optipng"),
]


def test_processes_are_put_down_to_their_kind_by_command_line():
    found = [(command, bench_ci.kind_of(command)) for command, _ in KINDS_BY_COMMAND]
    assert found == KINDS_BY_COMMAND


def test_the_sampler_counts_each_process_from_the_start_or_from_its_own():
    old = ((1, 10.0), "/usr/bin/optipng a.png", 50.0)  # running before the run
    sampler = bench_ci.ProcessSampler([old])
    renderer = ((2, 20.0), "/usr/lib/chromium/chromium --type=renderer", 3.0)
    sampler.sample([((1, 10.0), old[1], 52.0), renderer])
    # The same pid with another start time is another process.
    sampler.sample([((1, 10.0), old[1], 53.5), ((2, 21.0), renderer[1], 1.0)])
    assert sampler.kinds == {"other: optipng": 3.5, "browser: renderers": 4.0}


def test_the_kinds_table_lumps_the_small_ones_and_names_what_was_not_seen():
    kinds = {"Sphinx": 200.0, "other: git": 0.4, "other: make": 0.3}
    rows = bench_ci.by_kind(kinds, busy=250.0)
    assert rows == {
        "Sphinx": 200.0,
        "other kinds, under 1 s each": 0.7,
        "not seen by the sampler": 49.3,
    }
