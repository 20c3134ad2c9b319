"""How long ``check_operator`` takes on real operators, next to ``opcheck``.

``make bench-checker`` runs the course's checker (the ``operator_checker``
package installed in the site's environment from this checkout) on the corpus
of the field test: torchvision's six operators, the chunked cross-entropy
operator behind ``torch.nn.functional.linear_cross_entropy``, and
``torch.onnx.ops``' ``RotaryEmbedding`` and ``Attention``, one sample each on
the CPU. Each operator runs in a fresh process: a first full check warms the
compiler caches on disk, then it is timed three ways, with ``opcheck`` on the
same sample beside them:

* ``full``: ``check_operator(op, [sample])`` in the process;
* ``quick``: ``quick=True``, the fast checks on the sample as given (what
  ``python -m operator_checker --quick`` runs in a pre-commit hook);
* ``isolated first``: ``isolate=True``, the operator in a fresh child process
  that finds it by name, as the command runs it (the child imports torch and
  compiles for the first time: what a one-operator command pays);
* ``isolated``: the same call again, in the child the first one kept (what
  every further operator of a script pays).

Then a pytest session as a user's suite runs one: ``operator_tests`` for
torchvision's six operators, isolated (the default), the same samples, in a
fresh ``python -m pytest``. It reports the session's seconds beside the sum
of the six in-process full checks, and how many child processes the session
started (target: one, for operators with the same imports).

Prints a table and the medians, and writes ``_build/bench-checker.json``, with
the machine it ran on (``benchmarks.stamp``).
The targets on the 2-core build machine: a median full check of at most 6 s
per operator, a median quick check of at most 1 s, and a median isolation
overhead (isolated over full, both in a warm process) of at most 30%. The
first isolated call's overhead is reported beside it, with no target: it is
the price of a fresh interpreter.
"""

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import benchmarks

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

TARGETS = {"full": 6.0, "quick": 1.0, "overhead": 0.30}
# The operators of the pytest session: torchvision's, with the same imports.
SESSION = ["nms", "roi_align", "roi_pool", "ps_roi_align", "ps_roi_pool"]
SESSION.append("deform_conv2d")
CORPUS = [
    "nms",
    "roi_align",
    "roi_pool",
    "ps_roi_align",
    "ps_roi_pool",
    "deform_conv2d",
    "linear_cross_entropy",
    "onnx RotaryEmbedding",
    "onnx Attention",
]

