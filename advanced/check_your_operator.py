"""
Check Your Own Operator
=======================

Run every check of this course on your operator with one tool,
``operator_checker``: one call from Python, one command from the shell, or
one line in your pytest suite. Give it your operator and one sample of its
arguments; it derives the inputs a caller may really pass (other memory
layouts, empty tensors, other precisions, with and without gradients, every
device), runs each check on them, and reports what is a bug, what is a
limitation, and what it did not check. The page checks operators of its own,
one of which crashes the process, and two of torchvision's.

.. grid:: 2

    .. grid-item-card:: :octicon:`mortar-board;1em;` What you will learn
       :class-card: card-prerequisites

       * How to check an operator in one call, from the shell and from pytest
       * How to read a report: a bug, a limitation, and where the fix is taught
       * How to declare what you know, and what the checker finds in
         operators you did not write

    .. grid-item-card:: :octicon:`list-unordered;1em;` Prerequisites
       :class-card: card-prerequisites

       * PyTorch 2.7 or later
       * torchvision, NumPy, Matplotlib and pytest
       * :ref:`sphx_glr_tutorials_custom_op_troubleshooting.py`

.. admonition:: Checklist
   :class: checklist

   #. Install the checker: ``pip install`` `its wheel
      <../wheels/operator_checker-1.1.0-py3-none-any.whl>`_, or the folder
      ``operator_checker/`` of this course's repository. It needs only
      PyTorch.
   #. Give each operator one small sample of ordinary row-major tensors, or
      record samples from calls your code already makes with
      ``capture_samples`` and keep them with ``save_samples``.
   #. Call ``report = check_operator(op, samples)``, print the report, and
      assert ``report.passed``: no row failed. Or run
      ``python -m operator_checker`` in CI, or ``operator_tests`` in pytest.
   #. For each failed row, read the page and section its ``fix:`` line names.
   #. Declare what you know, each with a reason: ``nondifferentiable=``,
      ``indices=``, ``limitations=`` and ``skip=``.
"""

# %%
# Setting up
# ----------

import sys

import torch

if tuple(int(part) for part in torch.__version__.split(".")[:2]) < (2, 7):
    sys.exit(f"This page needs PyTorch 2.7 or later; this is {torch.__version__}.")
try:
    import operator_checker
except ModuleNotFoundError:
    sys.exit(
        "This page needs operator-checker: pip install the wheel its web page "
        "links, or ./operator_checker from the course's repository."
    )

import contextlib
import importlib.metadata
import json
import shlex
import shutil
import signal
import subprocess
import tempfile
import textwrap
import warnings
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pytest
import torchvision
from torch import Tensor

from operator_checker import (
    CHECKS,
    OUTCOMES,
    QUICK_CHECKS,
    ExitCode,
    capture_samples,
    check_operator,
    save_samples,
)

RELEASE = tuple(int(part) for part in torch.__version__.split(".")[:2])
torch.manual_seed(0)
devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
hardware = torch.cuda.get_device_name() if torch.cuda.is_available() else "no CUDA"
print(f"PyTorch {torch.__version__}; devices exercised: {devices} ({hardware})")
folder = Path(tempfile.mkdtemp(prefix="checkop-"))  # the files this page writes

# %%
# Installing the checker
# ----------------------
#
# The checker is a Python package of its own, ``operator-checker``, which
# depends on PyTorch alone. Install it into the environment your tests run
# in: ``pip install`` `the wheel this site serves
# <../wheels/operator_checker-1.1.0-py3-none-any.whl>`_, or, from a clone of
# this course's repository, ``pip install ./operator_checker``. It brings three
# ways in: the function ``check_operator``, the command
# ``python -m operator_checker``, and a pytest plugin, which pip registers
# with the installation:

plugins = {entry.name for entry in importlib.metadata.entry_points(group="pytest11")}
installed = importlib.metadata.version("operator-checker")
registered = "operator_checker" in plugins
# What it needs to run; its own tests need more (the extra "test").
requires = [
    requirement
    for requirement in importlib.metadata.requires("operator-checker")
    if "extra ==" not in requirement
]
print(f"operator-checker {installed}, requires {requires}")
print(f"pytest plugin registered: {registered}")
assert installed == operator_checker.__version__ and registered
assert [requirement.split(">")[0] for requirement in requires] == ["torch"]

