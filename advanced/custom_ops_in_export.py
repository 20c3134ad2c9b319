"""
Custom Operators in torch.export
================================

After this page you will be able to export a model that calls custom
operators with ``torch.export``, find those operators in the exported graph,
make the export accept any batch size, and save the result to a ``.pt2`` file
that another Python process can load and run, provided that process registers
the same operators first. When a model's operators still lack fake kernels,
you will be able to find them all at once with ``torch.export.draft_export``
and judge the fake kernels it generates.

.. grid:: 2

    .. grid-item-card:: :octicon:`mortar-board;1em;` What you will learn
       :class-card: card-prerequisites

       * Why ``torch.export`` needs a fake kernel for every custom operator
       * What ``draft_export`` reports for operators without a fake kernel,
         and the limits of the fake kernels it generates
       * How a custom operator appears in an exported graph
       * How to export with a dynamic batch size using ``torch.export.Dim``
       * How to save an exported program and load it in a fresh process

    .. grid-item-card:: :octicon:`list-unordered;1em;` Prerequisites
       :class-card: card-prerequisites

       * PyTorch 2.7 or later
       * NumPy and Matplotlib
       * :ref:`sphx_glr_tutorials_python_custom_ops.py`
       * :ref:`sphx_glr_tutorials_fake_kernels_and_shapes.py`

.. admonition:: Checklist
   :class: checklist

   #. Give every custom operator a fake kernel, with the same argument checks
      as the real kernel, before exporting. To list the operators that lack
      one, run ``torch.export.draft_export`` (PyTorch 2.8 and later); the
      fake kernels it can generate know only ranks and dtypes, so write the
      real ones before relying on the export.
   #. Export with ``torch.export.export(model, args)``; pass ``strict=``
      explicitly if your code must behave the same on every release (the
      default changed in PyTorch 2.8).
   #. Look for each custom operator as one ``call_function`` node whose target
      is ``torch.ops.<namespace>.<name>.default``.
   #. For a dynamic batch, pass ``dynamic_shapes`` built with
      ``torch.export.Dim``, and keep sizes symbolic in the fake kernels.
   #. Save with ``torch.export.save``. In the loading process, register the
      operators before ``torch.export.load``, fake kernels included if the
      loaded program will be exported again, decomposed or compiled.

``torch.export`` turns a model into an ``ExportedProgram``: a graph of
operators together with the model's parameters, with no Python code left in
it. The graph can be saved, loaded elsewhere, inspected, or handed to a
compiler for another runtime. Code that export cannot trace has no place in
such a graph, unless it is wrapped in a custom operator. The operator then
travels through export as a single opaque node, and the program that loads
the graph supplies its implementation.
"""

# %%
# Setting up
# ----------
#
# The page exports on the CPU. The operators themselves are tested on every
# device this run has; their NumPy kernels copy CUDA inputs to the CPU and the
# result back.

import sys

import torch

if tuple(int(part) for part in torch.__version__.split(".")[:2]) < (2, 7):
    sys.exit(f"This page needs PyTorch 2.7 or later; this is {torch.__version__}.")

import inspect
import logging
import re
import subprocess
import tempfile
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

# For behaviour that changed between releases without a feature to test for.
RELEASE = tuple(int(part) for part in torch.__version__.split(".")[:2])

torch.manual_seed(0)
np.random.seed(0)
devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
hardware = torch.cuda.get_device_name() if torch.cuda.is_available() else "no CUDA"
print(f"PyTorch {torch.__version__}; devices exercised: {devices} ({hardware})")

# %%
# Two ways to trace, and what neither can
# ---------------------------------------
#
# ``torch.export`` has two front ends. *Non-strict* export runs ``forward`` as
# ordinary Python on fake tensors, which have a shape and a dtype but no data,
# and records the PyTorch operators that get called. *Strict* export traces
# ``forward`` with Dynamo, the front end of ``torch.compile``. The default is
# non-strict from PyTorch 2.8 and strict before; this release's default:

default_strict = inspect.signature(torch.export.export).parameters["strict"].default
print(f"torch.export.export(..., strict={default_strict}) by default")
assert default_strict == (RELEASE < (2, 8))