# One sample per operator, made as the operator's own Python function makes it
# (the field test's samples): the module corpus.py of the measured processes.
CORPUS_MODULE = r"""
import importlib

import torch
from operator_checker import Sample


def case(name):
    # (operator, sample, imports) of the corpus' operator ``name``
    torch.manual_seed(0)
    imports = []
    if name in ("nms", "roi_align", "roi_pool", "ps_roi_align", "ps_roi_pool",
                "deform_conv2d"):
        import torchvision  # noqa: F401  (registers torch.ops.torchvision)

        imports = ["torchvision"]

        tv = torch.ops.torchvision
        rois = torch.tensor([[0, 0.0, 0, 4, 4], [0, 1, 1, 6, 5], [1, 2, 2, 7, 7]])
        if name == "nms":
            boxes = torch.tensor([[0.0, 0, 10, 10], [1, 1, 11, 11], [20, 20, 30, 30]])
            op, sample = tv.nms, Sample(boxes, torch.tensor([0.9, 0.8, 0.7]), 0.5)
        elif name in ("roi_align", "roi_pool"):
            images = torch.rand(2, 3, 8, 8)
            extra = (2,) * (name == "roi_align") + (False,) * (name == "roi_align")
            op, sample = getattr(tv, name), Sample(images, rois, 1.0, 2, 2, *extra)
        elif name in ("ps_roi_align", "ps_roi_pool"):
            images = torch.rand(2, 8, 8, 8)
            extra = (2,) * (name == "ps_roi_align")
            op, sample = getattr(tv, name), Sample(images, rois, 1.0, 2, 2, *extra)
        else:
            x, weight = torch.rand(1, 6, 5, 4), torch.randn(2, 3, 3, 2)
            offset, mask = torch.randn(1, 36, 2, 3), torch.rand(1, 18, 2, 3)
            op = tv.deform_conv2d
            sample = Sample(x, weight, offset, mask, torch.randn(2),
                            2, 1, 1, 0, 2, 1, 2, 3, True)
    elif name == "linear_cross_entropy":
        imports = ["torch.nn.modules.linear_cross_entropy"]
        importlib.import_module(imports[0])  # registers it

        op = torch.ops.torch_nn._linear_cross_entropy_batch_chunked_no_reduction
        x, w, t = torch.randn(5, 4), torch.randn(6, 4), torch.randint(0, 6, (5,))
        sample = Sample(x, w, t, None, None, -100, 2, "compact", torch.float32)
    else:
        imports = ["torch.onnx.ops"]
        importlib.import_module(imports[0])  # registers torch.ops.onnx

        if name == "onnx RotaryEmbedding":
            x = torch.randn(2, 4, 18)
            cos, sin = torch.randn(2, 4, 3), torch.randn(2, 4, 3)
            op = torch.ops.onnx.RotaryEmbedding
            sample = Sample(x, cos, sin, num_heads=3)
        else:
            q, k, v = (torch.randn(1, 2, 3, 4) for _ in range(3))
            op, sample = torch.ops.onnx.Attention, Sample(q, k, v)
    return op, sample, imports
"""

# One operator timed four ways, then opcheck. Runs in the measured process.
CASE = r"""
import json
import sys
import time

import torch
from corpus import case
from operator_checker import check_operator

name = sys.argv[1]
op, sample, imports = case(name)
check_operator(op, [sample], devices=["cpu"])  # warms the compiler caches
seconds, same = {}, True
for mode, options in (
    ("full", {}),
    ("quick", {"quick": True}),
    ("isolated first", {"isolate": True, "imports": imports}),
    ("isolated", {"isolate": True, "imports": imports}),
):
    start = time.perf_counter()
    report = check_operator(op, [sample], devices=["cpu"], **options)
    seconds[mode] = round(time.perf_counter() - start, 2)
    if mode == "full":
        full = report
    if mode.startswith("isolated"):
        same = same and [(r.check, r.variant, r.outcome) for r in report.rows] == [
            (r.check, r.variant, r.outcome) for r in full.rows
        ]
overload = op if hasattr(op, "_schema") else getattr(op, op.overloads()[0])
start = time.perf_counter()
torch.library.opcheck(overload, sample.args, sample.kwargs, raise_exception=False)
opcheck_seconds = time.perf_counter() - start
print(json.dumps({
    "operator": full.operator,
    "variants": full.variants,
    "seconds": seconds,
    "isolated_same_rows": same,
    "opcheck_seconds": round(opcheck_seconds, 2),
    "failed": sorted({row.check for row in full.failed}),
    "limitations": sorted({row.check for row in full.limitations}),
}))
"""


# The pytest session: one test file, and a plugin that counts the children.
SESSION_TESTS = r"""
from corpus import case
from operator_checker.pytest import operator_tests

for name in NAMES:
    op, sample, imports = case(name)
    globals()[f"test_{name}"] = operator_tests(
        op, [sample], imports=imports, devices=["cpu"]
    )
"""
SESSION_CONFTEST = r"""
import json
import time

from operator_checker import isolation

started, began = [], time.perf_counter()
Worker = isolation.Worker


class Counted(Worker):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        started.append(self.process.pid)


isolation.Worker = Counted


def pytest_sessionfinish(session, exitstatus):
    with open("session.json", "w") as file:
        json.dump({"children": len(started),
                   "seconds": round(time.perf_counter() - began, 2)}, file)
"""


