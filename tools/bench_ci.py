"""Where CI's time goes: the suite run once from a fresh clone, timed.

``make bench-ci`` clones this checkout's HEAD (commit first) into a
temporary folder and runs ``bash .ci/run`` there, as CI does (``CI=true``),
its output in ``_build/bench-ci.log``. The suite writes each test's setup,
call and teardown seconds (``tests/conftest.py``: ``_build/test-durations.json``
in the clone), and its build each page's run time (Sphinx-Gallery's
``tutorials/*.cost.json``). This prints the run's wall and CPU time (the
CPU time over the cores: how busy the machine was), the slowest steps, each
test module's total and every page's run time, and writes them to
``_build/bench-ci.json`` and, as the Markdown tables the README shows,
``_build/bench-ci.md``.

    python tools/bench_ci.py [--keep] [--top N]
    python tools/bench_ci.py --from CLONE   # the tables of a run already made
"""

import argparse
import collections
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tools"))
import bench_build  # noqa: E402

OUT = REPO / "_build"


def fresh_run(clone):
    """Run CI in a fresh clone of HEAD: (exit status, seconds, CPU seconds of
    the processes it waited for)."""
    subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    start = time.perf_counter()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    with open(OUT / "bench-ci.log", "w") as log:
        process = subprocess.run(
            ["bash", ".ci/run"],
            cwd=clone,
            env={**env, "CI": "true"},
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    seconds = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = sum(getattr(after, f) - getattr(before, f) for f in ("ru_utime", "ru_stime"))
    return process.returncode, seconds, cpu


def tables(clone, top):
    """The slowest steps of the suite and every page's run time."""
    durations = json.loads((clone / "_build" / "test-durations.json").read_text())
    steps = sorted(
        (
            (seconds, test, phase)
            for test, phases in durations.items()
            for phase, seconds in phases.items()
        ),
        reverse=True,
    )
    pages = bench_build.example_times(clone)
    modules = collections.Counter()
    for seconds, test, _phase in steps:
        modules[test.split("::")[0]] += seconds
    return {
        "tests": len(durations),
        "test_seconds": round(sum(s for s, _, _ in steps), 1),
        "modules": {m: round(s, 1) for m, s in modules.most_common()},
        "slowest": [
            {"test": test, "phase": phase, "seconds": seconds}
            for seconds, test, phase in steps[:top]
        ],
        "pages": dict(sorted(pages.items(), key=lambda item: -item[1])),
        "pages_seconds": round(sum(pages.values()), 1),
    }


def markdown(results):
    lines = ["| step | phase | seconds |", "| --- | --- | ---: |"]
    lines += [
        f"| `{row['test']}` | {row['phase']} | {row['seconds']:.0f} |"
        for row in results["slowest"]
    ]
    lines += ["", "| test module | seconds, all its tests |", "| --- | ---: |"]
    lines += [f"| `{name}` | {sec:.0f} |" for name, sec in results["modules"].items()]
    lines += ["", "| page | run time in the build (s) |", "| --- | ---: |"]
    lines += [
        f"| `{name}` | {seconds:.1f} |" for name, seconds in results["pages"].items()
    ]
    lines.append(
        f"| all {len(results['pages'])} pages | {results['pages_seconds']:.0f} |"
    )
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--from", dest="clone", type=Path, help="a clone already run")
    parser.add_argument("--keep", action="store_true", help="keep the clone")
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()
    OUT.mkdir(exist_ok=True)
    results = {}
    folder = None
    clone = args.clone
    if clone is None:
        folder = Path(tempfile.mkdtemp(prefix="bench-ci-"))
        clone = folder / "clone"
        status, seconds, cpu = fresh_run(clone)
        busy = cpu / (seconds * (os.cpu_count() or 1))
        results = {
            "exit_status": status,
            "ci_seconds": round(seconds),
            "cpu_seconds": round(cpu),
            "cpu_busy": round(busy, 3),
        }
        print(
            f"bash .ci/run: exit {status} in {seconds / 60:.1f} min, "
            f"{cpu / 60:.1f} min of CPU ({busy:.0%} of {os.cpu_count()} cores)"
        )
    results.update(tables(clone, args.top))
    (OUT / "bench-ci.json").write_text(json.dumps(results, indent=1) + "\n")
    (OUT / "bench-ci.md").write_text(markdown(results))
    print(markdown(results))
    print(
        f"{results['tests']} tests, {results['test_seconds'] / 60:.0f} min of test "
        f"time; pages {results['pages_seconds']:.0f} s; written to _build/bench-ci.md"
    )
    if folder is not None and not args.keep:
        shutil.rmtree(folder, ignore_errors=True)
    return results.get("exit_status", 0)


if __name__ == "__main__":
    sys.exit(main())
