"""How long ``check_operator`` takes on real operators, next to ``opcheck``.

``make bench-checker`` runs the checker of ``advanced/check_your_operator.py``
(the module the build publishes, made from the page's current source) on the
corpus of the field test: torchvision's six operators, the chunked
cross-entropy operator behind ``torch.nn.functional.linear_cross_entropy``,
and ``torch.onnx.ops``' ``RotaryEmbedding`` and ``Attention``, one sample each
on the CPU. Each operator runs in a fresh process twice: the first run warms
the compiler caches on disk, the second is timed, with ``opcheck`` on the same
sample beside it. Prints a table and the median, and writes
``_build/bench-checker.json``. The target: a median of at most 10 s per
operator on the 2-core build machine.
"""

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from conf import page_modules  # noqa: E402
from pagelib import page_module  # noqa: E402

TARGET_SECONDS = 10.0
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
# (the field test's samples). Runs in the measured process.
CASE = r"""
import json
import sys
import time

import torch
from operator_checker import Sample, check_operator

name = sys.argv[1]
torch.manual_seed(0)
if name in ("nms", "roi_align", "roi_pool", "ps_roi_align", "ps_roi_pool",
            "deform_conv2d"):
    import torchvision  # noqa: F401  (registers torch.ops.torchvision)

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
        sample = Sample(x, weight, offset, mask, torch.randn(2), 2, 1, 1, 0, 2, 1, 2, 3,
                        True)
elif name == "linear_cross_entropy":
    import torch.nn.modules.linear_cross_entropy  # noqa: F401  (registers it)

    op = torch.ops.torch_nn._linear_cross_entropy_batch_chunked_no_reduction
    x, w, t = torch.randn(5, 4), torch.randn(6, 4), torch.randint(0, 6, (5,))
    sample = Sample(x, w, t, None, None, -100, 2, "compact", torch.float32)
else:
    import torch.onnx.ops  # noqa: F401  (registers torch.ops.onnx)

    if name == "onnx RotaryEmbedding":
        x, cos, sin = torch.randn(2, 4, 18), torch.randn(2, 4, 3), torch.randn(2, 4, 3)
        op, sample = torch.ops.onnx.RotaryEmbedding, Sample(x, cos, sin, num_heads=3)
    else:
        q, k, v = (torch.randn(1, 2, 3, 4) for _ in range(3))
        op, sample = torch.ops.onnx.Attention, Sample(q, k, v)

start = time.perf_counter()
report = check_operator(op, [sample], devices=["cpu"])
seconds = time.perf_counter() - start
overload = op if hasattr(op, "_schema") else getattr(op, op.overloads()[0])
start = time.perf_counter()
torch.library.opcheck(overload, sample.args, sample.kwargs, raise_exception=False)
opcheck_seconds = time.perf_counter() - start
print(json.dumps({
    "operator": report.operator,
    "variants": report.variants,
    "seconds": round(seconds, 2),
    "opcheck_seconds": round(opcheck_seconds, 2),
    "failed": sorted({row.check for row in report.failed}),
    "limitations": sorted({row.check for row in report.limitations}),
}))
"""


def run_case(folder, name):
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
    page = REPO / "advanced" / "check_your_operator.py"
    section = page_modules[page.name]["section"]
    results = []
    with tempfile.TemporaryDirectory() as folder:
        module = page_module.module_body(page.read_text(), section)
        (Path(folder) / "operator_checker.py").write_text(module)
        (Path(folder) / "case.py").write_text(CASE)
        for name in options.only or CORPUS:
            started = time.perf_counter()
            run_case(folder, name)  # warms the compiler caches on disk
            result = run_case(folder, name)
            result["name"] = name
            result["warm_up_seconds"] = round(time.perf_counter() - started, 1)
            results.append(result)
            seconds, opcheck = result["seconds"], result["opcheck_seconds"]
            failed = ", ".join(result["failed"]) or "-"
            print(
                f"{name:<22} {result['variants']:>3} variants {seconds:6.1f} s"
                f"   opcheck {opcheck:5.2f} s   failed: {failed}",
                flush=True,
            )
    median = statistics.median(r["seconds"] for r in results)
    verdict = "met" if median <= TARGET_SECONDS else "MISSED"
    print(
        f"median {median:.1f} s per operator (target {TARGET_SECONDS:.0f} s: {verdict})"
    )
    out = REPO / "_build" / "bench-checker.json"
    out.parent.mkdir(exist_ok=True)
    summary = {"median_seconds": median, "target_seconds": TARGET_SECONDS}
    out.write_text(json.dumps({"operators": results, **summary}, indent=1) + "\n")
    print(f"wrote {out.relative_to(REPO)}")


if __name__ == "__main__":
    main()