# %%
# A model that sorts its rows with NumPy shows the difference. Non-strict
# export hands a fake tensor to ``.numpy()``, which needs data, and fails.
# Strict export succeeds, because Dynamo translates the NumPy call into a
# PyTorch sort: NumPy is gone from the graph.


class NumpySort(torch.nn.Module):
    def forward(self, x):
        return torch.from_numpy(np.sort(x.numpy(), axis=1))


try:
    torch.export.export(NumpySort(), (torch.randn(2, 3),), strict=False)
except RuntimeError as err:
    print(f"strict=False: {type(err).__name__}: {str(err).splitlines()[0]}")
    assert ".numpy()" in str(err)
else:
    raise AssertionError("expected non-strict export of NumPy code to fail")

translated = torch.export.export(NumpySort(), (torch.randn(2, 3),), strict=True)
aten_ops = [
    str(node.target)
    for node in translated.graph.nodes
    if str(node.target).startswith("aten.")
]
print(f"strict=True: exported, with operators {aten_ops}")
assert "aten.sort.stable" in aten_ops

# %%
# Neither front end can trace code outside Python, NumPy and PyTorch: a C
# extension, a call through ``ctypes``, another process. Nor do you always
# want Dynamo's translation of your NumPy code in place of the code itself. A
# custom operator solves both: it is one opaque node under either front end,
# and the loading program runs your implementation. The operators below are
# written with NumPy to stay short, but the kernels could be anything. The
# rest of the page passes ``strict=False`` explicitly, so that it behaves the
# same on every release.

# %%
# Two operators backed by NumPy
# -----------------------------
#
# Our model needs two things NumPy does well:
#
# * ``export_demo::rank_rows`` replaces every value in a row by its rank
#   within the row, scaled to lie between 0 and 1. Rank features do not
#   change when the input is shifted or scaled by a positive factor.
# * ``export_demo::pairwise_l1`` computes the L1 distance between every row
#   of ``a`` and every row of ``b``, giving an ``(n, m)`` matrix.
#
# Each operator checks its arguments and raises a ``ValueError`` that names
# the problem. For now they have no fake kernels.


def to_numpy(t: torch.Tensor) -> np.ndarray:
    return t.detach().cpu().numpy()


def check_matrix(t: torch.Tensor, name: str) -> None:
    if t.dim() != 2 or not t.is_floating_point():
        raise ValueError(
            f"{name} must be a 2-D floating-point tensor, got {t.dtype} "
            f"with shape {tuple(t.shape)}"
        )


def check_rank_rows(x: torch.Tensor) -> None:
    check_matrix(x, "x")
    if x.shape[1] < 2:
        raise ValueError(f"x needs at least 2 columns to rank, got {x.shape[1]}")


def check_pairwise_l1(a: torch.Tensor, b: torch.Tensor) -> None:
    check_matrix(a, "a")
    check_matrix(b, "b")
    if a.shape[1] != b.shape[1]:
        raise ValueError(f"a has {a.shape[1]} columns but b has {b.shape[1]}")
    if a.dtype != b.dtype or a.device != b.device:
        raise ValueError("a and b must share dtype and device")


@torch.library.custom_op("export_demo::rank_rows", mutates_args=())
def rank_rows(x: torch.Tensor) -> torch.Tensor:
    check_rank_rows(x)
    values = to_numpy(x)
    ranks = np.argsort(np.argsort(values, axis=1, kind="stable"), axis=1)
    scaled = (ranks / (values.shape[1] - 1)).astype(values.dtype)
    return torch.from_numpy(scaled).to(x.device)