# %%
# One call
# --------
#
# The operator to check is SiLU, ``x * sigmoid(x)``, computed by NumPy so
# that PyTorch cannot see inside it, with a fake kernel and a backward made of
# PyTorch operations, as :ref:`sphx_glr_tutorials_python_custom_ops.py`
# teaches.


def numpy_silu(x):
    array = x.numpy(force=True)
    return torch.from_numpy(array / (1 + np.exp(-array))).to(x.device)


def save_input(ctx, inputs, output):
    ctx.save_for_backward(inputs[0])


def silu_backward(ctx, grad):
    (x,) = ctx.saved_tensors
    sigmoid = torch.sigmoid(x)
    return grad * sigmoid * (1 + x * (1 - sigmoid))


@torch.library.custom_op("checkop::silu", mutates_args=())
def silu(x: Tensor) -> Tensor:
    return numpy_silu(x)


silu.register_fake(lambda x: torch.empty_like(x))
silu.register_autograd(silu_backward, setup_context=save_input)

matrix = torch.randn(3, 4)
torch.testing.assert_close(silu(matrix), torch.nn.functional.silu(matrix))

# %%
# One sample, a matrix, is all the checker needs. The call is the one to put
# in a test:

report = check_operator(silu, [(matrix,)])
print(report)
assert report.passed

# %%
# Reading a report
# ----------------
#
# The first line names the operator, counts the variants the checker made of
# the sample, and gives the verdict. Then come the checks, each with the
# variants it ran on, grouped by outcome and cause. Every row has one of five
# outcomes:
#
# * **failed**: a bug, with a ``fix:`` line naming the page and section of
#   this course that teaches the fix;
# * **limitation**: true and by design (no backward, no double backward, an
#   argument that gets no gradient), with a ``remedy:`` line where the course
#   has one;
# * **not applicable**: a variant the kernel refuses, or a check that means
#   nothing for this operator, with the reason;
# * **skipped**: what you left out or declared, with your reason;
# * **passed**.
#
# ``report.passed`` means that no row failed: limitations do not fail. A
# report with failures lists them first, the most telling first: on the
# sample as given, then on its other layouts, then on the inputs derived from
# it with other values or sizes. Here
# NumPy has no bfloat16, so the kernel refuses that variant, and
# ``register_autograd`` gives reverse mode only, so forward-mode AD
# (``torch.func.jvp``) gets zero tangents: a limitation, whose remedy is an
# ``autograd.Function`` with a ``jvp``.

assert OUTCOMES == ("failed", "limitation", "not applicable", "skipped", "passed")
refused = [row for row in report.rows if row.outcome == "not applicable"]
assert refused and all("bfloat16" in row.variant for row in refused)
assert {row.check for row in report.limitations} == {"forward-ad"}
assert "zero tangents" in report.limitations[0].detail

# %%
# A failure looks like this. The backward of ``silu_forgets_a_term`` drops a
# term of the derivative, a mistake that no test of shapes can see.
# ``only=`` narrows the run to the check that matters here:


def backward_without_a_term(ctx, grad):
    (x,) = ctx.saved_tensors
    return grad * torch.sigmoid(x)


@torch.library.custom_op("checkop::silu_forgets_a_term", mutates_args=())
def silu_forgets_a_term(x: Tensor) -> Tensor:
    return numpy_silu(x)


silu_forgets_a_term.register_fake(lambda x: torch.empty_like(x))
silu_forgets_a_term.register_autograd(backward_without_a_term, setup_context=save_input)


def show(row):
    """Print a row of a report, or of its JSON file, in a few short lines."""
    row = row if isinstance(row, dict) else vars(row)
    print(f"{row['check']}, {row['outcome']}, {row['variant']}:")
    if row["detail"]:
        print(textwrap.indent(textwrap.fill(row["detail"], 75), "    "))


wrong = check_operator(
    silu_forgets_a_term, [(matrix,)], devices=["cpu"], only=["gradcheck"]
)
for row in wrong.rows:
    if row.outcome != "skipped":
        show(row)
