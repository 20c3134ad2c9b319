"""Measure how fast the site builds and how heavy its pages are.

``make bench-build`` runs this script. It copies the project's files (tracked and
untracked-but-not-ignored, as git lists them) into a scratch directory, so the
working tree's own build is left alone, and there measures:

* a cold build: no generated gallery, every example executed, with empty
  compiler caches (Inductor's and the C++ extensions', in a scratch folder;
  ``--warm-caches-only`` skips it, and the builds then use the machine's own
  caches);
* the same cold build again, now with those compiler caches warm, as on a
  machine that has built the site before;
* a no-op rebuild of both editions: nothing changed (target: 5 s at most);
* a rebuild after a prose-only edit to one example (its records stay
  current; Sphinx-Gallery runs that one page again): target at most 20 s
  beyond the page's own run time;
* each page's prose words and code lines (Sphinx-Gallery's split);
* each example's execution time, as Sphinx-Gallery recorded it;
* each page's weight: its HTML plus the images it loads.

The numbers go to ``_build/bench-build.json``, with the machine they came
from (``benchmarks.stamp``), and a short table on standard output; ``make
bench-record`` keeps their headline as the reference figures.
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import benchmarks

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from pagelib import layout  # noqa: E402
from pagelib.contract import page_size  # noqa: E402

NOOP_TARGET_S = 5
PROSE_EDIT_OVERHEAD_TARGET_S = 20


def timed_make_html(project, venv, caches):
    start = time.perf_counter()
    process = subprocess.run(
        ["make", "html", f"VENV={venv}"],
        cwd=project,
        env={**os.environ, **caches},
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    elapsed = time.perf_counter() - start
    if process.returncode != 0:
        sys.exit(f"make html failed in {project}:\n{process.stdout[-4000:]}")
    return elapsed


def example_times(project):
    times = {}
    for cost in sorted((project / "tutorials").glob("*.cost.json")):
        name = cost.name.removesuffix(".cost.json")
        times[name] = json.loads(cost.read_text())["time"]
    return times


def page_weights(html_dir):
    """Bytes of each page: the HTML file plus every image it loads."""
    weights = {}
    for page in sorted(html_dir.rglob("*.html")):
        relative = page.relative_to(html_dir)
        if relative.parts[0].startswith("_"):
            continue
        html = page.read_text(encoding="utf-8")
        total = page.stat().st_size
        for src in set(re.findall(r'<img[^>]+src="([^"]+)"', html)):
            image = (page.parent / src.split("?")[0]).resolve()
            if image.is_file():
                total += image.stat().st_size
        weights[str(relative)] = total
    return weights


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--venv", default=sys.prefix, help="virtual environment")
    parser.add_argument(
        "--example",
        default="python_custom_ops",
        help="the example to change for the single-example rebuild",
    )
    parser.add_argument(
        "--warm-caches-only",
        action="store_true",
        help="skip the cold build with empty compiler caches: the builds use "
        "this machine's caches (about half the time, for the no-op and "
        "prose-edit figures)",
    )
    parser.add_argument("--output", default=str(REPO / "_build" / "bench-build.json"))
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="site-bench-") as scratch:
        project = copy_project(Path(scratch) / "site")
        if args.warm_caches_only:
            caches = {}  # the machine's, as make exports them
        else:
            caches = {
                "TORCHINDUCTOR_CACHE_DIR": str(Path(scratch) / "inductor-cache"),
                "TORCH_EXTENSIONS_DIR": str(Path(scratch) / "torch-extensions"),
            }
        timings = time_builds(project, args, caches)
        examples = example_times(project)
        weights = page_weights(project / "_build" / "html")
    sizes = {p.stem: page_size(p) for p in sorted(REPO.glob("advanced/*.py"))}
    results = summary(args, timings, examples, weights, sizes)
    output = Path(args.output)
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(results, indent=2) + "\n")
    rows = table_rows(args.example, results)
    width = max(len(label) for label, _ in rows)
    for label, value in rows:
        print(f"{label:<{width}}  {value:>10}")
    print(f"written to {output}")


def copy_project(project):
    """The project's files (as git lists them) copied to ``project``."""
    for name in layout.project_files():
        target = project / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / name, target)
    return project


