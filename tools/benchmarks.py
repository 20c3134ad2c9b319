"""The machine a measurement ran on, and the reference figures.

Every ``make bench-*`` command writes its figures with ``machine()`` (the
cores, the processor, the memory, the Python, and ``probe_s``: the CPU
seconds of a fixed pure-Python loop, which tells a fast machine, or a fast
hour of a shared one, from a slow one) and ``measured_at``:

* ``make bench-build``: ``_build/bench-build.json`` (``tools/bench_build.py``);
* ``make bench-ci``: ``_build/bench-ci.json`` (``tools/bench_ci.py``);
* ``make bench-checker``: ``_build/bench-checker.json`` (``tools/bench_checker.py``);
* ``make bench-disk``: ``.ci/environment-disk.json``, committed, which the
  workflow tests read (``tools/bench_disk.py``).

``make bench-record`` (``python tools/benchmarks.py record``) keeps the
headline figures of the first three, as their last runs left them, in
``docs/dev/benchmarks.json``, the reference figures, committed; ``make
guide`` renders them into ``docs/dev/performance.md``. A benchmark never run
here, or whose output names no machine, keeps what the file held.
"""

import argparse
import json
import os
import platform
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "_build"
REFERENCE = REPO / "docs" / "dev" / "benchmarks.json"
# The pure-Python loop of the probe: about half a second of CPU on the 2-core
# machines this project has been built on.
PROBE_LOOPS = 20_000_000


def probe_seconds():
    """CPU seconds of a fixed pure-Python loop: the machine's speed, as
    Python code sees it, at the time of the measurement."""
    start = time.process_time()
    total = 0
    for number in range(PROBE_LOOPS):
        total += number & 7
    return round(time.process_time() - start, 2)


def _proc(path, key):
    """The value of ``key`` in a ``key: value`` file of /proc, or None."""
    try:
        for line in Path(path).read_text().splitlines():
            name, _, value = line.partition(":")
            if name.strip() == key:
                return value.strip()
    except OSError:
        pass
    return None


def machine():
    """What a figure depends on besides the code: the machine, now."""
    memory = _proc("/proc/meminfo", "MemTotal")  # "131072000 kB"
    return {
        "cpus": os.cpu_count(),
        "processor": _proc("/proc/cpuinfo", "model name") or platform.processor(),
        "memory_gib": round(int(memory.split()[0]) / 2**20) if memory else None,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "probe_s": probe_seconds(),
    }


def stamp():
    """``measured_at`` and ``machine``, for a benchmark's output."""
    return {
        "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine(),
    }


# -- The reference figures ------------------------------------------------------------


def build_figures(results):
    """The headline figures of ``_build/bench-build.json``."""
    example = results["prose_edit_example"]
    targets = results["targets"]
    runs = results["example_execution_s"]
    slowest = max(runs, key=runs.get)
    figures = []
    if "cold_build_empty_caches_s" in results:
        figures.append(
            [
                "cold build, empty compiler caches",
                results["cold_build_empty_caches_s"],
                "s",
                None,
            ]
        )
    figures += [
        ["cold build, warm compiler caches", results["cold_build_s"], "s", None],
        [
            "no-op build, both editions",
            results["noop_rebuild_s"],
            "s",
            targets["noop_rebuild_s"],
        ],
        [
            f"build after a prose edit to {example}, beyond the page's run",
            results["prose_edit_overhead_s"],
            "s",
            targets["prose_edit_overhead_s"],
        ],
        [f"slowest page's run in the build: {slowest}", runs[slowest], "s", None],
        [
            f"heaviest page: {results['heaviest_page']['page']}",
            round(results["heaviest_page"]["bytes"] / 1024),
            "KiB",
            None,
        ],
    ]
    return figures


def ci_figures(results):
    """The headline figures of ``_build/bench-ci.json``."""
    figures = []
    if "ci_seconds" in results:
        figures += [
            [
                "`bash .ci/run` from a fresh clone",
                round(results["ci_seconds"] / 60, 1),
                "min",
                None,
            ],
            [
                "its CPU time, all processes",
                round(results["cpu_seconds"] / 60, 1),
                "min",
                None,
            ],
        ]
    figures += [
        ["tests", results["tests"], "", None],
        [
            "the pages' runs in the suite's build, together",
            round(results["pages_seconds"]),
            "s",
            None,
        ],
    ]
    return figures


def checker_figures(results):
    """The headline figures of ``_build/bench-checker.json``."""
    medians, targets = results["medians"], results["targets"]
    figures = [
        [
            "median full check of one operator",
            round(medians["full"], 2),
            "s",
            targets["full"],
        ],
        ["median quick check", round(medians["quick"], 2), "s", targets["quick"]],
        [
            "median isolation overhead, in the kept child",
            round(100 * medians["overhead"]),
            "%",
            round(100 * targets["overhead"]),
        ],
        [
            "median isolation overhead, first call (fresh child)",
            round(100 * medians["first overhead"]),
            "%",
            None,
        ],
    ]
    session = results.get("pytest_session")
    if session:
        figures += [
            [
                f"pytest session of {len(session['operators'])} operators",
                round(session["seconds"], 1),
                "s",
                None,
            ],
            ["child processes it started", session["children"], "", 1],
        ]
    return figures


# name: (output of its last run, its headline figures, the command)
BENCHMARKS = {
    "bench-build": (OUT / "bench-build.json", build_figures, "make bench-build"),
    "bench-ci": (OUT / "bench-ci.json", ci_figures, "make bench-ci"),
    "bench-checker": (
        OUT / "bench-checker.json",
        checker_figures,
        "make bench-checker",
    ),
}


def reference():
    """The reference figures as committed: {benchmark: entry}."""
    return json.loads(REFERENCE.read_text()) if REFERENCE.is_file() else {}


def record(build=OUT):
    """Keep the headline figures of each benchmark's last run, as its output
    in ``build`` holds them; returns the lines that say what was kept and
    what was not."""
    kept = reference()
    said = []
    for name, (default, figures, command) in BENCHMARKS.items():
        output = Path(build) / default.name
        if not output.is_file():
            said.append(f"{name}: no {output}; run `{command}` first")
            continue
        results = json.loads(output.read_text())
        if "machine" not in results or "measured_at" not in results:
            said.append(
                f"{name}: {output.name} names no machine; run `{command}` again"
            )
            continue
        kept[name] = {
            "command": command,
            "measured_at": results["measured_at"],
            "machine": results["machine"],
            "figures": figures(results),
        }
        said.append(f"{name}: kept the figures of {results['measured_at']}")
    REFERENCE.parent.mkdir(parents=True, exist_ok=True)
    REFERENCE.write_text(json.dumps(kept, indent=1, ensure_ascii=False) + "\n")
    return said


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    recording = sub.add_parser("record", help="keep the last runs' figures")
    recording.add_argument(
        "--build",
        type=Path,
        default=OUT,
        help="the _build folder the benchmarks wrote into (a clone's, say)",
    )
    sub.add_parser("machine", help="print this machine's description")
    args = parser.parse_args()
    if args.command == "machine":
        print(json.dumps(machine(), indent=1))
        return 0
    for line in record(args.build):
        print(line)
    import guide  # tools/, beside this script

    for line in guide.write():
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
