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
  otherwise, with ``error``, the first line of what it raised, or what it
  left behind (below);
* ``seconds``, ``torch`` (the exact version that ran), ``devices`` and ``ran_at``.

The records are committed, like a lock file: the build and the tests read them
to show each page's floor and the releases it was verified on, and refuse
records that no longer match a page's source.

    python tools/matrix.py run [--release R ...] [--page NAME ...] [--probe]
                               [--records DIR] [--require-cuda] [--strict]
    python tools/matrix.py plan [--lane cpu|gpu] [--gpu-runner LABELS] [R ...]
                                        the workflow's fan-out, as step outputs
    python tools/matrix.py merge [--into DIR] [--lane cpu|gpu] [--dry-run]
                                 [--summary FILE] [--github-output FILE] DIR ...
                                        combine shards' records (CI)
    python tools/matrix.py table        the matrix as a Markdown table
    python tools/matrix.py costs        what each shard of the workflow costs,
                                        from the records' seconds
    python tools/matrix.py stale        list records that no longer match

It runs with the site's environment (``make matrix``): the code digest uses
Sphinx-Gallery's own parser. (``pagelib.contract`` is imported where it is
used, so that ``merge`` needs the standard library only: the workflow's merge
job has no site environment.)

``--records DIR`` writes the records into DIR instead of ``versions/records``:
one shard of the matrix workflow (``.github/workflows/matrix.yml``) runs one
release into a folder of its own, and ``merge`` combines the shards' folders
into ``versions/records``. A folder given to ``merge`` is a shard (it holds
``<page>.json`` files) or a folder of shards (one subfolder each, as the
workflow downloads them); a merge that finds no record at all fails. Two
shards that recorded the same page, release and code with different results
conflict: ``merge`` names each such pair and writes nothing.

