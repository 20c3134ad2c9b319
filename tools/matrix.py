"""Run every page under every PyTorch release the site supports, and record it.

``make matrix`` runs this script. For each release in ``versions/matrix.toml`` it
makes sure the release's virtual environment exists (``tools/envs.py``), then
runs each page standalone, ``python advanced/<name>.py`` from an empty folder,
one page per core, with a timeout. Each (page, release) gets a record in
``versions/records/<name>.json``:

* ``code_digest``: the identity of the page's code that ran
  (``pagelib.contract.code_digest``: its code blocks, without prose or
  comments), so a record of other code is recognisably stale while a prose
  edit keeps it current;
* ``result``: ``pass``; ``below-floor`` when the page stopped in its first
  cell with its one-line "needs PyTorch X.Y or later" message; ``fail``
  otherwise, with ``error``, the first line of what it raised;
* ``seconds``, ``torch`` (the exact version that ran), ``devices`` and ``ran_at``.

The records are committed, like a lock file: the build and the tests read them
to show each page's floor and the releases it was verified on, and refuse
records that no longer match a page's source.

    python tools/matrix.py run [--release R ...] [--page NAME ...] [--probe]
    python tools/matrix.py table        the matrix as a Markdown table
    python tools/matrix.py stale        list records that no longer match
    python tools/matrix.py rekey        one-off: key records by code digest

It runs with the site's environment (``make matrix``): the code digest uses
Sphinx-Gallery's own parser.

``--probe`` runs the pages with their floor check disabled, to find out how far
back a page really goes; it prints the table and writes no records.
"""

import argparse
import concurrent.futures
import datetime
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import envs

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from pagelib import contract  # noqa: E402

RECORDS = REPO / "versions" / "records"
EXAMPLES = REPO / "advanced"


def pages():
    return sorted(p.stem for p in EXAMPLES.glob("*.py"))


def release_key(version):
    return tuple(int(part) for part in version.split("+")[0].split(".")[:3])


def load_records(folder=RECORDS):
    """{page: {release: record}} for every page that has records."""
    return {
        path.stem: json.loads(path.read_text())
        for path in sorted(Path(folder).glob("*.json"))
    }


def save_record(page, release, record, folder=RECORDS):
    """Add one record to the page's file, keeping releases in order."""
    path = Path(folder) / f"{page}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    by_release = json.loads(path.read_text()) if path.is_file() else {}
    by_release[release] = record
    ordered = dict(sorted(by_release.items(), key=lambda item: release_key(item[0])))
    path.write_text(json.dumps(ordered, indent=1) + "\n")


def first_error_line(stderr):
    """The line naming what was raised: the last 'SomethingError: ...' line.

    A bare ``AssertionError`` says nothing, so the failing source line the
    traceback shows above it is added.
    """
    lines = [line.rstrip() for line in stderr.splitlines() if line.strip()]
    for index in range(len(lines) - 1, -1, -1):
        line = lines[index]
        if re.match(r"^[\w.]+(Error|Exception|Exit|Interrupt|Unsupported)\b", line):
            if ":" not in line:
                code = [
                    earlier.strip()
                    for earlier in lines[:index]
                    if earlier.startswith("    ")
                    and not earlier.lstrip().startswith("^")
                ]
                if code:
                    line = f"{line} at: {code[-1]}"
            return line[:300]
    return lines[-1][:300] if lines else "no output"


def classify(returncode, stdout, stderr, timed_out):
    if timed_out:
        return "fail", "timed out"
    if returncode == 0:
        return "pass", None
    lines = [line for line in stderr.splitlines() if line.strip()]
    if len(lines) == 1 and contract.BELOW_FLOOR.search(lines[0]):
        return "below-floor", lines[0]
    return "fail", first_error_line(stderr)


def run_page(venv, release, page, timeout, probe):
    source = EXAMPLES / f"{page}.py"
    text = source.read_text(encoding="utf-8")
    caches = envs.cache_home() / "matrix" / f"caches-{release['torch']}"
    with tempfile.TemporaryDirectory(prefix=f"matrix-{page}-") as folder:
        script = Path(folder) / source.name
        script.write_text(text, encoding="utf-8")
        digest = contract.code_digest(script)  # of the code that runs
        if probe:
            script.write_text(contract.disable_floor_check(text), encoding="utf-8")
        env = {
            **os.environ,
            "MPLBACKEND": "Agg",
            "TORCHINDUCTOR_CACHE_DIR": str(caches / "inductor"),
            "TORCH_EXTENSIONS_DIR": str(caches / "extensions"),
            "PYTHONDONTWRITEBYTECODE": "1",
        }
        env.pop("TRITON_INTERPRET", None)
        start = time.perf_counter()
        try:
            process = subprocess.run(
                [str(venv / "bin" / "python"), "-X", "faulthandler", script.name],
                cwd=folder,
                env=env,
                capture_output=True,
                text=True,
                timeout=timeout,
                stdin=subprocess.DEVNULL,
            )
            returncode, stdout, stderr, timed_out = (
                process.returncode,
                process.stdout,
                process.stderr,
                False,
            )
        except subprocess.TimeoutExpired as expired:
            returncode, timed_out = None, True
            stdout = (expired.stdout or b"").decode(errors="replace")
            stderr = (expired.stderr or b"").decode(errors="replace")
        seconds = time.perf_counter() - start
    result, error = classify(returncode, stdout, stderr, timed_out)
    torch_version, devices = contract.devices_in_output(stdout)
    return {
        "code_digest": digest,
        "result": result,
        "error": error,
        "seconds": round(seconds, 1),
        "torch": torch_version or release["torch"],
        "devices": devices,
        "ran_at": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    }


