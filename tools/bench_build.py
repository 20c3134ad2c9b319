"""Measure how fast the site builds and how heavy its pages are.

``make bench`` runs this script. It copies the project's files (tracked and
untracked-but-not-ignored, as git lists them) into a scratch directory, so the
working tree's own build is left alone, and there measures:

* a cold build: no generated gallery, every example executed, with empty
  compiler caches (Inductor's and the C++ extensions', in a scratch folder);
* the same cold build again, now with those compiler caches warm, as on a
  machine that has built the site before;
* a no-op rebuild of both editions: nothing changed (target: 5 s at most);
* a rebuild after a prose-only edit to one example (its records stay
  current; Sphinx-Gallery runs that one page again): target at most 20 s
  beyond the page's own run time;
* each page's prose words and code lines (Sphinx-Gallery's split);
* each example's execution time, as Sphinx-Gallery recorded it;
* each page's weight: its HTML plus the images it loads.

The numbers go to ``_build/bench.json`` and a short table on standard output.
"""

import argparse
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

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
    parser.add_argument("--output", default=str(REPO / "_build" / "bench.json"))
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="site-bench-") as scratch:
        project = Path(scratch) / "site"
        for name in layout.project_files():
            target = project / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, target)

        caches = {
            "TORCHINDUCTOR_CACHE_DIR": str(Path(scratch) / "inductor-cache"),
            "TORCH_EXTENSIONS_DIR": str(Path(scratch) / "torch-extensions"),
        }
        print("cold build, empty compiler caches ...", flush=True)
        cold_empty = timed_make_html(project, args.venv, caches)
        examples_empty = example_times(project)
        subprocess.run(["make", "clean"], cwd=project, check=True, capture_output=True)
        print("cold build, warm compiler caches ...", flush=True)
        cold = timed_make_html(project, args.venv, caches)
        print("no-op rebuild ...", flush=True)
        noop = timed_make_html(project, args.venv, caches)
        print(f"rebuild after a prose edit to {args.example}.py ...", flush=True)
        script = project / "advanced" / f"{args.example}.py"
        # A word added to the first line of prose after the title block (the
        # title itself would outgrow its underline: a warning, a failed build).
        lines = script.read_text(encoding="utf-8").split("\n")
        underline = next(i for i, line in enumerate(lines) if line.startswith("==="))
        prose = next(i for i in range(underline + 1, len(lines)) if lines[i].strip())
        lines[prose] += " (edited)"
        script.write_text("\n".join(lines), encoding="utf-8")
        single = timed_make_html(project, args.venv, caches)

        examples = example_times(project)
        weights = page_weights(project / "_build" / "html")
        sizes = {p.stem: page_size(p) for p in sorted(REPO.glob("advanced/*.py"))}

    heaviest = max(weights, key=weights.get)
    results = {
        "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
        },
        "cold_build_empty_caches_s": round(cold_empty, 1),
        "cold_build_s": round(cold, 1),
        "noop_rebuild_s": round(noop, 1),
        "prose_edit_rebuild_s": round(single, 1),
        "prose_edit_example": args.example,
        "prose_edit_overhead_s": round(single - examples[args.example], 1),
        "targets": {
            "noop_rebuild_s": NOOP_TARGET_S,
            "prose_edit_overhead_s": PROSE_EDIT_OVERHEAD_TARGET_S,
        },
        "page_size": sizes,
        "example_execution_empty_caches_s": {
            k: round(v, 1) for k, v in examples_empty.items()
        },
        "example_execution_s": {k: round(v, 1) for k, v in examples.items()},
        "page_bytes": weights,
        "heaviest_page": {"page": heaviest, "bytes": weights[heaviest]},
    }
    output = Path(args.output)
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(results, indent=2) + "\n")

    rows = [
        ("cold build, empty compiler caches", f"{cold_empty:.1f} s"),
        ("cold build, warm compiler caches", f"{cold:.1f} s"),
        ("no-op rebuild, both editions", f"{noop:.1f} s"),
        (f"  target: {NOOP_TARGET_S} s", "met" if noop <= NOOP_TARGET_S else "MISSED"),
        (f"rebuild after a prose edit to {args.example}", f"{single:.1f} s"),
        (f"  of which {args.example} ran", f"{examples[args.example]:.1f} s"),
        (
            f"  target: {PROSE_EDIT_OVERHEAD_TARGET_S} s beyond the run",
            "met"
            if single - examples[args.example] <= PROSE_EDIT_OVERHEAD_TARGET_S
            else "MISSED",
        ),
    ]
    rows += [
        (
            f"  run {name}.py, empty / warm caches",
            f"{examples_empty[name]:.1f} / {t:.1f} s",
        )
        for name, t in examples.items()
    ]
    rows.append((f"heaviest page: {heaviest}", f"{weights[heaviest] / 1024:.0f} KiB"))
    rows += [
        (f"  {name}: prose words / code lines", f"{words} / {lines}")
        for name, (words, lines) in sizes.items()
    ]
    width = max(len(label) for label, _ in rows)
    for label, value in rows:
        print(f"{label:<{width}}  {value:>10}")
    print(f"written to {output}")


if __name__ == "__main__":
    main()