def run_session(folder, names):
    """The seconds and the child processes of the pytest session."""
    tests = SESSION_TESTS.replace("NAMES", repr(names))
    (Path(folder) / "test_session.py").write_text(tests)
    (Path(folder) / "conftest.py").write_text(SESSION_CONFTEST)
    (Path(folder) / "pytest.ini").write_text("[pytest]\n")
    process = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "."],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=3600,
    )
    if process.returncode not in (0, 1):  # 1: nms's bug fails its test
        sys.exit(f"bench-checker: the pytest session failed:\n{process.stdout[-3000:]}")
    return json.loads((Path(folder) / "session.json").read_text())


def run_case(folder, name):
    """One operator's timings, from a fresh process."""
    process = subprocess.run(
        [sys.executable, "case.py", name],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    if process.returncode != 0:
        sys.exit(f"bench-checker: {name} failed:\n{process.stderr[-3000:]}")
    return json.loads(process.stdout.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", action="append", choices=CORPUS)
    options = parser.parse_args()
    results = []
    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / "case.py").write_text(CASE)
        (Path(folder) / "corpus.py").write_text(CORPUS_MODULE)
        for name in options.only or CORPUS:
            result = run_case(folder, name)
            result["name"] = name
            results.append(result)
            seconds = result["seconds"]
            overhead = seconds["isolated"] / seconds["full"] - 1
            first = seconds["isolated first"] / seconds["full"] - 1
            failed = ", ".join(result["failed"]) or "-"
            print(
                f"{name:<22} {result['variants']:>3} variants"
                f"  full {seconds['full']:5.1f} s  quick {seconds['quick']:4.2f} s"
                f"  isolated first {seconds['isolated first']:5.1f} s ({first:+.0%})"
                f"  isolated {seconds['isolated']:5.1f} s ({overhead:+.0%})"
                f"  opcheck {result['opcheck_seconds']:4.2f} s  failed: {failed}"
                + ("" if result["isolated_same_rows"] else "  ROWS DIFFER"),
                flush=True,
            )
        in_session = [r["name"] for r in results if r["name"] in SESSION]
        session = run_session(folder, in_session) if in_session else None
    if session:
        alone = sum(r["seconds"]["full"] for r in results if r["name"] in SESSION)
        session.update(operators=in_session, full_in_process=round(alone, 2))
        verdict = "met" if session["children"] <= 1 else "MISSED"
        print(
            f"pytest session of {len(in_session)} operators: "
            f"{session['seconds']:.1f} s against {alone:.1f} s of full checks in "
            f"process; {session['children']} child process (target 1: {verdict})"
        )
    medians = {
        mode: statistics.median(r["seconds"][mode] for r in results)
        for mode in ("full", "quick", "isolated first", "isolated")
    }
    for what, mode in (("first overhead", "isolated first"), ("overhead", "isolated")):
        medians[what] = statistics.median(
            r["seconds"][mode] / r["seconds"]["full"] - 1 for r in results
        )
    print(f"median first isolated call: {medians['first overhead']:+.0%} (no target)")
    for what, target in TARGETS.items():
        value = medians[what]
        shown = f"{value:+.0%}" if what == "overhead" else f"{value:.2f} s"
        wanted = f"{target:.0%}" if what == "overhead" else f"{target:g} s"
        verdict = "met" if value <= target else "MISSED"
        print(f"median {what}: {shown} (target {wanted}: {verdict})")
    differ = [r["name"] for r in results if not r["isolated_same_rows"]]
    if differ:
        print(f"isolated rows differ from the in-process ones: {', '.join(differ)}")
    out = REPO / "_build" / "bench-checker.json"
    out.parent.mkdir(exist_ok=True)
    summary = {
        **benchmarks.stamp(),
        "medians": medians,
        "targets": TARGETS,
        "pytest_session": session,
    }
    out.write_text(json.dumps({"operators": results, **summary}, indent=1) + "\n")
    print(f"wrote {out.relative_to(REPO)}")


if __name__ == "__main__":
    main()