def time_builds(project, args, caches):
    """{figure: seconds} of the timed builds, in their order; with empty
    caches first (unless ``--warm-caches-only``), also those runs' example
    times, as ``examples_empty``."""
    timings = {}
    if not args.warm_caches_only:
        print("cold build, empty compiler caches ...", flush=True)
        timings["cold_empty"] = timed_make_html(project, args.venv, caches)
        timings["examples_empty"] = example_times(project)
        subprocess.run(["make", "clean"], cwd=project, check=True, capture_output=True)
    print("cold build, warm compiler caches ...", flush=True)
    timings["cold"] = timed_make_html(project, args.venv, caches)
    print("no-op rebuild ...", flush=True)
    timings["noop"] = timed_make_html(project, args.venv, caches)
    print(f"rebuild after a prose edit to {args.example}.py ...", flush=True)
    edit_prose(project / "advanced" / f"{args.example}.py")
    timings["single"] = timed_make_html(project, args.venv, caches)
    return timings


def edit_prose(script):
    """Add a word to the first line of prose after the title block (the title
    itself would outgrow its underline: a warning, a failed build)."""
    lines = script.read_text(encoding="utf-8").split("\n")
    underline = next(i for i, line in enumerate(lines) if line.startswith("==="))
    prose = next(i for i in range(underline + 1, len(lines)) if lines[i].strip())
    lines[prose] += " (edited)"
    script.write_text("\n".join(lines), encoding="utf-8")


def summary(args, timings, examples, weights, sizes):
    """What ``_build/bench-build.json`` holds."""
    heaviest = max(weights, key=weights.get)
    single, ran = timings["single"], examples[args.example]
    results = {
        **benchmarks.stamp(),
        "cold_build_s": round(timings["cold"], 1),
        "noop_rebuild_s": round(timings["noop"], 1),
        "prose_edit_rebuild_s": round(single, 1),
        "prose_edit_example": args.example,
        "prose_edit_overhead_s": round(single - ran, 1),
        "targets": {
            "noop_rebuild_s": NOOP_TARGET_S,
            "prose_edit_overhead_s": PROSE_EDIT_OVERHEAD_TARGET_S,
        },
        "page_size": sizes,
        "example_execution_s": {k: round(v, 1) for k, v in examples.items()},
        "page_bytes": weights,
        "heaviest_page": {"page": heaviest, "bytes": weights[heaviest]},
    }
    if "cold_empty" in timings:
        results["cold_build_empty_caches_s"] = round(timings["cold_empty"], 1)
        results["example_execution_empty_caches_s"] = {
            k: round(v, 1) for k, v in timings["examples_empty"].items()
        }
    return results


def table_rows(example, results):
    """(label, value) rows of the table printed at the end."""
    noop, single = results["noop_rebuild_s"], results["prose_edit_rebuild_s"]
    ran = results["example_execution_s"][example]
    rows = []
    if "cold_build_empty_caches_s" in results:
        rows.append(
            (
                "cold build, empty compiler caches",
                f"{results['cold_build_empty_caches_s']:.1f} s",
            )
        )
    rows += [
        ("cold build, warm compiler caches", f"{results['cold_build_s']:.1f} s"),
        ("no-op rebuild, both editions", f"{noop:.1f} s"),
        (f"  target: {NOOP_TARGET_S} s", "met" if noop <= NOOP_TARGET_S else "MISSED"),
        (f"rebuild after a prose edit to {example}", f"{single:.1f} s"),
        (f"  of which {example} ran", f"{ran:.1f} s"),
        (
            f"  target: {PROSE_EDIT_OVERHEAD_TARGET_S} s beyond the run",
            "met" if single - ran <= PROSE_EDIT_OVERHEAD_TARGET_S else "MISSED",
        ),
    ]
    empty = results.get("example_execution_empty_caches_s", {})
    rows += [
        (
            f"  run {name}.py, empty / warm caches",
            f"{empty[name]:.1f} / {warm:.1f} s"
            if name in empty
            else f"- / {warm:.1f} s",
        )
        for name, warm in results["example_execution_s"].items()
    ]
    heaviest = results["heaviest_page"]
    rows.append(
        (f"heaviest page: {heaviest['page']}", f"{heaviest['bytes'] / 1024:.0f} KiB")
    )
    rows += [
        (f"  {name}: prose words / code lines", f"{words} / {lines}")
        for name, (words, lines) in results["page_size"].items()
    ]
    return rows


if __name__ == "__main__":
    main()