``merge --lane gpu`` merges the GPU lane's shards over the records already
there: a GPU record replaces the record of the same page and release unless
both recorded the same code with different results (a page that passes on the
CPU and fails on CUDA, or the reverse); then the record there stays and the
disagreement is listed. ``--summary FILE`` appends a Markdown table of what
changed, release by release (the job summary and the pull request's body),
``--github-output FILE`` the counts and a title as step outputs, and
``--dry-run`` reports without writing (a shard's own summary).

``--require-cuda`` is the GPU lane's: a page that passed but whose devices line
lacks ``cuda``, or any page of a release whose torch sees no CUDA device, is
recorded as ``fail``, except the pages ``pagelib/course.toml`` marks
``cpu_only`` (pages with no CUDA path by design). The pages
that build CUDA kernels need the CUDA toolkit of the release's CUDA major
version: for each release, ``CUDA_HOME_<major>_<minor>`` or ``CUDA_HOME_<major>``
names it, or it is found as ``/usr/local/cuda-<major>.<minor>`` (the newest of
that major otherwise), and the pages get it as ``CUDA_HOME``. A release with
none runs no page and records nothing: the run names what to install and
fails, as for a release that cannot be installed.

A page runs with a temporary directory (``TMPDIR``) of its own. A run that
leaves files there fails, naming them (``left_in_tmpdir``), less what PyTorch
leaves whatever a page does (``PYTORCHS_OWN``): the page's own folders, and the
unpacked AOTInductor packages (``aotinductor_*``, megabytes each) that a child
process that crashes or is killed, or a model still referenced as the
interpreter ends, leaves on the reader's disk on every run.

``--probe`` runs the pages with their floor check disabled, to find out how far
back a page really goes; it prints the table and writes no records.
"""

import argparse
import concurrent.futures
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
from pagelib.layout import minor, release_key  # noqa: E402 - the standard library only

RECORDS = REPO / "versions" / "records"
EXAMPLES = REPO / "advanced"


def pages():
    return sorted(p.stem for p in EXAMPLES.glob("*.py"))


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


# What PyTorch itself leaves in TMPDIR whatever a page does, and so not a
# page's leftover: Inductor's precompiled headers, from 2.12 on (kept in
# ``torchinductor_<user>`` on purpose, outside TORCHINDUCTOR_CACHE_DIR, for
# every later process), the trace log torch.export writes (``export_root``),
# the error files torch.multiprocessing makes for the processes it starts
# (``pytorch-errorfile-*``), and the folder torch.distributed.nn makes at
# import, up to 2.9, and deletes at exit: a child process that a page lets
# crash on purpose cannot delete it.
PYTORCHS_OWN = re.compile(r"torchinductor_.+|export_root|pytorch-errorfile-.+")
PYTORCHS_OWN_FILES = {"_remote_module_non_scriptable.py", "__pycache__"}


def left_in_tmpdir(folder):
    """What a run left in its temporary directory ``folder``, less PyTorch's
    own (``PYTORCHS_OWN``): each entry's name, with what a folder holds."""
    left = []
    for path in sorted(Path(folder).iterdir()):
        inside = sorted(child.name for child in path.iterdir()) if path.is_dir() else []
        if PYTORCHS_OWN.fullmatch(path.name) or (
            "_remote_module_non_scriptable.py" in inside
            and set(inside) <= PYTORCHS_OWN_FILES
        ):
            continue
        left.append(f"{path.name} ({', '.join(inside)})" if inside else path.name)
    return left


def classify(returncode, stderr, timed_out, left_behind=()):
    """(result, error) of a run; ``left_behind``, what it left in its
    temporary directory (``left_in_tmpdir``), fails a run that otherwise
    passed."""
    from pagelib import contract

    if timed_out:
        return "fail", "timed out"
    if returncode == 0 and left_behind:
        left = "; ".join(left_behind)
        return "fail", f"left files in TMPDIR: {left}"[:300]
    if returncode == 0:
        return "pass", None
    lines = [line for line in stderr.splitlines() if line.strip()]
    if len(lines) == 1 and contract.BELOW_FLOOR.search(lines[0]):
        return "below-floor", lines[0]
    return "fail", first_error_line(stderr)


def run_page(venv, release, page, digest, timeout, probe, extra_env=None):
    """The record of one run of ``page`` (whose code has the digest
    ``digest``) under the release's environment ``venv``. The page runs with
    a temporary directory of its own (``TMPDIR``): a run that passes but
    leaves files there (``left_in_tmpdir``) fails, naming them."""
    from pagelib import contract, records

    source = EXAMPLES / f"{page}.py"
    text = source.read_text(encoding="utf-8")
    with tempfile.TemporaryDirectory(prefix=f"matrix-{page}-") as folder:
        script = Path(folder) / source.name
        script.write_text(text, encoding="utf-8")
        if probe:
            script.write_text(contract.disable_floor_check(text), encoding="utf-8")
        temporary = Path(folder) / "tmp"  # the page's own TMPDIR
        temporary.mkdir()
        env = {
            **os.environ,
            "MPLBACKEND": "Agg",
            **envs.release_caches(release["torch"]),
            "PYTHONDONTWRITEBYTECODE": "1",
            "TMPDIR": str(temporary),
            **(extra_env or {}),
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
        left_behind = left_in_tmpdir(temporary)
    result, error = classify(returncode, stderr, timed_out, left_behind)
    torch_version, devices = contract.devices_in_output(stdout)
    return records.new_record(
        digest,
        result,
        torch_version or release["torch"],
        error=error,
        seconds=seconds,
        devices=devices,
        # a page that tracks PyTorch behaviours (``records.edge_table``)
        edges=contract.edges_in_output(stdout),
    )


def cuda_available(venv):
    """Whether the torch of ``venv`` sees a CUDA device."""
    process = subprocess.run(
        [str(venv / "bin" / "python"), "-c", CUDA_PROBE],
        capture_output=True,
        text=True,
        timeout=600,
        stdin=subprocess.DEVNULL,
    )
    return process.returncode == 0 and process.stdout.strip() == "True"


CUDA_PROBE = "import torch; print(torch.cuda.is_available())"

# Where NVIDIA's installers put the CUDA toolkits (cuda-12.8, cuda-13.0, ...);
# the tests point it elsewhere.
TOOLKITS = Path(os.environ.get("PYTORCH_SITE_CUDA_TOOLKITS", "/usr/local"))


def torch_cuda_version(venv):
    """The CUDA version the torch of ``venv`` was built with ('12.8'), or None
    for a CPU build; read from torch/version.py, without importing torch."""
    for path in sorted(Path(venv).glob("lib/python*/site-packages/torch/version.py")):
        found = re.search(
            r"^cuda\b[^=]*=\s*['\"]([\d.]+)['\"]", path.read_text(), re.MULTILINE
        )
        return found.group(1) if found else None
    return None


def version_tuple(text):
    return tuple(int(part) for part in re.findall(r"\d+", text))


def cuda_toolkit(cuda, environ=None, root=None):
    """(the CUDA_HOME to build kernels for a torch built with CUDA ``cuda``,
    or None; where it came from, or what is missing).

    nvcc must have the same major version as torch's CUDA (torch's extension
    builder refuses another major and only warns about another minor).
    """
    environ = os.environ if environ is None else environ
    root = TOOLKITS if root is None else Path(root)
    major, minor = cuda.split(".")[:2]
    for name in (f"CUDA_HOME_{major}_{minor}", f"CUDA_HOME_{major}"):
        if environ.get(name):
            home = Path(environ[name])
            if (home / "bin" / "nvcc").is_file():
                return home, f"{name}={home}"
            return None, f"{name}={home} holds no bin/nvcc"
    installed = sorted(
        root.glob(f"cuda-{major}.*"),
        key=lambda home: (
            home.name == f"cuda-{major}.{minor}",
            version_tuple(home.name),
        ),
        reverse=True,
    )
    for home in installed:
        if (home / "bin" / "nvcc").is_file():
            return home, str(home)
    return None, (
        f"no CUDA {major} toolkit for its CUDA {cuda}: set CUDA_HOME_{major} "
        f"to one, or install one as {root}/cuda-{major}.<minor>"
    )


def require_cuda(record, cuda):
    """The GPU lane's verdict on a record: a pass that did not run on CUDA
    (``cuda``: whether torch saw a device) is a failure. A failure stays one,
    and so does a stop below the floor (it printed no devices line)."""
    if record["result"] != "pass":
        return record
    if not cuda:
        error = "--require-cuda: torch.cuda.is_available() is False"
    elif "cuda" not in (record.get("devices") or []):
        error = (
            f"--require-cuda: the devices line says {record.get('devices')}, "
            "without cuda"
        )
    else:
        return record
    return {**record, "result": "fail", "error": error}


def not_run(release, digest, error):
    """The record of a page (whose code has the digest ``digest``) that was
    not run, with why."""
    from pagelib import records

    return records.new_record(digest, "fail", release["torch"], error=error)


def run(args):
    """``make matrix``: plan the runs, make the environments, check the GPU
    lane's CUDA, run every (page, release) and print the table."""
    releases, digests = plan_runs(args)
    ready, missing = make_environments(releases)
    toolkit_env, cuda = {}, {}
    if args.require_cuda:
        toolkit_env = find_toolkits(ready, missing)
        cuda = probe_cuda(ready)
    results = execute(args, ready, digests, toolkit_env, cuda)
    print()
    by_page = {p: {r: results[p, r] for (p2, r) in results if p2 == p} for p in digests}
    print(table(by_page, digests=digests))
    for release, why in missing.items():
        print(f"torch {release}: not run: {why}")
    failed = [key for key, record in results.items() if record["result"] == "fail"]
    return 1 if missing else 0 if not args.strict or not failed else 1


def plan_runs(args):
    """(the releases to run, {page: its code digest}) that ``args`` name,
    or exit naming what is unknown.

    A record names its page's code digest: a page Sphinx-Gallery cannot split
    into text and code is refused before any environment is made.
    """
    from pagelib import contract

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
    digests = {}
    for page in chosen:
        try:
            digests[page] = contract.code_digest(EXAMPLES / f"{page}.py")
        except Exception as error:  # Sphinx-Gallery's ExtensionError, a SyntaxError
            sys.exit(f"advanced/{page}.py: {error}")
    return releases, digests


def make_environments(releases):
    """([(release, venv)] ready to run, {release: why not} of the others).

    One at a time (they share uv's cache); a release that cannot be installed
    is reported and the others still run.
    """
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
            envs.install_checker(venv)
            ready.append((release, venv))
        except SystemExit as exit_:
            missing[release["torch"]] = str(exit_.code or "failed")
            print(f"matrix: torch {release['torch']} could not be installed")
    return ready, missing


def find_toolkits(ready, missing):
    """The GPU lane: {release: {"CUDA_HOME": toolkit}} for the pages that
    build CUDA kernels. A release without the toolkit of its CUDA runs no page
    and records nothing (its records would say the page fails, not that the
    runner lacks it): it leaves ``ready`` for ``missing``."""
    toolkit_env = {}
    for release, venv in list(ready):
        cuda_version = torch_cuda_version(venv)
        if cuda_version is None:
            home, why = None, "its torch is built without CUDA"
        else:
            home, why = cuda_toolkit(cuda_version)
        if home is None:
            missing[release["torch"]] = f"--require-cuda: {why}"
            ready.remove((release, venv))
            print(f"matrix: torch {release['torch']}: {why}")
        else:
            toolkit_env[release["torch"]] = {"CUDA_HOME": str(home)}
            print(f"matrix: torch {release['torch']} builds CUDA with {why}")
    return toolkit_env


def probe_cuda(ready):
    """The GPU lane: {release: whether its torch sees a CUDA device}. A
    release whose torch sees none runs no page; each is recorded as failed."""
    cuda = {}
    for release, venv in ready:
        cuda[release["torch"]] = cuda_available(venv)
        if not cuda[release["torch"]]:
            print(f"matrix: torch {release['torch']} sees no CUDA device")
    return cuda


def execute(args, ready, digests, toolkit_env, cuda):
    """Run every page of ``digests`` on every release of ``ready``,
    ``args.jobs`` at a time; print and save each record as it comes.
    Returns {(page, release): record}."""
    lock = threading.Lock()
    results = {}
    jobs = [(release, venv, page) for release, venv in ready for page in digests]
    from pagelib import course  # the site's environment: Sphinx-Gallery

    cpu_only = course.cpu_only()
    print(
        f"matrix: {len(jobs)} runs ({len(digests)} pages x {len(ready)} releases), "
        f"{args.jobs} at a time",
        flush=True,
    )

    def work(job):
        release, venv, page = job
        if args.require_cuda and not cuda[release["torch"]]:
            # No page may pass on a GPU lane without a GPU, CPU-only or not.
            record = not_run(release, digests[page], "--require-cuda: no CUDA device")
        else:
            record = run_page(
                venv,
                release,
                page,
                digests[page],
                args.timeout,
                args.probe,
                toolkit_env.get(release["torch"]),
            )
        if args.require_cuda and page not in cpu_only:
            record = require_cuda(record, cuda[release["torch"]])
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
                save_record(page, release["torch"], record, args.records)

    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        list(pool.map(work, jobs))
    return results


# -- Shards ----------------------------------------------------------------------


class Conflict(Exception):
    """Two shards recorded the same page, release and code with different
    results."""


def merge_records(shards):
    """One {page: {release: record}} from several, given as (name, records).

    A (page, release) that more than one shard recorded keeps the record that
    ran last (``ran_at``); but two records of the same code (``code_digest``)
    with different ``result`` conflict: the run cannot say which is true.
    Every conflict is collected, then ``Conflict`` names them all.
    """
    merged, origin, conflicts = {}, {}, []
    for name, records in shards:
        for page, by_release in sorted(records.items()):
            for release, record in by_release.items():
                held = merged.get(page, {}).get(release)
                if held is not None:
                    same_code = held.get("code_digest") == record.get("code_digest")
                    if same_code and held["result"] != record["result"]:
                        digest = record.get("code_digest")
                        conflicts.append(
                            f"{page}, torch {release}, code {digest}:"
                            f" {held['result']} in {origin[page, release]}"
                            f" but {record['result']} in {name}"
                        )
                        continue
                    if record.get("ran_at", "") < held.get("ran_at", ""):
                        continue
                merged.setdefault(page, {})[release] = record
                origin[page, release] = name
    if conflicts:
        raise Conflict(
            f"{len(conflicts)} conflicting record(s), nothing merged:\n  "
            + "\n  ".join(conflicts)
        )
    return merged


def shard_folders(folder):
    """The shards in ``folder``: the folder itself when it holds records, or
    each of its subfolders that does (the workflow downloads every shard's
    artifact into a folder of its own, ``shards/<release>/``)."""
    folder = Path(folder)
    if not folder.is_dir():
        sys.exit(f"merge: {folder} is not a folder of records")
    if any(folder.glob("*.json")):
        return [folder]
    return sorted(sub for sub in folder.iterdir() if any(sub.glob("*.json")))


def lane_updates(before, merged, lane):
    """What a lane's merged records change in ``before``: ``(updates,
    disagreements)``, each {page: {release: record}}.

    The CPU lane's records replace those before them, as a run of ``make
    matrix`` would. A GPU record replaces one before it too (it adds CUDA to
    the page's devices), unless both are of the same code and their results
    differ: the GPU lane then says something about the GPU runner (a missing
    toolkit, an old driver, a page's CUDA branch), and the record before it
    stays; the GPU record is listed as a disagreement.
    """
    updates, disagreements = {}, {}
    for page, by_release in merged.items():
        for release, record in by_release.items():
            held = before.get(page, {}).get(release)
            if (
                lane == "gpu"
                and held is not None
                and held.get("code_digest") == record.get("code_digest")
                and held.get("result") != record.get("result")
            ):
                disagreements.setdefault(page, {})[release] = record
            else:
                updates.setdefault(page, {})[release] = record
    return updates, disagreements


MARKS = {"pass": "✓", "fail": "✗", "below-floor": "–"}


def describe_change(held, record, disagreement=False):
    """One cell of the table of what a merge changes (Markdown)."""
    mark = MARKS[record["result"]]
    if disagreement:
        return f"{MARKS[held['result']]} kept, GPU {mark}"
    if held is None:
        return f"{mark} new"
    if held.get("result") != record["result"]:
        return f"**{mark}** was {MARKS.get(held.get('result'), '?')}"
    cuda = "cuda" in (record.get("devices") or [])
    if cuda and "cuda" not in (held.get("devices") or []):
        return f"{mark} +CUDA"
    if held.get("code_digest") != record.get("code_digest"):
        return f"{mark} new code"
    return mark


def change_report(before, merged, lane, updates, disagreements):
    """The merge's summary: counts, a page x release table of what changed,
    and every failure with its error. Returns (markdown, counts)."""
    releases = sorted(
        {release for by_release in merged.values() for release in by_release},
        key=release_key,
    )
    counts = {"records": 0, "changed": 0, "new": 0, "failing": 0, "disagree": 0}
    rows, failures = [], []
    for page in sorted(merged):
        cells = []
        for release in releases:
            record = merged[page].get(release)
            if record is None:
                cells.append("·")
                continue
            held = before.get(page, {}).get(release)
            disagreement = release in disagreements.get(page, {})
            counts["records"] += 1
            counts["disagree"] += disagreement
            if not disagreement:
                counts["new"] += held is None
                counts["changed"] += (
                    held is not None and held.get("result") != (record["result"])
                )
            failing = record["result"] == "fail" and not disagreement
            counts["failing"] += failing
            if record["result"] == "fail":
                where = "GPU lane only, kept out" if disagreement else "recorded"
                failures.append(
                    f"- `{page}`, torch {release} ({where}): {record.get('error')}"
                )
            cells.append(describe_change(held, record, disagreement))
        rows.append(f"| {page} | " + " | ".join(cells) + " |")
    lines = [
        f"### Version matrix, {lane.upper()} lane: {counts['records']} record(s) "
        f"of {len(merged)} page(s) on {len(releases)} release(s)",
        "",
        f"Results changed: {counts['changed']}; new records: {counts['new']}; "
        f"failing: {counts['failing']}"
        + (
            f"; GPU results that disagree with the CPU's (kept out): "
            f"{counts['disagree']}"
            if lane == "gpu"
            else ""
        )
        + ".",
        "",
        "| page | " + " | ".join(releases) + " |",
        "| --- | " + " | ".join("---" for _ in releases) + " |",
        *rows,
        "",
        "✓ passes, ✗ fails, – stops below its floor; **bold**: the result "
        "changed (was: the committed one); new: no record before; new code: "
        "the page's code changed since its last record; +CUDA: now also ran "
        "on CUDA; · not in this run.",
    ]
    if failures:
        lines += ["", "Failures:", "", *failures]
    return "\n".join(lines) + "\n", counts


def merge_title(lane, counts):
    title = (
        f"Version matrix records, {lane.upper()} lane: {counts['records']} record(s)"
    )
    details = []
    if counts["changed"]:
        details.append(f"{counts['changed']} changed")
    if counts["failing"]:
        details.append(f"{counts['failing']} failing")
    if counts["disagree"]:
        details.append(f"{counts['disagree']} GPU disagreement(s)")
    return title + (f" ({', '.join(details)})" if details else "")


def merge(args):
    """Merge the shards' records into ``args.into`` (``versions/records``).

    The shards must agree with each other (``merge_records``); what they
    recorded then goes over what the folder held for the same page and
    release as ``lane_updates`` says.
    """
    shards = []
    for folder in args.shards:
        shards.extend(
            (str(shard), load_records(shard)) for shard in shard_folders(folder)
        )
    if not shards:
        print(
            "merge: no records in "
            + ", ".join(map(str, args.shards))
            + ": no shard of this run wrote any",
            file=sys.stderr,
        )
        return 1
    try:
        merged = merge_records(shards)
    except Conflict as conflict:
        print(f"merge: {conflict}", file=sys.stderr)
        return 1
    before = load_records(args.into)
    updates, disagreements = lane_updates(before, merged, args.lane)
    report, counts = change_report(before, merged, args.lane, updates, disagreements)
    count = 0
    for page, by_release in updates.items():
        for release, record in by_release.items():
            old = before.get(page, {}).get(release)
            if old is not None and old.get("result") != record["result"]:
                print(f"{page} torch {release}: {old['result']} -> {record['result']}")
            if not args.dry_run:
                save_record(page, release, record, args.into)
            count += 1
    for page, by_release in disagreements.items():
        for release, record in by_release.items():
            print(
                f"{page} torch {release}: the GPU lane says {record['result']} "
                f"({record.get('error')}), kept {before[page][release]['result']}"
            )
    verb = "would merge" if args.dry_run else "merged"
    print(f"merge: {verb} {count} records from {len(shards)} shard(s) into {args.into}")
    if args.summary:
        with open(args.summary, "a", encoding="utf-8") as summary:
            summary.write(report)
    if args.github_output:
        with open(args.github_output, "a", encoding="utf-8") as outputs:
            for key, value in counts.items():
                outputs.write(f"{key}={value}\n")
            outputs.write(f"title={merge_title(args.lane, counts)}\n")
    return 0


# -- The workflow's fan-out ----------------------------------------------------


def runner_labels(text):
    """The GPU_RUNNER repository variable as the labels of ``runs-on``: one
    label (``gpu``) or a JSON list of them (``["self-hosted", "gpu"]``)."""
    text = (text or "").strip()
    if not text:
        return None
    if text.startswith("["):
        try:
            labels = json.loads(text)
        except ValueError:
            labels = None
        if (
            not isinstance(labels, list)
            or not labels
            or not all(isinstance(label, str) and label.strip() for label in labels)
        ):
            envs.stop(f"GPU_RUNNER is not a JSON list of runner labels: {text}")
        return labels
    if re.search(r"[\s,]", text):
        envs.stop(
            f'GPU_RUNNER holds one label or a JSON list of them (["self-hosted", '
            f'"gpu"]), not {text!r}'
        )
    return [text]


def plan(args):
    """The fan-out of ``.github/workflows/matrix.yml``, as step outputs: the
    releases (all, or those named), the lane and the GPU runner's labels."""
    names = envs.release_names(args.releases)
    labels = runner_labels(args.gpu_runner)
    if args.lane == "gpu" and labels is None:
        envs.stop(
            "the GPU lane needs a runner: set the repository variable GPU_RUNNER "
            "to its label (see docs/dev/workflows.md, The GPU lane)"
        )
    print(f"releases={json.dumps(names)}")
    print(f"lane={args.lane}")
    # A skipped job's runs-on is never used, but must still be valid.
    print(f"gpu-runner={json.dumps(labels or ['ubuntu-24.04'])}")
    return 0


def table(by_page, releases=None, digests=None):
    """The records {page: {release: record}} as a Markdown table, each page's
    floor measured on its current records (``records.standing``); ``digests``
    gives pages' code digests already computed."""
    from pagelib import contract, records

    releases = releases or [r["torch"] for r in envs.all_releases()]
    digests = digests or {}
    marks = {"pass": "✓", "fail": "✗", "below-floor": "–"}
    head = "| page | floor | " + " | ".join(releases) + " |"
    rows = [head, "| --- | --- | " + " | ".join("---" for _ in releases) + " |"]
    for page, by_release in sorted(by_page.items()):
        source = EXAMPLES / f"{page}.py"
        digest = digests.get(page) or (
            source.is_file() and contract.code_digest(source)
        )
        current, missing, _stale = records.standing(by_release, releases, digest)
        cells = [
            "·"
            if release in missing
            else marks[by_release[release]["result"]]
            + ("" if release in current else "*")
            for release in releases
        ]
        passing = [r for r in releases if current.get(r, {}).get("result") == "pass"]
        floor = minor(passing[0]) if passing else "none"
        rows.append(f"| {page} | {floor} | " + " | ".join(cells) + " |")
    legend = (
        "\n✓ passes, ✗ fails, – stops below its floor with a one-line message, "
        "· not run, * record of an older version of the page"
    )
    return "\n".join(rows) + legend


# A shard's setup on GitHub's runners: the site's and the release's
# environments, downloaded, before the first page runs (an estimate).
SETUP_MINUTES = 4


def costs(by_page, releases=None, cores=(2, 4)):
    """What each release's shard of the matrix workflow costs, as a Markdown
    table, from the records' ``seconds`` (the pages run one per core): its
    wall time is ``SETUP_MINUTES`` plus the pages' total over the cores, and
    never less than that plus the slowest page."""
    releases = releases or [r["torch"] for r in envs.all_releases()]
    head = "| release | pages recorded | pages' total | slowest page | "
    head += " | ".join(f"job, {n} cores" for n in cores) + " |"
    rows = [
        head,
        "| --- | ---: | ---: | ---: | " + " | ".join("---:" for _ in cores) + " |",
    ]
    for release in releases:
        seconds = [
            by_release[release]["seconds"]
            for page, by_release in sorted(by_page.items())
            if release in by_release and (EXAMPLES / f"{page}.py").is_file()
        ]
        if not seconds:
            rows.append(
                f"| {release} | 0 | | | " + " | ".join("" for _ in cores) + " |"
            )
            continue
        total, slowest = sum(seconds) / 60, max(seconds) / 60
        jobs = [SETUP_MINUTES + max(total / n, slowest) for n in cores]
        rows.append(
            f"| {release} | {len(seconds)} | {total:.0f} min | {slowest:.1f} min | "
            + " | ".join(f"~{job:.0f} min" for job in jobs)
            + " |"
        )
    return "\n".join(rows)


def stale(args):
    """Every page's missing and stale records, as the build names them."""
    from pagelib import contract, records

    by_page = load_records()
    releases = [release["torch"] for release in envs.all_releases()]
    problems = []
    for page in pages():
        _current, missing, stale_releases = records.standing(
            by_page.get(page, {}),
            releases,
            contract.code_digest(EXAMPLES / f"{page}.py"),
        )
        problems += [
            f"{page}: {problem}"
            for problem in records.staleness_problems(missing, stale_releases)
        ]
    print("\n".join(problems) or "every record is current")
    return 1 if problems else 0


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
        "--records",
        type=Path,
        default=RECORDS,
        help="write the records into this folder (default: versions/records)",
    )
    run_parser.add_argument(
        "--require-cuda",
        action="store_true",
        help="record a page as failed unless it ran on CUDA (the GPU lane)",
    )
    run_parser.add_argument(
        "--strict", action="store_true", help="exit non-zero when a page fails"
    )
    merge_parser = sub.add_parser("merge")
    merge_parser.add_argument("shards", nargs="+", type=Path)
    merge_parser.add_argument("--into", type=Path, default=RECORDS)
    merge_parser.add_argument("--lane", choices=("cpu", "gpu"), default="cpu")
    merge_parser.add_argument("--dry-run", action="store_true")
    merge_parser.add_argument("--summary", type=Path)
    merge_parser.add_argument("--github-output", type=Path)
    plan_parser = sub.add_parser("plan")
    plan_parser.add_argument("releases", nargs="*")
    plan_parser.add_argument("--lane", choices=("cpu", "gpu"), default="cpu")
    plan_parser.add_argument("--gpu-runner", default="")
    sub.add_parser("table")
    sub.add_parser("costs")
    sub.add_parser("stale")
    args = parser.parse_args()
    if args.command == "run":
        sys.exit(run(args))
    if args.command == "merge":
        sys.exit(merge(args))
    if args.command == "plan":
        sys.exit(plan(args))
    if args.command == "table":
        print(table(load_records()))
    elif args.command == "costs":
        print(costs(load_records()))
    else:
        sys.exit(stale(args))


if __name__ == "__main__":
    main()