(failure,) = wrong.failed
print(f"fix: {failure.see}")
skipped = [row for row in wrong.rows if row.outcome == "skipped"]
why = skipped[0].detail.split(": ")[-1]
print(textwrap.fill(f"skipped ({why}): {', '.join(r.check for r in skipped)}", 79))
assert all(row.detail.endswith(why) for row in skipped)
assert [row.variant for row in wrong.rows if row.check == "gradcheck"] == [
    failure.variant
]
assert failure.check == "gradcheck" and "float64 grad" in failure.variant
assert str(wrong).splitlines()[1].startswith("  gradcheck: failed")  # failures first
assert failure.see.startswith("Custom Python Operators > gradcheck catches it")
seen = {row.outcome for r in (report, wrong) for row in r.rows}
assert seen == set(OUTCOMES), seen

# %%
# ``gradcheck`` ran on one variant, the float64 copy with gradients, where
# finite differences are precise. The ``fix:`` line leads to the section
# of :ref:`sphx_glr_tutorials_python_custom_ops.py` where ``gradcheck``
# catches a backward that disagrees with its forward. The checks left out
# are ``skipped`` rows, not silent gaps.
#
# Each check is taught on a page of this course:
#
# .. list-table::
#    :header-rows: 1
#    :widths: 45 55
#
#    * - check
#      - taught in
#    * - ``eager``, ``layout``: the kernel on other layouts
#      - :ref:`sphx_glr_tutorials_strides_and_runtime.py`
#    * - ``opcheck``'s ``test_schema``, ``test_autograd_registration``,
#        ``test_faketensor``, ``test_aot_dispatch_dynamic``
#      - :ref:`sphx_glr_tutorials_custom_op_troubleshooting.py`,
#        :ref:`sphx_glr_tutorials_mutable_custom_ops.py`
#    * - ``gradients``, ``gradcheck``, ``gradgradcheck``
#      - :ref:`sphx_glr_tutorials_python_custom_ops.py`
#    * - ``forward-ad``
#      - :ref:`sphx_glr_tutorials_custom_op_transforms.py`
#    * - ``vmap``
#      - :ref:`sphx_glr_tutorials_custom_op_registrations.py`
#    * - ``compiled``, ``compiled-dynamic``, ``recompiles``
#      - :ref:`sphx_glr_tutorials_fake_kernels_and_shapes.py`
#    * - ``export-load``, ``export-decomposed``
#      - :ref:`sphx_glr_tutorials_custom_ops_in_export.py`

TAUGHT_IN = {  # the table's rows: a page of the course, and its checks
    "strides_and_runtime": ["eager", "layout"],
    "custom_op_troubleshooting": [
        "test_schema",
        "test_autograd_registration",
        "test_faketensor",
        "test_aot_dispatch_dynamic",
    ],
    "python_custom_ops": ["gradients", "gradcheck", "gradgradcheck"],
    "custom_op_transforms": ["forward-ad"],
    "custom_op_registrations": ["vmap"],
    "fake_kernels_and_shapes": ["compiled", "compiled-dynamic", "recompiles"],
    "custom_ops_in_export": ["export-load", "export-decomposed"],
}
assert sorted(sum(TAUGHT_IN.values(), [])) == sorted(CHECKS)

# %%
# Where the time goes
# -------------------
#
# The report also keeps the seconds each check took. The figure compares the
# full run above with ``quick=True``, which runs the fast checks
# (``opcheck``'s four tests and ``vmap``) on the sample as given: a run for a
# pre-commit hook, with the full one in CI.

quick = check_operator(silu, [(matrix,)], quick=True)
passed_quickly = {row.check for row in quick.rows if row.outcome == "passed"}
assert quick.passed and passed_quickly == set(QUICK_CHECKS)
groups = {
    "opcheck's four tests": ["opcheck"],
    "compiling": ["compiled", "compiled-dynamic", "recompiles"],
    "exporting": ["export-load", "export-decomposed"],
    "everything else": None,
}


def seconds_by_group(run):
    spent = dict(run.seconds)
    found = {}
    for name, checks in groups.items():
        chosen = checks if checks is not None else list(spent)
        found[name] = sum(spent.pop(check, 0.0) for check in chosen)
    return found


