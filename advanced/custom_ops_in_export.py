"""
Custom Operators in torch.export
================================

After this page you will be able to export a model that calls custom
operators with ``torch.export``, find those operators in the exported graph,
make the export accept any batch size, and save the result to a ``.pt2`` file
that another Python process can load and run, provided that process registers
the same operators first.

.. grid:: 2

    .. grid-item-card:: :octicon:`mortar-board;1em;` What you will learn
       :class-card: card-prerequisites

       * Why ``torch.export`` needs a fake kernel for every custom operator
       * How a custom operator appears in an exported graph
       * How to export with a dynamic batch size using ``torch.export.Dim``
       * How to save an exported program and load it in a fresh process

    .. grid-item-card:: :octicon:`list-unordered;1em;` Prerequisites
       :class-card: card-prerequisites

       * PyTorch 2.7 or later
       * NumPy
       * :ref:`sphx_glr_tutorials_python_custom_ops.py`
       * :ref:`sphx_glr_tutorials_fake_kernels_and_shapes.py`

``torch.export`` turns a model into an ``ExportedProgram``: a graph of
operators together with the model's parameters, with no Python code left in
it. The graph can be saved, loaded elsewhere, inspected, or handed to a
compiler for another runtime. Code that PyTorch cannot trace, such as a call
into NumPy, has no place in such a graph, unless it is wrapped in a custom
operator. The operator then travels through export as a single opaque node,
and the program that loads the graph supplies its implementation.
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

import re
import subprocess
import tempfile
from pathlib import Path

import numpy as np

torch.manual_seed(0)
np.random.seed(0)
devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
hardware = torch.cuda.get_device_name() if torch.cuda.is_available() else "no CUDA"
print(f"PyTorch {torch.__version__}; devices exercised: {devices} ({hardware})")

# %%
# NumPy code does not export
# --------------------------
#
# ``torch.export`` runs the model on fake tensors, which have a shape and a
# dtype but no data, and records the operators it meets. A fake tensor cannot
# be handed to NumPy, so a model that calls NumPy directly cannot be exported:


class NumpySort(torch.nn.Module):
    def forward(self, x):
        return torch.from_numpy(np.sort(x.numpy(), axis=1))


try:
    torch.export.export(NumpySort(), (torch.randn(2, 3),))
except RuntimeError as err:
    print(f"{type(err).__name__}: {str(err).splitlines()[0]}")
    assert ".numpy()" in str(err)
else:
    raise AssertionError("expected exporting NumPy code to fail")

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
    torch.export.export(model, (x,))
except RuntimeError as err:
    print(f"{type(err).__name__}: {str(err).splitlines()[0]}")
    assert "export_demo::rank_rows" in str(err).splitlines()[0]
else:
    raise AssertionError("expected export to fail without fake kernels")

# %%
# The fake kernels describe the outputs: ``rank_rows`` returns a contiguous
# tensor of the input's shape, and ``pairwise_l1`` one row per row of ``a``
# and one column per row of ``b``. They run the same argument checks, so bad
# input fails at export time, not only when the program runs.


@rank_rows.register_fake
def _(x):
    check_rank_rows(x)
    return x.new_empty(x.shape)


@pairwise_l1.register_fake
def _(a, b):
    check_pairwise_l1(a, b)
    return a.new_empty(a.shape[0], b.shape[0])


for device in devices:
    matrix = torch.randn(4, 6, device=device)
    torch.library.opcheck(rank_rows, (matrix,))
    torch.library.opcheck(rank_rows, (matrix.t(),))
    torch.library.opcheck(pairwise_l1, (matrix, torch.randn(3, 6, device=device)))
    torch.library.opcheck(pairwise_l1, (matrix.double(), matrix[:1].double()))
print(f"opcheck passed for both operators on {devices}")


class PairwiseDistances(torch.nn.Module):
    def forward(self, a, b):
        return pairwise_l1(a, b)


mismatched = (torch.randn(4, 6), torch.randn(3, 5))
for label, attempt in [
    ("eager", lambda: pairwise_l1(*mismatched)),
    ("export", lambda: torch.export.export(PairwiseDistances(), mismatched)),
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

exported = torch.export.export(model, (x,))
print(exported.graph)
placeholders = [node for node in exported.graph.nodes if node.op == "placeholder"]
state = list(model.parameters()) + list(model.buffers())
assert len(placeholders) == len(state) + 1  # the state, then the input x

# %%
# The same information as a table, one row per node, with the shape that the
# fake kernels and the built-in operators' shape functions produced:


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
# ``module()`` gives the same scores as the eager model.
#
# Export can go on to lower the graph to a smaller set of core ATen operators
# with ``run_decompositions()``. Built-in operators such as ``linear`` are
# rewritten in terms of simpler ones; custom operators have no decomposition
# to rewrite them with, so they stay as they are:

lowered = exported.run_decompositions()
print([str(node.target) for node in lowered.graph.nodes if node.op == "call_function"])
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
else:
    raise AssertionError("expected the static program to reject a batch of 6")

# %%
# This release raises the class printed above; earlier releases raised a
# ``RuntimeError`` for the same mistake, hence the two classes in ``except``.
# Either way the message names the size check that failed.
#
# To accept any batch size, name the batch dimension with
# ``torch.export.Dim`` and pass it in ``dynamic_shapes``, a dictionary keyed
# by the ``forward`` argument's name. The fake kernels then receive a symbolic
# batch size, exactly as under ``torch.compile(dynamic=True)``, and compute
# the output shapes from it.

batch = torch.export.Dim("batch")
exported = torch.export.export(model, (x,), dynamic_shapes={"x": {0: batch}})
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
# carry it, and one program serves every batch size we tried.
#
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
    torch.export.export(FixedScorer(), (x,), dynamic_shapes={"x": {0: batch}})
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
# file. We save it in a temporary directory, along with an input batch and the
# eager model's output for that batch, so that a second Python process can
# check its result against ours.

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
# ``torch.ops.export_demo.rank_rows.default``; the kernels are Python
# functions in this process and are not saved. So loading has to look the
# names up in the loading process's operator registry. The script below loads
# the program, runs it on the saved batch and saves the result. Run on its own
# in a fresh interpreter, it fails:

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
unresolved = re.search(r"failed to resolve (\S+) to an operator", run.stderr)
assert unresolved, run.stderr
print(f"return code: {run.returncode}")
print(f"last line of stderr: {run.stderr.strip().splitlines()[-1]}")
print(f"cause, from the logged warnings: {unresolved.group(0)}")
assert run.returncode != 0
assert unresolved.group(1) == "torch.ops.export_demo.rank_rows.default"
assert not (folder / "outputs.pt").exists()

# %%
# The loader could not turn ``torch.ops.export_demo.rank_rows.default`` back
# into an operator, because no ``export_demo::rank_rows`` exists in the fresh
# process. The fix is to register the operators before calling
# ``torch.export.load``. In a real project you would put the operator
# definitions in a module and import it in both programs; here the page must
# stand on its own, so the loader carries its own copy of the two kernels. It
# leaves out the fake kernels and the argument checks: running an exported
# program calls the real kernels only.

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

run = subprocess.run(
    [sys.executable, "-c", operator_definitions + load_and_run, str(folder)],
    capture_output=True,
    text=True,
)
assert run.returncode == 0, run.stderr
fresh_outputs = torch.load(folder / "outputs.pt")
torch.testing.assert_close(fresh_outputs, model(batch_inputs))
print(f"fresh process output matches eager for a batch of {len(fresh_outputs)}")

# %%
# With the operators registered, the fresh process loaded the program, ran it
# on a batch size that was never traced, and produced the same scores as the
# eager model in this process.

workdir.cleanup()

# %%
# Conclusion
# ----------
#
# A custom operator lets ``torch.export`` capture a model that calls code it
# cannot trace: the operator becomes one node in the graph, and it stays one
# node through ``run_decompositions()``. Export needs the operator's fake
# kernel to know the output's shape, and with ``torch.export.Dim`` that fake
# kernel must keep the dynamic sizes symbolic. The saved ``.pt2`` file refers
# to the operator by name, so any process that loads it must define the
# operator first.
#
# Previous: :ref:`sphx_glr_tutorials_fake_kernels_and_shapes.py`. Next,
# :ref:`sphx_glr_tutorials_custom_op_troubleshooting.py` collects the errors
# you are most likely to meet, and :ref:`sphx_glr_tutorials_cpp_custom_ops.py`
# shows how to write the operators themselves in C++.