@torch.library.custom_op("export_demo::pairwise_l1", mutates_args=())
def pairwise_l1(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    check_pairwise_l1(a, b)
    diffs = to_numpy(a)[:, None, :] - to_numpy(b)[None, :, :]
    return torch.from_numpy(np.abs(diffs).sum(axis=2)).to(a.device)


# %%
# The model projects its input, turns the projection into rank features, and
# scores each row against a few stored prototypes: the closer a prototype, the
# higher the score.


class PrototypeScorer(torch.nn.Module):
    def __init__(self, in_features=5, features=8, prototypes=3):
        super().__init__()
        self.project = torch.nn.Linear(in_features, features)
        self.register_buffer("prototypes", rank_rows(torch.randn(prototypes, features)))

    def forward(self, x):
        features = rank_rows(self.project(x))
        return -pairwise_l1(features, self.prototypes)


model = PrototypeScorer().eval()
x = torch.randn(4, 5)
scores = model(x)
print(f"scores for a batch of {x.shape[0]}:\n{scores.detach()}")

features = model.project(x)
reference_ranks = features.argsort(dim=1).argsort(dim=1) / (features.shape[1] - 1)
torch.testing.assert_close(rank_rows(features), reference_ranks)
torch.testing.assert_close(rank_rows(features * 10 - 3), reference_ranks)
reference = -torch.cdist(reference_ranks, model.prototypes, p=1)
torch.testing.assert_close(scores, reference)

# %%
# In eager mode the model works, and matches a pure PyTorch computation of the
# same thing (``argsort`` twice, then ``torch.cdist`` with ``p=1``). The rank
# features of ``features * 10 - 3`` are those of ``features``.
#
# Export needs fake kernels
# -------------------------
#
# Export does not run the kernels: it runs the fake kernels, to learn the
# shape, dtype and device of every intermediate result without computing it.
# Without them, it stops at the first custom operator:

try:
    torch.export.export(model, (x,), strict=False)
except RuntimeError as err:
    print(f"{type(err).__name__}: {str(err).splitlines()[0]}")
    assert "export_demo::rank_rows" in str(err).splitlines()[0]
else:
    raise AssertionError("expected export to fail without fake kernels")

# %%
# Every operator without a fake kernel: ``draft_export``
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
#
# ``torch.export.export`` stops at the first such operator, so in a model
# full of operators you would find them one at a time.
# ``torch.export.draft_export`` (PyTorch 2.8 and later) exports anyway: it
# runs the real kernels on the example inputs, records what they returned,
# and reports everything that was missing. It logs a long warning when it
# finds problems; we silence that logger and read the report from code
# instead. The report is the program's ``_report`` attribute, and its
# failure types live in ``torch.export._draft_export``: both private names.

HAS_DRAFT_EXPORT = hasattr(torch.export, "draft_export")
assert HAS_DRAFT_EXPORT == (RELEASE >= (2, 8))
if HAS_DRAFT_EXPORT:
    from torch.export._draft_export import FailureType

    logging.getLogger("torch.export._draft_export").setLevel(logging.ERROR)
    draft = torch.export.draft_export(model, (x,))
    report = draft._report
    for failure in report.failures:
        print(f"{failure.failure_type.name}: {failure.data['op']}")
    profiles = report.op_profiles
    for name, (profile,) in profiles.items():
        seen = profile.out_profile
        print(f"profile of {name}, output: rank {seen.rank}, {seen.dtype}")
    assert not report.successful()
    assert {f.failure_type for f in report.failures} == {
        FailureType.MISSING_FAKE_KERNEL
    }
    assert sorted(profiles) == [
        "export_demo.pairwise_l1.default",
        "export_demo.rank_rows.default",
    ]
else:
    print(f"torch.export.draft_export is not available in PyTorch {torch.__version__}")
    print("(it is public from 2.8): the draft_export cells below are skipped.")

# %%
# One ``MISSING_FAKE_KERNEL`` failure per operator, and one *operator
# profile* per operator: for each input and the output, the rank, dtype,
# device and layout that the real kernel saw and produced. Not the sizes.
# The draft program itself runs and agrees with the model; in its graph the
# operators' outputs have sizes that are unknown symbols:


def output_of(program, op):
    """The fake value export recorded for the one call of ``op`` in a graph."""
    (node,) = [node for node in program.graph.nodes if node.target == op]
    return node.meta["val"]


def describe(tensor):
    return f"shape {tuple(tensor.shape)}, strides {tensor.stride()}"


if HAS_DRAFT_EXPORT:
    torch.testing.assert_close(draft.module()(x), scores)
    for op in (
        torch.ops.export_demo.rank_rows.default,
        torch.ops.export_demo.pairwise_l1.default,
    ):
        print(f"{op} in the draft graph: {describe(output_of(draft, op))}")
        assert not any(isinstance(size, int) for size in output_of(draft, op).shape)

# %%
# The generated fake kernels
# ~~~~~~~~~~~~~~~~~~~~~~~~~~
#
# The profiles can stand in for fake kernels. The context manager
# ``unsafe_generate_fake_kernels`` registers fake kernels built from them;
# it lives in the private module ``torch._library.fake_profile`` and logs a
# warning that it overrides existing fake kernels, which we silence too.
# Inside it, a sound ``torch.export.export`` succeeds:


class PairwiseDistances(torch.nn.Module):
    def forward(self, a, b):
        return pairwise_l1(a, b)


if HAS_DRAFT_EXPORT:
    from torch._library.fake_profile import (
        MissingOpProfile,
        unsafe_generate_fake_kernels,
    )

    logging.getLogger("torch._library.fake_profile").setLevel(logging.ERROR)
    ranked = rank_rows(model.project(x)).detach()
    real_out = pairwise_l1(ranked, model.prototypes)
    pairwise = torch.ops.export_demo.pairwise_l1.default
    with unsafe_generate_fake_kernels(profiles):
        generated = torch.export.export(model, (x,), strict=False)
        checks = torch.library.opcheck(
            pairwise_l1, (ranked, model.prototypes), raise_exception=False
        )
        try:
            torch.export.export(
                PairwiseDistances(),
                (ranked.double(), ranked.double()),
                strict=False,
            )
        except MissingOpProfile as err:
            other_dtype = f"{type(err).__name__}: {str(err).splitlines()[0][:70]}..."
        else:
            raise AssertionError("expected no profile to match float64 inputs")
    torch.testing.assert_close(generated.module()(x), scores)
    torch.export.export(model, (x,), strict=False)  # after the block: still works
    print(f"generated fake kernel: {describe(output_of(generated, pairwise))}")
    print(f"real kernel:           {describe(real_out)}")
    print(f"float64 inputs: {other_dtype}")
    assert not any(
        isinstance(size, int) for size in output_of(generated, pairwise).shape
    )
    assert output_of(generated, pairwise).stride() != real_out.stride()

# %%
# The export is correct on the example, and the limits are plain in the
# output:
#
# * The output's sizes are unknown symbols, because the profile never
#   recorded that the result has one row per row of ``a`` and one column
#   per row of ``b``.
# * The guessed strides are column-major, while the real kernel returns a
#   row-major matrix; :ref:`sphx_glr_tutorials_strides_and_runtime.py`
#   shows why a fake kernel's strides must be the real ones.
# * Inputs of a rank, dtype or device the profile did not record find no
#   match: the ``float64`` export raised ``MissingOpProfile``.
# * The generated kernels outlive the block: for an operator made with
#   ``custom_op`` that had no fake kernel, nothing is restored on exit, and
#   the last export, after the block, still succeeded.
#
# ``opcheck`` sees the stride problem, on the CPU from PyTorch 2.13:

if HAS_DRAFT_EXPORT:
    faketensor_check = str(checks["test_faketensor"])
    print(f"opcheck test_faketensor: {faketensor_check.splitlines()[0][:90]}")
    assert ("Stride mismatch" in faketensor_check) == (RELEASE >= (2, 13))

# %%
# Writing the fake kernels
# ~~~~~~~~~~~~~~~~~~~~~~~~
#
# The report told us which operators need a fake kernel; the kernels
# themselves are short, with the sizes and layout the generated ones could
# not know. ``rank_rows`` returns a contiguous tensor of the input's shape,
# and ``pairwise_l1`` one row per row of ``a`` and one column per row of
# ``b``. They run the same argument checks, so bad input fails at export
# time, not only when the program runs.


@rank_rows.register_fake
def _(x):
    check_rank_rows(x)
    return x.new_empty(x.shape)


@pairwise_l1.register_fake
def _(a, b):
    check_pairwise_l1(a, b)
    return a.new_empty(a.shape[0], b.shape[0])


# %%
# The ``opcheck`` samples cover a fresh matrix, an empty one (no rows), one
# that is not contiguous (every other column of a wider matrix) and one that is
# dense but not row-major (a transposed matrix), in two dtypes. None requires
# grad: these operators have no backward, and the exported model is used for
# inference.


def sample_matrices(device, columns=6):
    return [
        torch.randn(4, columns, device=device),
        torch.randn(0, columns, device=device),
        torch.randn(5, 2 * columns, device=device)[:, ::2],
        torch.randn(columns, 3, dtype=torch.float64, device=device).t(),
    ]


for device in devices:
    for matrix in sample_matrices(device):
        torch.library.opcheck(rank_rows, (matrix,))
        for other in sample_matrices(device):
            if other.dtype == matrix.dtype:
                torch.library.opcheck(pairwise_l1, (matrix, other))
print(f"opcheck passed for both operators on {devices}")


mismatched = (torch.randn(4, 6), torch.randn(3, 5))
for label, attempt in [
    ("eager", lambda: pairwise_l1(*mismatched)),
    (
        "export",
        lambda: torch.export.export(PairwiseDistances(), mismatched, strict=False),
    ),
]:
    try:
        attempt()
    except ValueError as err:
        print(f"{label:>6}: {type(err).__name__}: {err}")
    else:
        raise AssertionError(f"expected {label} to reject mismatched columns")

# %%
# One of the ``opcheck`` examples is a transposed matrix. Its strides differ
# from a freshly allocated tensor's, which is why the ``rank_rows`` fake kernel
# uses ``new_empty(x.shape)`` (always contiguous, like the NumPy result) rather
# than ``torch.empty_like(x)``, which would copy the transposed layout:

transposed = torch.randn(4, 6).t()
print(f"rank_rows(transposed).stride():  {rank_rows(transposed).stride()}")
print(f"torch.empty_like(transposed).stride(): {torch.empty_like(transposed).stride()}")
assert rank_rows(transposed).is_contiguous()
assert rank_rows(transposed).stride() != torch.empty_like(transposed).stride()

# %%
# What the exported graph contains
# --------------------------------
#
# With fake kernels in place, export succeeds. Printing the graph shows every
# operator call, with the parameters and the buffer turned into inputs.

exported = torch.export.export(model, (x,), strict=False)
print(exported.graph)
placeholders = [node for node in exported.graph.nodes if node.op == "placeholder"]
state = list(model.parameters()) + list(model.buffers())
assert len(placeholders) == len(state) + 1  # the state, then the input x

# %%
# The same information as a table, one row per node, with the shape that the
# fake kernels and the built-in operators' shape functions produced:

# sphinx_gallery_start_ignore


def node_table(program):
    rows = [("op", "name", "target", "shape")]
    for node in program.graph.nodes:
        value = node.meta.get("val")
        shape = tuple(value.shape) if isinstance(value, torch.Tensor) else ""
        target = node.target if node.op == "call_function" else ""
        rows.append((node.op, node.name, str(target), str(shape)))
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    for row in rows:
        print(
            "  ".join(
                cell.ljust(width) for cell, width in zip(row, widths, strict=True)
            )
        )


# sphinx_gallery_end_ignore


def count_calls(program, op):
    return sum(node.target == op for node in program.graph.nodes)


node_table(exported)
custom_ops = [torch.ops.export_demo.rank_rows.default]
custom_ops.append(torch.ops.export_demo.pairwise_l1.default)
for op in custom_ops:
    assert count_calls(exported, op) == 1, op
torch.testing.assert_close(exported.module()(x), scores)

# %%
# Each custom operator is exactly one ``call_function`` node whose target is
# ``torch.ops.export_demo.<name>.default``: the operator's default overload.
# Nothing of the NumPy code inside it was recorded. The exported program's
# ``module()`` gives the same scores as the eager model. Strict export,
# which traces with Dynamo, records the custom operators the same way:

strictly_exported = torch.export.export(model, (x,), strict=True)
for op in custom_ops:
    assert count_calls(strictly_exported, op) == 1, op
torch.testing.assert_close(strictly_exported.module()(x), scores)
print("strict=True: the same two custom operator nodes, the same scores")

# %%
# Export can go on to lower the graph to a smaller set of core ATen operators
# with ``run_decompositions()``. Built-in operators such as ``linear`` are
# rewritten in terms of simpler ones; custom operators have no decomposition
# to rewrite them with, so they stay as they are:


def called(program):
    return [
        str(node.target) for node in program.graph.nodes if node.op == "call_function"
    ]


lowered = exported.run_decompositions()
print(f"before: {called(exported)}")
print(f"after:  {called(lowered)}")
assert count_calls(exported, torch.ops.aten.linear.default) == 1
assert count_calls(lowered, torch.ops.aten.linear.default) == 0
for op in custom_ops:
    assert count_calls(lowered, op) == 1, op

# %%
# Any batch size with ``torch.export.Dim``
# ----------------------------------------
#
# The table shows concrete sizes: export traced with the example batch, and
# the program now insists on exactly that batch size.

try:
    exported.module()(torch.randn(6, 5))
except (AssertionError, RuntimeError) as err:
    print(f"{type(err).__name__}: {str(err).splitlines()[0]}")
    assert str(x.shape[0]) in str(err).splitlines()[0]
    assert isinstance(err, AssertionError) == (RELEASE >= (2, 9))
else:
    raise AssertionError("expected the static program to reject a batch of 6")

# %%
# From PyTorch 2.9 the check that failed is a guard and raises an
# ``AssertionError``; 2.7 and 2.8 raise a ``RuntimeError`` for the same
# mistake, hence the two classes in ``except``. Either way the message names
# the size check that failed.
#
# To accept any batch size, name the batch dimension with
# ``torch.export.Dim`` and pass it in ``dynamic_shapes``, a dictionary keyed
# by the ``forward`` argument's name. The fake kernels then receive a symbolic
# batch size, exactly as under ``torch.compile(dynamic=True)``, and compute
# the output shapes from it.

batch = torch.export.Dim("batch")
exported = torch.export.export(
    model, (x,), dynamic_shapes={"x": {0: batch}}, strict=False
)
node_table(exported)

for node in exported.graph.nodes:
    if node.target in custom_ops:
        assert isinstance(node.meta["val"].shape[0], torch.SymInt), node.name
batch_sizes = [2, 6, 32]
for batch_size in batch_sizes:
    inputs = torch.randn(batch_size, 5)
    torch.testing.assert_close(exported.module()(inputs), model(inputs))
print(f"one exported program matches eager for batch sizes {batch_sizes}")

# %%
# Now the batch dimension prints as a symbol, both custom operators' outputs
# carry it, and one program serves every batch size we tried. The figure draws
# this graph: the inputs export created on the left (parameters, buffer and
# ``x``), the operations in the order they run on the right, each with the
# shape its fake kernel or PyTorch's shape function computed, and the two
# custom operators highlighted.

# sphinx_gallery_start_ignore
from matplotlib.patches import FancyBboxPatch


def node_label(node):
    if node.op == "call_function":
        name = str(node.target).removesuffix(".default").replace(".", "::", 1)
    else:
        name = node.name if node.op == "placeholder" else "output"
    value = node.meta.get("val")
    if isinstance(value, torch.Tensor):
        name += "\n(" + ", ".join(str(size) for size in value.shape) + ")"
    return name


def draw_graph(program, highlight):
    inputs = [node for node in program.graph.nodes if node.op == "placeholder"]
    steps = [node for node in program.graph.nodes if node.op != "placeholder"]
    place = {node: (0.0, -row) for row, node in enumerate(inputs)}
    place.update({node: (3.4, -row) for row, node in enumerate(steps)})
    height = max(len(inputs), len(steps))
    fig, ax = plt.subplots(figsize=(6.4, 0.75 * height + 0.5), layout="constrained")
    for node, (left, top) in place.items():
        special = node.op == "call_function" and node.target in highlight
        color = "#f6b26b" if special else "#dde7f0" if node in steps else "#eeeeee"
        box = FancyBboxPatch(
            (left, top - 0.3), 2.4, 0.6, boxstyle="round,pad=0.04", color=color
        )
        ax.add_patch(box)
        ax.text(left + 1.2, top, node_label(node), ha="center", va="center", size=8)
    for node in steps:
        for source in node.all_input_nodes:
            (x0, y0), (x1, y1) = place[source], place[node]
            if source in steps:  # from the box above: bottom edge to top edge
                start, end, bend = (x0 + 1.2, y0 - 0.34), (x1 + 1.2, y1 + 0.34), 0.0
                if y0 - y1 > 1:
                    start, end, bend = (x0 + 2.44, y0), (x1 + 2.44, y1), -0.5
            else:  # from an input on the left: right edge to left edge
                start, end, bend = (x0 + 2.44, y0), (x1 - 0.04, y1), 0.0
            ax.annotate(
                "",
                xy=end,
                xytext=start,
                arrowprops={
                    "arrowstyle": "->",
                    "color": "#555555",
                    "connectionstyle": f"arc3,rad={bend}",
                },
            )
    ax.set_xlim(-0.2, 6.3)
    ax.set_ylim(-height + 0.4, 0.5)
    ax.set_axis_off()
    ax.set_title("Exported graph of PrototypeScorer, dynamic batch", size=10)
    plt.show()


# sphinx_gallery_end_ignore

draw_graph(exported, custom_ops)

# %%
# A fake kernel that fixes the size breaks ``Dim``
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
#
# The fake kernel is where a dynamic dimension lives or dies. Here is a copy
# of ``pairwise_l1`` whose fake kernel converts the batch size to a Python
# ``int``. That fixes the size to the example's, which contradicts the promise
# that ``batch`` is dynamic, and export refuses:


@torch.library.custom_op("export_demo::pairwise_l1_fixed", mutates_args=())
def pairwise_l1_fixed(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return pairwise_l1(a, b)


@pairwise_l1_fixed.register_fake
def _(a, b):
    check_pairwise_l1(a, b)
    return a.new_empty(int(a.shape[0]), b.shape[0])  # int() fixes the batch size


class FixedScorer(PrototypeScorer):
    def forward(self, x):
        return -pairwise_l1_fixed(rank_rows(self.project(x)), self.prototypes)


try:
    torch.export.export(
        FixedScorer(), (x,), dynamic_shapes={"x": {0: batch}}, strict=False
    )
except torch._dynamo.exc.UserError as err:
    print(f"{type(err).__name__}: {str(err).splitlines()[0]}")
    print(str(err).splitlines()[1].strip())
    assert "batch" in str(err).splitlines()[0]
else:
    raise AssertionError("expected export to report the specialized batch size")

# %%
# ``torch._dynamo.exc.UserError`` is a private class, but it is the one export
# raises for a violated ``Dim``, so we catch it by name. The message names the
# dimension that was specialized. The fix is the fake kernel we already have:
# compute the size from ``a.shape[0]`` as it is.
#
# Saving and loading in another process
# -------------------------------------
#
# ``torch.export.save`` writes the program, parameters included, to a ``.pt2``
# file. We save it in a temporary directory, along with an input batch of a
# size the export never saw. A second Python process loads both, runs the
# program and saves what it computed, and this process checks that result
# against the eager model's.

workdir = tempfile.TemporaryDirectory()
folder = Path(workdir.name)
program_path = folder / "prototype_scorer.pt2"
torch.export.save(exported, program_path)

batch_inputs = torch.randn(7, 5)
assert batch_inputs.shape[0] != x.shape[0]  # a batch size export never saw
torch.save(batch_inputs, folder / "inputs.pt")
print(f"saved {program_path.name}: {program_path.stat().st_size} bytes")

# %%
# The file stores each custom operator by name only, as
# ``torch.ops.export_demo.rank_rows.default``, not its Python kernels, so
# loading looks the names up in the loading process's operator registry. The
# script below loads the program, runs it on the saved batch and saves the
# result. In a fresh interpreter it fails, saying why as clearly as the
# release allows: from PyTorch 2.9 the loader logs that it "failed to
# resolve" the operator; 2.7 raises a ``SerializeError`` that quotes its
# name; 2.8 fails with a ``KeyError`` about a missing ``version`` entry,
# which does not point at the cause at all.

load_and_run = """
import sys
import torch

folder = sys.argv[1]
program = torch.export.load(folder + "/prototype_scorer.pt2")
inputs = torch.load(folder + "/inputs.pt")
torch.save(program.module()(inputs), folder + "/outputs.pt")
"""

run = subprocess.run(
    [sys.executable, "-c", load_and_run, str(folder)], capture_output=True, text=True
)
last_line = run.stderr.strip().splitlines()[-1]
print(f"return code: {run.returncode}")
print(f"last line of stderr: {last_line[:100]}{'...' if len(last_line) > 100 else ''}")
assert run.returncode != 0
assert not (folder / "outputs.pt").exists()

unresolved = re.search(r"failed to resolve (\S+) to an operator", run.stderr)
names_operator = "torch.ops.export_demo.rank_rows.default" in run.stderr
print(f"stderr names the missing operator: {names_operator}")
if unresolved:
    print(f"cause, from the logged warnings: {unresolved.group(0)}")
    assert unresolved.group(1) == "torch.ops.export_demo.rank_rows.default"
assert (unresolved is not None) == (RELEASE >= (2, 9))
assert names_operator == (RELEASE != (2, 8))

# %%
# The loader could not turn ``torch.ops.export_demo.rank_rows.default`` back
# into an operator, because no ``export_demo::rank_rows`` exists in the fresh
# process. The fix is to register the operators before calling
# ``torch.export.load``. In a real project you would put the operator
# definitions in a module and import it in both programs; here the page must
# stand on its own, so the loader carries its own copy of the two kernels. It
# leaves out the fake kernels and the argument checks: running the loaded
# program with ``.module()`` calls the real kernels only.
#
# That shortcut has a limit. Anything that traces the loaded program again,
# such as ``run_decompositions()``, exporting it once more, ``torch.compile``
# or AOTInductor, runs the fake kernels, and fails without them. The loader
# tries ``run_decompositions()`` last, to show it.

operator_definitions = """
import numpy as np
import torch


@torch.library.custom_op("export_demo::rank_rows", mutates_args=())
def rank_rows(x: torch.Tensor) -> torch.Tensor:
    values = x.detach().cpu().numpy()
    ranks = np.argsort(np.argsort(values, axis=1, kind="stable"), axis=1)
    scaled = (ranks / (values.shape[1] - 1)).astype(values.dtype)
    return torch.from_numpy(scaled).to(x.device)


@torch.library.custom_op("export_demo::pairwise_l1", mutates_args=())
def pairwise_l1(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    diffs = a.detach().cpu().numpy()[:, None, :] - b.detach().cpu().numpy()[None]
    return torch.from_numpy(abs(diffs).sum(axis=2)).to(a.device)
"""

try_decompositions = """
try:
    program.run_decompositions()
except RuntimeError as error:
    print(f"run_decompositions: {type(error).__name__}: {str(error).splitlines()[0]}")
else:
    print("run_decompositions: succeeded")
"""

run = subprocess.run(
    [
        sys.executable,
        "-c",
        operator_definitions + load_and_run + try_decompositions,
        str(folder),
    ],
    capture_output=True,
    text=True,
)
assert run.returncode == 0, run.stderr
fresh_outputs = torch.load(folder / "outputs.pt")
torch.testing.assert_close(fresh_outputs, model(batch_inputs))
print(f"fresh process output matches eager for a batch of {len(fresh_outputs)}")
print(run.stdout.strip())
assert "There was no fake impl registered for" in run.stdout
assert "export_demo::" in run.stdout

# %%
# With the operators registered, the fresh process loaded the program, ran it
# on a batch size that was never traced, and produced the same scores as the
# eager model in this process. Decomposing the loaded program failed for want
# of a fake kernel: a loader that will trace the program again must register
# the fake kernels too, which is one more reason to keep the complete operator
# definitions in a module that both programs import.

workdir.cleanup()

# %%
# Conclusion
# ----------
#
# A custom operator lets ``torch.export`` capture a model that calls code it
# cannot trace, as one node that stays one node through
# ``run_decompositions()``, under strict and non-strict export alike. Export
# runs the operator's fake kernel, which must keep ``torch.export.Dim`` sizes
# symbolic. The saved ``.pt2`` file names the operator, so a process that
# loads it must define the operator first, with its fake kernel if it will
# trace the program again.
#
# Previous: :ref:`sphx_glr_tutorials_fake_kernels_and_shapes.py`. Next,
# :ref:`sphx_glr_tutorials_custom_op_troubleshooting.py` collects the errors
# you are most likely to meet, and :ref:`sphx_glr_tutorials_cpp_custom_ops.py`
# shows how to write the operators themselves in C++.