runs = {"full run": seconds_by_group(report), "quick=True": seconds_by_group(quick)}
fig, ax = plt.subplots(figsize=(8, 2.6), layout="constrained")
colours = ["#4c72b0", "#dd8452", "#c44e52", "#a0a0a0"]
for row, spent in enumerate(runs.values()):
    left = 0.0
    for (name, value), colour in zip(spent.items(), colours, strict=True):
        ax.barh(row, value, left=left, color=colour, label=name if row == 0 else None)
        left += value
    ax.text(left, row, f" {left:.2f} s", va="center")
ax.set_yticks(range(len(runs)), list(runs))
ax.margins(x=0.12)
ax.invert_yaxis()
ax.set_xlabel("seconds")
ax.set_title(
    f"check_operator on checkop::silu, PyTorch {torch.__version__.split('+')[0]}"
)
fig.legend(loc="outside lower center", ncols=4, frameon=False)
plt.show()

full = runs["full run"]
assert full["compiling"] + full["exporting"] > sum(full.values()) / 2
assert sum(runs["quick=True"].values()) < sum(full.values()) / 5

# %%
# Compiling and exporting took most of the full run. The quick run took a
# small part of it and still ran ``opcheck``'s four tests, which see most
# mistakes in schemas, fake kernels and autograd registrations.
#
# Samples from your own calls
# ---------------------------
#
# A sample written by hand suits an operator you wrote. For one that your
# code calls through a Python function, record what that function really
# passes: ``capture_samples`` sees every call made from Python to the
# operators you name, and keeps a copy of the arguments. Here it records the
# calls of two of torchvision's C++ operators made by torchvision's own
# functions, which turn a list of boxes per image into the five-column regions
# (image index, then four coordinates) that ``roi_align`` takes.
# ``save_samples`` writes them to a file for the command and for tests.

boxes = torch.tensor([[0.0, 0, 10, 10], [1, 1, 11, 11], [20, 20, 30, 30], [0, 0, 5, 5]])
scores = torch.tensor([0.9, 0.8, 0.7, 0.6])
images = torch.rand(2, 3, 8, 8)
boxes_per_image = [
    torch.tensor([[0.0, 0, 4, 4], [1, 1, 6, 5]]),
    torch.tensor([[2.0, 2, 7, 7]]),
]
nms_op, roi_align_op = torch.ops.torchvision.nms, torch.ops.torchvision.roi_align
with capture_samples(nms_op, roi_align_op) as recorded:
    torchvision.ops.nms(boxes, scores, iou_threshold=0.5)
    torchvision.ops.roi_align(images, boxes_per_image, output_size=2)
print(f"torchvision {torchvision.__version__}")
for op, op_samples in recorded.items():
    print(f"{op}: {op_samples}")
save_samples(folder / "torchvision_samples.pt", recorded)
assert [len(found) for found in recorded.values()] == [1, 1]

# %%
# The command
# -----------
#
# ``python -m operator_checker`` takes operators by name, the module that
# registers them (``--import``) and a samples file. It checks each operator
# in a child process, prints the report and writes it as JSON with
# ``--json``. Its exit status has one meaning each: 0 when no row failed, 1
# when one did, 2 when it could not run (a bad target, option or sample), 3
# when the checker itself failed, 5 when nothing was checked and 130 when
# Ctrl-C stopped it, after writing what finished: a CI job needs nothing
# else. The function below runs it as a shell would, in the folder that
# holds the samples, and prints the first and last lines of what it prints.


def checker_command(*arguments):
    command = [sys.executable, "-m", "operator_checker", *arguments]
    done = subprocess.run(command, cwd=folder, capture_output=True, text=True)
    lines = (done.stdout + done.stderr).splitlines()
    print(f"$ python -m operator_checker {shlex.join(arguments)}")
    print("\n  ...\n".join([lines[0], lines[-1]] if len(lines) > 1 else lines))
    print(f"exit status {done.returncode}")
    return done.returncode


# %%
# ``nms`` keeps the boxes that do not overlap a better-scoring box too much.
# ``--only`` narrows the run to ``torch.compile``, where its finding is:

status = checker_command(
    "torchvision::nms",
    "--import=torchvision",
    "--samples=torchvision_samples.pt",
    "--device=cpu",
    "--only=compiled",
    "--json=nms.json",
)
assert status == 1

# %%
# Rows failed. The JSON file holds every row, with its fix; the failed ones:

nms_json = json.loads((folder / "nms.json").read_text())
nms_failed = [row for row in nms_json["rows"] if row["outcome"] == "failed"]
for row in nms_failed:
    show(row)