def run(args):
    releases = envs.all_releases()
    if args.release:
        unknown = set(args.release) - {r["torch"] for r in releases}
        if unknown:
            sys.exit(f"not in versions/matrix.toml: {', '.join(sorted(unknown))}")
        releases = [r for r in releases if r["torch"] in args.release]
    chosen = args.page or pages()
    unknown = set(chosen) - set(pages())
    if unknown:
        sys.exit(f"no such page in advanced/: {', '.join(sorted(unknown))}")

    # Environments first, one at a time (they share uv's cache); a release
    # that cannot be installed is reported and the others still run.
    ready, missing = [], {}
    for release in releases:
        venv, requirements = envs.matrix_venv(release)
        try:
            envs.ensure(
                venv,
                requirements,
                requirements.split("\n"),
                f"torch {release['torch']}",
            )
            ready.append((release, venv))
        except SystemExit as exit_:
            missing[release["torch"]] = str(exit_.code or "failed")
            print(f"matrix: torch {release['torch']} could not be installed")

    lock = threading.Lock()
    results = {}
    jobs = [(release, venv, page) for release, venv in ready for page in chosen]
    print(
        f"matrix: {len(jobs)} runs ({len(chosen)} pages x {len(ready)} releases), "
        f"{args.jobs} at a time",
        flush=True,
    )

    def work(job):
        release, venv, page = job
        record = run_page(venv, release, page, args.timeout, args.probe)
        with lock:
            results[page, release["torch"]] = record
            mark = {"pass": "ok", "below-floor": "stop", "fail": "FAIL"}[
                record["result"]
            ]
            detail = f"  {record['error']}" if record["error"] else ""
            print(
                f"{mark:>4} {page} torch {release['torch']} "
                f"({record['seconds']:.0f} s){detail}",
                flush=True,
            )
            if not args.probe:
                save_record(page, release["torch"], record)

    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        list(pool.map(work, jobs))

    print()
    print(
        table({p: {r: results[p, r] for (p2, r) in results if p2 == p} for p in chosen})
    )
    for release, why in missing.items():
        print(f"torch {release}: not installed: {why}")
    failed = [key for key, record in results.items() if record["result"] == "fail"]
    return 1 if missing else 0 if not args.strict or not failed else 1


def table(records, releases=None):
    releases = releases or [r["torch"] for r in envs.all_releases()]
    marks = {"pass": "✓", "fail": "✗", "below-floor": "–"}
    head = "| page | floor | " + " | ".join(releases) + " |"
    rows = [head, "| --- | --- | " + " | ".join("---" for _ in releases) + " |"]
    for page, by_release in sorted(records.items()):
        current = (EXAMPLES / f"{page}.py").is_file() and contract.code_digest(
            EXAMPLES / f"{page}.py"
        )
        cells = []
        for release in releases:
            record = by_release.get(release)
            if record is None:
                cells.append("·")
            else:
                stale = "*" if record.get("code_digest") != current else ""
                cells.append(marks[record["result"]] + stale)
        passing = [
            r
            for r in releases
            if by_release.get(r, {}).get("result") == "pass"
            and by_release[r].get("code_digest") == current
        ]
        floor = ".".join(passing[0].split(".")[:2]) if passing else "none"
        rows.append(f"| {page} | {floor} | " + " | ".join(cells) + " |")
    legend = (
        "\n✓ passes, ✗ fails, – stops below its floor with a one-line message, "
        "· not run, * record of an older version of the page"
    )
    return "\n".join(rows) + legend


def stale(args):
    records = load_records()
    problems = []
    for page in pages():
        digest = contract.code_digest(EXAMPLES / f"{page}.py")
        for release in envs.all_releases():
            record = records.get(page, {}).get(release["torch"])
            if record is None:
                problems.append(f"{page}: no record for torch {release['torch']}")
            elif record.get("code_digest") != digest:
                problems.append(f"{page}: record for torch {release['torch']} is stale")
    print("\n".join(problems) or "every record is current")
    return 1 if problems else 0


def rekey(args):
    """Key the records of whole-file MD5s by code digest, once.

    A record still naming the MD5 of the page's current source recorded a run
    of exactly this code, so it gets the code's digest; a record of another
    version of the page stays as it is, stale, until ``make matrix`` re-runs it.
    """
    import hashlib

    changed = 0
    for page, by_release in load_records().items():
        source = EXAMPLES / f"{page}.py"
        if not source.is_file():
            continue
        md5 = hashlib.md5(source.read_text(encoding="utf-8").encode()).hexdigest()
        digest = contract.code_digest(source)
        for release, record in by_release.items():
            if record.get("source_md5") == md5:
                del record["source_md5"]
                save_record(page, release, {"code_digest": digest, **record})
                changed += 1
    print(f"re-keyed {changed} current records")
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run_parser = sub.add_parser("run")
    run_parser.add_argument("--release", action="append", default=[])
    run_parser.add_argument("--page", action="append", default=[])
    run_parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    run_parser.add_argument("--timeout", type=int, default=900)
    run_parser.add_argument("--probe", action="store_true")
    run_parser.add_argument(
        "--strict", action="store_true", help="exit non-zero when a page fails"
    )
    sub.add_parser("table")
    sub.add_parser("stale")
    sub.add_parser("rekey")
    args = parser.parse_args()
    if args.command == "run":
        sys.exit(run(args))
    if args.command == "table":
        print(table(load_records()))
    elif args.command == "rekey":
        sys.exit(rekey(args))
    else:
        sys.exit(stale(args))


if __name__ == "__main__":
    main()
