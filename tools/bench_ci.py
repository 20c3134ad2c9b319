"""Where CI's time goes: the suite run once from a fresh clone, timed.

``make bench-ci`` clones this checkout's HEAD (commit first) into a
temporary folder and runs ``bash .ci/run`` there, as CI does (``CI=true``),
its output in ``_build/bench-ci.log``. The suite writes each test's setup,
call and teardown seconds (``tests/conftest.py``: ``_build/test-durations.json``
in the clone), and its build each page's run time (Sphinx-Gallery's
``tutorials/*.cost.json``). This prints the run's wall time and the
machine's CPU time over its cores (how busy it was, and minute by minute), the
slowest steps, each test module's total, every page's run time and each
worker's timeline of test modules, and writes them to
``_build/bench-ci.json`` (with the machine it ran on, ``benchmarks.stamp``)
and, as Markdown tables, ``_build/bench-ci.md``. While the run goes on,
every process on the machine is sampled each second (psutil) and its CPU
time put down to a kind of process (browser renderers, notebook kernels,
Sphinx, the compiler...):
the table of kinds says which programs the CPU went to, whichever test
started them.

    python tools/bench_ci.py [--keep] [--top N]
    python tools/bench_ci.py --from CLONE   # the tables of a run already made
"""

import argparse
import collections
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tools"))
import bench_build  # noqa: E402
import benchmarks  # noqa: E402

OUT = REPO / "_build"


PHASES = ("setup", "call", "teardown")
# How often the machine's busy share is put down during the run.
SAMPLE_SECONDS = 60
# How often the processes are sampled: one that starts and ends between two
# samples is missed, and counted in the table's "not seen" row.
PROCESS_SAMPLE_SECONDS = 1

# A process's kind, from its command line: the first pattern that matches.
KINDS = [
    ("browser: renderers", r"chromium.* --type=renderer"),
    ("browser: its other processes", r"chromium"),
    ("browser: Playwright's driver", r"playwright/driver/node"),
    ("notebook kernels", r"ipykernel_launcher"),
    ("Sphinx", r"sphinx[-_]build|-m sphinx\b"),
    ("page runs in the build (loky)", r"joblib|loky"),
    ("pytest-xdist workers", r"exec\(eval\(sys\.stdin\.readline\(\)\)\)"),
    ("pytest: the run's own", r"-m pytest .*-n "),
    ("pytest: in a test's child process", r"-m pytest|bin/pytest"),
    ("the checker's isolated children", r"operator_checker"),
    (
        "C++ compiler and linker",
        r"(^|/)(ccache|cc1plus|cc1|as|ld|collect2|[gc]\+\+|gcc)( |$)",
    ),
    ("python -c", r"python[0-9.]* .*-c "),
    ("Python", r"python"),
    ("kernel threads", r"^\[.*\]$"),
]


def kind_of(command):
    """The kind of the process whose command line is ``command``; a program
    of no listed kind is named by its executable."""
    for kind, pattern in KINDS:
        if re.search(pattern, command):
            return python_program(command) if kind == "Python" else kind
    program = command.split(" ", 1)[0].rsplit("/", 1)[-1]
    return f"other: {program or '?'}"


def python_program(command):
    """The kind of a Python process: the module (``-m``) or script it runs."""
    words = iter(command.split()[1:])
    for word in words:
        if word in ("-X", "-W"):  # options that take a value
            next(words, None)
        elif word == "-m":
            return f"Python: -m {next(words, '?')}"
        elif not word.startswith("-"):
            return f"Python: {word.rsplit('/', 1)[-1]}"
    return "Python: no script"


class ProcessSampler:
    """CPU seconds of each kind of process since the sampler started. A
    process already running at the start counts from then; one first seen
    later, from its own start."""

    def __init__(self, processes):
        self.kinds = collections.Counter()
        self.seen = {key: [cpu, kind_of(command)] for key, command, cpu in processes}

    def sample(self, processes):
        """``processes``: (a key that names one process for its life, its
        command line, its CPU seconds so far) for every process now."""
        for key, command, cpu in processes:
            entry = self.seen.get(key)
            if entry is None:
                entry = self.seen[key] = [0.0, kind_of(command)]
            self.kinds[entry[1]] += cpu - entry[0]
            entry[0] = cpu