print(textwrap.fill(f"fix: {nms_failed[0]['fix']}", 79))
assert nms_json["operators"][0]["passed"] is False
assert {row["check"] for row in nms_failed} == {"compiled"}
assert all("u0 >= 2" in row["detail"] for row in nms_failed)
assert {row["variant"].split()[1] for row in nms_failed} == {
    "empty(dets,scores)",
    "expanded",
}
assert nms_failed[0]["fix"].startswith("Sharp Edges")

# %%
# Every failure is on a variant where ``nms`` keeps fewer than two boxes: no
# boxes at all, or every box the same box. The last section shows the bug
# outside the checker.
#
# ``roi_align`` pools each region of an image into a small grid. This run
# covers the gradient checks:

status = checker_command(
    "torchvision::roi_align",
    "--import=torchvision",
    "--samples=torchvision_samples.pt",
    "--device=cpu",
    "--only=gradcheck",
    "--only=gradgradcheck",
    "--only=forward-ad",
    "--json=roi_align.json",
)
roi_json = json.loads((folder / "roi_align.json").read_text())
roi_limits = [row for row in roi_json["rows"] if row["outcome"] == "limitation"]
for row in roi_limits:
    show(row)
assert status == 0
assert {row["check"] for row in roi_limits} == {
    "gradients",
    "gradgradcheck",
    "forward-ad",
}

# %%
# Exit status 0, and three limitations that a model training through
# ``roi_align`` must know: the boxes (``rois``) get no gradient, and there is
# neither a double backward nor forward-mode AD.
#
# Exit status 2 says that the checker could not run, in one line, and 5
# that it ran but checked nothing, here because every variant is on the CPU,
# which ``--skip`` leaves out:

status = checker_command("torchvision::nms", "--samples=no_such_file.pt")
assert status == 2
status = checker_command(
    "torchvision::nms",
    "--import=torchvision",
    "--samples=torchvision_samples.pt",
    "--device=cpu",
    "--skip=cpu",
    "--quick",
)
assert status == 5
codes = {code.name: int(code) for code in ExitCode}  # the command's statuses
print(codes)
assert codes == {"OK": 0, "ROWS_FAILED": 1, "CANNOT_RUN": 2, "INTERNAL_ERROR": 3,
                 "NOTHING_CHECKED": 5, "INTERRUPTED": 130}  # fmt: skip

# %%
# Declaring what you know
# -----------------------
#
# Once you know a limitation, declare it in the call, with the reason, as you
# would mark a test ``xfail``: the report then shows your reason.
# ``nondifferentiable=`` names arguments that should never get a gradient,
# ``limitations=`` checks whose limitation is by design, and ``skip=``
# checks, layouts, dtypes or devices you do not want checked. A name the
# checker does not know raises ``ValueError`` rather than doing nothing.

reasons = {
    "nondifferentiable": {"rois": "column 0 holds image indices; boxes are data"},
    "limitations": {
        "gradgradcheck": "torchvision has no double backward",
        "forward-ad": "we train with backward only",
    },
    "skip": {"float16": "our model runs in float32"},
}
declared = check_operator(
    roi_align_op,
    recorded[roi_align_op],
    devices=["cpu"],
    only=["gradcheck", "gradgradcheck", "forward-ad"],
    **reasons,
)
said = [reason for group in reasons.values() for reason in group.values()]
for row in declared.rows:
    if any(reason in row.detail for reason in said):
        show(row)
assert declared.passed
assert all(any(r in row.detail for row in declared.rows) for r in said)
try:
    check_operator(roi_align_op, recorded[roi_align_op], skip={"bf16": "typo"})
except ValueError as error:
    print(f"ValueError: {str(error)[:70]}...")
else:
    raise AssertionError("a misspelt skip= was accepted")

# %%
# Arguments that hold indices
# ---------------------------
#
# Many operators take integer tensors that describe their other arguments:
# offsets that rise from 0 to the number of rows, lengths that add up to it,
# indices below it. A kernel that trusts them, as most CPU kernels do, reads
# out of bounds when they no longer fit. So the checker never changes the
# values of an integer tensor, and derives no input of another size while a
# sample holds one: it cannot tell which sizes the tensor describes, and
# says so in a ``not applicable`` row. ``segment_sums`` adds up the rows of
# each segment that ``offsets`` delimits:


@torch.library.custom_op("checkop::segment_sums", mutates_args=())
def segment_sums(values: Tensor, offsets: Tensor) -> Tensor:
    return torch.segment_reduce(values, "sum", offsets=offsets, axis=0)


@segment_sums.register_fake
def _(values, offsets):
    return values.new_empty(offsets.shape[0] - 1, *values.shape[1:])


def keep_offsets(ctx, inputs, output):
    ctx.save_for_backward(inputs[1])


def segment_sums_backward(ctx, grad):
    (offsets,) = ctx.saved_tensors
    return grad.repeat_interleave(offsets.diff(), dim=0), None


segment_sums.register_autograd(segment_sums_backward, setup_context=keep_offsets)

rows, offsets = torch.randn(6, 3), torch.tensor([0, 2, 2, 5, 6])
indexed = check_operator(
    segment_sums,
    [(rows, offsets)],
    devices=["cpu"],
    only=["test_faketensor", "gradcheck", "recompiles"],
)
for row in indexed.rows:
    if row.outcome == "not applicable":
        show(row)
assert indexed.passed
said = [row.detail for row in indexed.rows if row.outcome == "not applicable"]
assert len(said) == 2 and all("offsets holds indices" in detail for detail in said)
assert {row.outcome for row in indexed.rows if row.check == "gradcheck"} == {"passed"}

# %%
# The offsets kept their values in every variant, and the gradient was
# checked. To check empty or larger inputs, pass such samples yourself. An
# integer tensor that holds plain data (an ``int8`` matrix, say) is declared
# with ``indices=``, which names the arguments that do hold indices: a float
# tensor of box indices, or none (``indices={}``).
#
# A crash is a failed row
# -----------------------
#
# A kernel in C or C++ can take the whole process down, and a test run with
# it, before anything is reported. The operator below stands for such a
# kernel: written for row-major memory, it reads address 0 when given any
# other layout, as C code with a wrong pointer would. That read kills the
# process that makes it:

reads_address_0 = [sys.executable, "-c", "import ctypes; ctypes.string_at(0)"]
died = subprocess.run(reads_address_0, capture_output=True)
print(f"exit status {died.returncode}: {signal.Signals(-died.returncode).name}")
assert died.returncode == -signal.SIGSEGV

# %%
# The command runs each operator in a child process, so a crash becomes a
# failed row that names the signal and the variant, and the remaining checks
# go on in a fresh child. The operator lives in a module file, because the
# child must import it. Its sample is one row of six values, for which the
# strided variant (every other element of a wider buffer) is the one
# non-contiguous layout.

KERNELS = """
import ctypes

import numpy as np
import torch


@torch.library.custom_op("checkop::row_major_silu", mutates_args=())
def row_major_silu(x: torch.Tensor) -> torch.Tensor:
    if not x.is_contiguous():
        ctypes.string_at(0)  # a read of address 0: the process dies of SIGSEGV
    array = x.numpy(force=True)
    return torch.from_numpy(array / (1 + np.exp(-array)))


row_major_silu.register_fake(lambda x: torch.empty_like(x))
"""
(folder / "checkop_kernels.py").write_text(KERNELS)
one_row = torch.randn(1, 6)
save_samples(folder / "row_major_silu.pt", {"checkop::row_major_silu": [(one_row,)]})
status = checker_command(
    "checkop::row_major_silu",
    "--import=checkop_kernels.py",
    "--samples=row_major_silu.pt",
    "--device=cpu",
    "--only=layout",
    "--json=row_major_silu.json",
)
crash_rows = json.loads((folder / "row_major_silu.json").read_text())["rows"]
for row in crash_rows:
    if row["outcome"] in ("failed", "passed"):
        show(row)
(crash,) = [row for row in crash_rows if row["outcome"] == "failed"]
assert status == 1
assert crash["detail"].startswith("crashed the process: SIGSEGV on #0 strided")
assert any(r["check"] == "layout" and r["outcome"] == "passed" for r in crash_rows)

# %%
# One failed row: the strided variant crashed the process with ``SIGSEGV``,
# and Python's fault handler named the line of the kernel. The ``layout``
# check still ran on the other layouts, in a fresh child, and passed.
#
# In CI
# -----
#
# A project names its operators once, in ``pyproject.toml``, and runs the
# command bare, as it runs ruff or pytest. On GitHub Actions,
# ``--output-format github`` turns each failure into an annotation at the
# line that defines the operator, and ``--markdown "$GITHUB_STEP_SUMMARY"``
# writes a summary on the job's page. The package's README gives the
# workflow step and a pre-commit hook that runs ``--quick``.

(folder / "pyproject.toml").write_text(
    textwrap.dedent(
        """
        [tool.operator_checker]
        targets = ["checkop::row_major_silu"]
        imports = ["checkop_kernels.py"]
        samples = "row_major_silu.pt"
        devices = ["cpu"]
        only = ["layout"]
        """
    )
)
done = subprocess.run(
    [sys.executable, "-m", "operator_checker", "--output-format=github"],
    cwd=folder,
    capture_output=True,
    text=True,
)
print(textwrap.fill(done.stdout, 79))
(annotation,) = done.stdout.splitlines()
assert done.returncode == 1
assert annotation.startswith("::error file=checkop_kernels.py,line=")
line = int(annotation.split("line=")[1].split(",")[0])
assert KERNELS.splitlines()[line - 1].startswith("@torch.library.custom_op")

# %%
# In your test suite
# ------------------
#
# ``operator_checker.pytest.operator_tests`` turns an operator into tests,
# one per check: assign what it returns to a name pytest collects. A failed
# row fails its check's test with the variant, the cause and the fix;
# limitations pass, and pytest lists them at the end of its run; a check that
# did not run is skipped with its reason. The file below tests the two
# torchvision operators from the samples file, with ``roi_align``'s known
# limitations declared beside it. The options are ``check_operator``'s;
# ``isolate=False`` checks in pytest's own process, which starts faster, for
# operators you trust not to crash.

TEST_FILE = """
from operator_checker.pytest import operator_tests

recorded = dict(
    samples="torchvision_samples.pt",
    imports=["torchvision"],
    devices=["cpu"],
    isolate=False,
)
test_nms = operator_tests("torchvision::nms", only=["export-load"], **recorded)
test_roi_align = operator_tests(
    "torchvision::roi_align",
    only=["gradcheck", "gradgradcheck", "forward-ad"],
    nondifferentiable={"rois": "column 0 holds image indices; boxes are data"},
    limitations={"gradgradcheck": "torchvision has no double backward"},
    **recorded,
)
"""

# %%
# The cell runs pytest on it in this process, from the folder that holds it
# and an empty ``pytest.ini``, which keeps other projects' settings out. A
# small plugin keeps each test's outcome and the limitations it recorded.


class Outcomes:
    """A pytest plugin that keeps each test's outcome, message and properties."""

    def __init__(self):
        self.of, self.said, self.properties = {}, {}, {}

    def pytest_runtest_logreport(self, report):
        if report.when == "call" or report.outcome != "passed":
            test = report.nodeid.split("::")[-1]
            self.of[test] = report.outcome
            self.said[test] = str(report.longrepr)
            self.properties[test] = dict(report.user_properties)


(folder / "pytest.ini").write_text("[pytest]\n")
(folder / "test_operators.py").write_text(TEST_FILE)
outcomes = Outcomes()
arguments = ["-q", "-p", "no:cacheprovider", "test_operators.py"]
# This process imported operator_checker before pytest could rewrite its asserts.
arguments += ["-W", "ignore::pytest.PytestAssertRewriteWarning"]
with contextlib.chdir(folder):
    exit_code = pytest.main(arguments, plugins=[outcomes])
failed = {test for test, outcome in outcomes.of.items() if outcome == "failed"}
assert exit_code == pytest.ExitCode.TESTS_FAILED
assert failed == {"test_nms[export-load]"}, outcomes.of
assert "u0 >= 2" in outcomes.said["test_nms[export-load]"]
assert "fix: Sharp Edges" in outcomes.said["test_nms[export-load]"]
assert outcomes.of["test_roi_align[gradgradcheck]"] == "passed"
assert outcomes.of["test_roi_align[compiled]"] == "skipped"
assert "only=" in outcomes.said["test_roi_align[compiled]"]
recorded_limits = outcomes.properties["test_roi_align[gradgradcheck]"]
assert any("torchvision has no double backward" in v for v in recorded_limits.values())