def processes_now():
    """(pid and start time, command line, CPU seconds) for every process."""
    found = []
    for process in psutil.process_iter(["cmdline", "name", "create_time"]):
        try:
            times = process.cpu_times()
        except psutil.Error:
            continue
        info = process.info
        command = " ".join(info["cmdline"] or []) or f"[{info['name']}]"
        key = (process.pid, info["create_time"])
        found.append((key, command, times.user + times.system))
    return found


def busy_seconds():
    """CPU seconds the whole machine has spent busy since it booted (all
    cores, from /proc/stat): on a quiet machine, the run's own, browsers and
    kernels included, which ``getrusage`` misses when nobody waits for them."""
    fields = [int(f) for f in Path("/proc/stat").read_text().split()[1:9]]
    idle = fields[3] + fields[4]  # idle and iowait
    return (sum(fields) - idle) / os.sysconf("SC_CLK_TCK")


def fresh_run(clone):
    """Run CI in a fresh clone of HEAD: (exit status, seconds, busy CPU
    seconds of the machine, the machine's busy share in each minute, the CPU
    seconds of each kind of process)."""
    subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    cores = os.cpu_count() or 1
    start = time.perf_counter()
    before = busy_seconds()
    sampler = ProcessSampler(processes_now())
    with open(OUT / "bench-ci.log", "w") as log:
        process = subprocess.Popen(
            ["bash", ".ci/run"],
            cwd=clone,
            env={**env, "CI": "true"},
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        minutes, last, minute_start = [], before, start
        while True:
            try:
                process.wait(PROCESS_SAMPLE_SECONDS)
                break
            except subprocess.TimeoutExpired:
                sampler.sample(processes_now())
                if time.perf_counter() - minute_start >= SAMPLE_SECONDS:
                    now = busy_seconds()
                    minutes.append(round((now - last) / (SAMPLE_SECONDS * cores), 2))
                    last, minute_start = now, minute_start + SAMPLE_SECONDS
    sampler.sample(processes_now())
    seconds = time.perf_counter() - start
    return process.returncode, seconds, busy_seconds() - before, minutes, sampler.kinds


def by_kind(kinds, busy):
    """{kind: CPU seconds}, largest first, the kinds under a second lumped
    together, and what the sampler did not see: the machine's busy seconds
    less the sum (processes shorter than a sample, the kernel's own work)."""
    table = collections.Counter()
    for kind, seconds in kinds.items():
        table[kind if seconds >= 1 else "other kinds, under 1 s each"] += seconds
    rows = {kind: round(seconds, 1) for kind, seconds in table.most_common()}
    rows["not seen by the sampler"] = round(busy - sum(kinds.values()), 1)
    return rows


def tables(clone, top):
    """The slowest steps of the suite and every page's run time."""
    durations = json.loads((clone / "_build" / "test-durations.json").read_text())
    steps = sorted(
        (
            (seconds, test, phase)
            for test, phases in durations.items()
            for phase, seconds in phases.items()
            if phase in PHASES
        ),
        reverse=True,
    )
    pages = bench_build.example_times(clone)
    modules = collections.Counter()
    for seconds, test, _phase in steps:
        modules[test.split("::")[0]] += seconds
    cpu = collections.Counter()
    for test, phases in durations.items():
        cpu[test.split("::")[0]] += phases.get("cpu", 0)
    return {
        "tests": len(durations),
        "test_seconds": round(sum(s for s, _, _ in steps), 1),
        "modules": {m: round(s, 1) for m, s in modules.most_common()},
        "modules_cpu": {m: round(cpu[m], 1) for m in modules},
        "slowest": [
            {"test": test, "phase": phase, "seconds": seconds}
            for seconds, test, phase in steps[:top]
        ],
        "pages": dict(sorted(pages.items(), key=lambda item: -item[1])),
        "pages_seconds": round(sum(pages.values()), 1),
        "timeline": timeline(durations),
    }


def timeline(durations):
    """Each worker's test modules in the order it started them: from when to
    when (minutes since the first test started), one row per stretch of a
    module that no other module of that worker interrupted."""
    timed = sorted(
        (phases["start"], phases["stop"], phases.get("worker", "main"), test)
        for test, phases in durations.items()
        if "start" in phases and "stop" in phases
    )
    if not timed:
        return []
    first = timed[0][0]
    rows = []
    last_of = {}  # worker -> its current row
    for start, stop, worker, test in timed:
        module = test.split("::")[0]
        row = last_of.get(worker)
        if row is not None and row["module"] == module:
            row["to"] = max(row["to"], stop - first)
            row["tests"] += 1
            continue
        row = {
            "worker": worker,
            "module": module,
            "tests": 1,
            "from": start - first,
            "to": stop - first,
        }
        rows.append(row)
        last_of[worker] = row
    return [
        {**row, "from": round(row["from"] / 60, 1), "to": round(row["to"] / 60, 1)}
        for row in sorted(rows, key=lambda r: (r["worker"], r["from"]))
    ]


def markdown(results):
    lines = []
    if "ci_seconds" in results:
        lines += [
            f"`bash .ci/run` from a fresh clone: exit {results['exit_status']} in "
            f"{results['ci_seconds'] / 60:.1f} min, {results['cpu_seconds']} CPU "
            f"seconds ({results['cpu_busy']:.0%} of the cores), "
            f"{results['tests']} tests.",
            "",
        ]
    if results.get("cpu_by_kind"):
        lines += ["| kind of process | CPU seconds | share |", "| --- | ---: | ---: |"]
        total = results["cpu_seconds"]
        lines += [
            f"| {kind} | {seconds:.0f} | {seconds / total:.0%} |"
            for kind, seconds in results["cpu_by_kind"].items()
        ]
        lines.append("")
    lines += ["| step | phase | seconds |", "| --- | --- | ---: |"]
    lines += [
        f"| `{row['test']}` | {row['phase']} | {row['seconds']:.0f} |"
        for row in results["slowest"]
    ]
    cpu = results["modules_cpu"]
    lines += ["", "| test module | seconds, all its tests | CPU seconds |"]
    lines += ["| --- | ---: | ---: |"]
    lines += [
        f"| `{name}` | {sec:.0f} | {cpu[name]:.0f} |"
        for name, sec in results["modules"].items()
    ]
    lines += ["", "| page | run time in the build (s) |", "| --- | ---: |"]
    lines += [
        f"| `{name}` | {seconds:.1f} |" for name, seconds in results["pages"].items()
    ]
    lines.append(
        f"| all {len(results['pages'])} pages | {results['pages_seconds']:.0f} |"
    )
    if results["timeline"]:
        lines += ["", "| worker | test module | tests | from (min) | to (min) |"]
        lines.append("| --- | --- | ---: | ---: | ---: |")
        lines += [
            f"| {r['worker']} | `{r['module']}` | {r['tests']} | {r['from']:.1f} "
            f"| {r['to']:.1f} |"
            for r in results["timeline"]
            if r["to"] - r["from"] >= 0.1
        ]
    if results.get("busy_by_minute"):
        shares = " ".join(f"{share:.0%}" for share in results["busy_by_minute"])
        lines += ["", f"The cores' busy share, minute by minute: {shares}"]
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
        status, seconds, cpu, minutes, kinds = fresh_run(clone)
        busy = cpu / (seconds * (os.cpu_count() or 1))
        results = {
            # The machine of the run; a clone read --from names none.
            **benchmarks.stamp(),
            "exit_status": status,
            "ci_seconds": round(seconds),
            "cpu_seconds": round(cpu),
            "cpu_busy": round(busy, 3),
            "busy_by_minute": minutes,
            "cpu_by_kind": by_kind(kinds, cpu),
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