# %%
# ``nms``'s export test failed on ``u0 >= 2``, with the fix. ``roi_align``'s
# tests passed, and the summary lists its limitations, declared or found.
# The checks that ``only=`` left out are skipped tests, with that reason.
#
# What the checker finds in torchvision
# -------------------------------------
#
# ``nms``'s failure is a bug. It returns as many indices as it keeps boxes,
# a size that depends on the data, and its fake kernel asks for that size
# with ``ctx.create_unbacked_symint()``, which assumes at least two. A
# compiled or exported ``nms`` that keeps fewer stops with ``u0 >= 2``, and
# one box is enough. On one box, ``opcheck`` passes every test, with no more
# than a deprecation warning, while compiling fails. The fix,
# ``ctx.new_dynamic_size()``, is compared with it in
# :ref:`sphx_glr_tutorials_fake_kernels_and_shapes.py`;
# :ref:`edge-unbacked-minimum-two` follows the edge release by release.

one_box = (torch.tensor([[0.0, 0, 10, 10]]), torch.tensor([0.9]), 0.5)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    results = torch.library.opcheck(nms_op, one_box, raise_exception=False)
print(f"opcheck on one box: {set(results.values())}")
assert set(results.values()) == {"SUCCESS"}
deprecated = [str(w.message) for w in caught if "create_unbacked" in str(w.message)]
print(f"and a warning: {deprecated[0]}")
# Dynamo's setting for data-dependent sizes, needed up to 2.9 (see below),
# is in a private module.
setting = {"capture_dynamic_output_shape_ops": RELEASE < (2, 10)}
try:
    with torch._dynamo.config.patch(**setting), warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # the warning above
        torch.compile(torchvision.ops.nms, fullgraph=True)(*one_box)
except RuntimeError as error:
    print(f"compiled nms on one box: {str(error).splitlines()[0][:60]}")
    assert "u0 >= 2" in str(error)
else:
    raise AssertionError("compiled nms kept one box: torchvision fixed its fake kernel")

# %%
# ``roi_align``'s findings are limitations, and the first is easy to miss
# in training: the backward returns ``None`` for the boxes, so a model that
# learns its boxes through ``roi_align`` learns nothing from it, and no error
# says so:

rois = torch.cat([torch.tensor([[0.0], [0.0], [1.0]]), torch.cat(boxes_per_image)], 1)
rois.requires_grad_()
images_grad = images.clone().requires_grad_()
roi_align_op(images_grad, rois, 1.0, 2, 2, 0, False).sum().backward()
print(f"gradient of the boxes: {rois.grad}; of the images: {images_grad.grad.shape}")
assert rois.grad is None and images_grad.grad is not None

# %%
# Up to PyTorch 2.9
# ~~~~~~~~~~~~~~~~~
#
# Up to PyTorch 2.9, ``torch.compile`` with ``fullgraph=True`` refuses an
# operator whose output size depends on the data unless Dynamo's
# ``capture_dynamic_output_shape_ops`` is on. The checker reports that as a
# limitation of ``compiled`` on those releases, turns the setting on and
# checks the rest; from 2.10 Dynamo captures ``nms`` as it is.

needs_setting = [
    row
    for row in nms_json["rows"]
    if row["check"] == "compiled" and row["outcome"] == "limitation"
]
print(f"PyTorch {torch.__version__}: nms needs the setting: {bool(needs_setting)}")
assert bool(needs_setting) == (RELEASE < (2, 10))
shutil.rmtree(folder)  # the files this page wrote

# %%
# Conclusion
# ----------
#
# One call, one command or one line of pytest runs every check of this course
# on the inputs a caller may really pass. The report tells a bug from a
# limitation, names the section that teaches each fix, lists what it did not
# check, and survives a kernel that crashes. In torchvision it found one
# bug, which ``opcheck`` misses even on one box, and three limitations that a
# model training through ``roi_align`` must know.
#
# The checks themselves are taught in the pages the table above names. The
# next page, :ref:`sphx_glr_tutorials_cpp_custom_ops.py`, moves the kernel to
# C++: check it with ``python -m operator_checker`` and ``--import`` of the
# library that registers it.
