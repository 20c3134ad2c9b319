"""
Custom Operators on Sharded Tensors (DTensor)
=============================================

After this page you will be able to call your own custom operator on
``DTensor`` inputs, the sharded tensors behind PyTorch's tensor and sequence
parallelism, by telling DTensor how the operator may be sharded with
``register_sharding``. The page starts two real processes that talk over the
gloo backend, shards a matrix across them by rows, by columns and not at
all, and checks every sharded result against the same operator on the whole
tensor.

.. grid:: 2

    .. grid-item-card:: :octicon:`mortar-board;1em;` What you will learn
       :class-card: card-prerequisites

       * Why DTensor refuses a custom operator until it has a sharding rule
       * How to write a rule with ``register_sharding``: pairs of output
         and input placements the kernel handles locally
       * What DTensor does with an input sharding the rule leaves out, and
         how to count the communication with ``CommDebugMode``
       * How a ``Partial`` output postpones a reduction
       * Why a wrong rule gives wrong numbers without an error, and how to
         catch it
       * How to keep the write of an operator that writes into an argument,
         and how a rule may depend on a non-tensor argument

    .. grid-item-card:: :octicon:`list-unordered;1em;` Prerequisites
       :class-card: card-prerequisites

       * PyTorch 2.7 or later
       * NumPy and Matplotlib
       * :ref:`sphx_glr_tutorials_python_custom_ops.py`
       * The placements ``Shard``, ``Replicate`` and ``Partial`` of
         ``torch.distributed.tensor``

.. admonition:: Checklist
   :class: checklist

   #. Give the operator a fake kernel: DTensor runs it to learn the shape of
      the global output.
   #. For each input placement your kernel can handle without talking to the
      other ranks, write the output placement it produces; return the list
      of ``(output placements, input placements)`` pairs from a function
      decorated with ``register_sharding(torch.ops.<ns>.<op>.default)``.
   #. Leave out any placement whose local result would be wrong: DTensor
      then redistributes the input first, which costs communication but
      stays correct. An argument the kernel writes into is the exception:
      a redistributed copy takes the write and the caller's tensor keeps
      its old values, so build the pairs from that argument's own placement.
   #. Give non-tensor arguments the placement ``None``; if the rule depends
      on one, make it an ``int``, which DTensor's cache key includes.
   #. Register the rule before the first call, at import time.
   #. On a real multi-process run, compare the sharded result
      (``full_tensor()``) with the operator on the whole tensor, for every
      placement in the rule.

A ``DTensor`` is a global tensor split across the processes (ranks) of a
device mesh. Each rank holds a local piece, and each dimension of the mesh
says how: ``Shard(d)`` splits tensor dimension ``d`` between the ranks,
``Replicate()`` gives every rank a full copy, and ``Partial()`` gives every
rank a full-size tensor whose sum over ranks is the true value (a sum by
default; ``Partial("max")``, ``"min"`` or ``"avg"`` name other reductions). When an
operator meets DTensor inputs, DTensor looks up a *sharding rule* for it,
runs the operator on each rank's local piece, and wraps the local results in
a new DTensor. PyTorch's built-in operators come with rules; your custom
operator does not.
"""

# %%
# Setting up
# ----------
#
# DTensor needs a process group, so the page starts two worker processes on
# this machine and connects them with gloo, PyTorch's CPU backend. The whole
# page runs on the CPU, even where a GPU is present: the lesson is about
# placements, not devices.

import sys

import torch

if tuple(int(part) for part in torch.__version__.split(".")[:2]) < (2, 7):
    sys.exit(f"This page needs PyTorch 2.7 or later; this is {torch.__version__}.")

import datetime
import logging
import math
import multiprocessing
import os
import socket
import tempfile
import time
import traceback
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import torch.distributed as dist
from matplotlib.patches import Patch, Rectangle
from torch import Tensor
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import Partial, Replicate, Shard, distribute_tensor
from torch.distributed.tensor.debug import CommDebugMode
from torch.distributed.tensor.experimental import register_sharding

# For behaviour that changed between releases without a feature to test for.
RELEASE = tuple(int(part) for part in torch.__version__.split(".")[:2])

torch.manual_seed(0)
np.random.seed(0)
devices = ["cpu"]
hardware = torch.cuda.get_device_name() if torch.cuda.is_available() else "no CUDA"
print(f"PyTorch {torch.__version__}; devices exercised: {devices} ({hardware})")
print("CUDA: not used by this page; its two ranks share the CPU through gloo")

# %%
# ``register_sharding`` lives in ``torch.distributed.tensor.experimental``:
# it is public, and marked experimental, so its details may still change.
#
# Two operators that work row by row
# ----------------------------------
#
# Both operators treat a matrix as a stack of independent rows, and both are
# written in NumPy, standing in for a kernel DTensor cannot look into.
# ``row_normalize`` scales every row to unit length; ``row_sq_norms`` returns
# the squared length of every row. Each has a fake kernel, which, as we will
# see, DTensor needs.


@torch.library.custom_op("shard_demo::row_normalize", mutates_args=())
def row_normalize(x: Tensor) -> Tensor:
    rows = np.ascontiguousarray(x.detach().cpu().numpy())
    unit = rows / np.linalg.norm(rows, axis=1, keepdims=True)
    return torch.from_numpy(unit).to(x.device)


@row_normalize.register_fake
def _(x):
    return x.new_empty(x.shape)


@torch.library.custom_op("shard_demo::row_sq_norms", mutates_args=())
def row_sq_norms(x: Tensor) -> Tensor:
    rows = x.detach().cpu().numpy()
    return torch.from_numpy(np.einsum("ij,ij->i", rows, rows)).to(x.device)


@row_sq_norms.register_fake
def _(x):
    return x.new_empty(x.shape[0])


x = torch.randn(6, 4)
expected = {"row_normalize": row_normalize(x), "row_sq_norms": row_sq_norms(x)}
torch.testing.assert_close(expected["row_normalize"], x / x.norm(dim=1, keepdim=True))
torch.testing.assert_close(expected["row_sq_norms"], (x * x).sum(dim=1))
for op in (row_normalize, row_sq_norms):
    torch.library.opcheck(op, (x,))
print("both operators match PyTorch on the whole matrix; opcheck passed")

# %%
# ``expected`` holds the unsharded results: every sharded run below must
# reproduce them.
#
# Starting two ranks
# ------------------
#
# A real job starts one process per device, usually with ``torchrun``, and
# every process runs the same script. A page cannot be launched that way, so
# ``run_on_ranks(experiment)`` *forks* two workers (on Linux and other
# systems that offer ``fork``, which the cell checks): each is a copy of
# this process, with the operators and rules registered so far. Each worker
# joins a gloo group on ``127.0.0.1``, builds a mesh of the ranks, calls
# ``experiment(mesh)`` and sends back what it returned; an exception on a
# rank stops both and comes back here as a ``RuntimeError`` that holds the
# traceback of each rank that raised, the first to fail first. The helper is
# hidden on the web page; the downloaded script and notebook contain it.

# sphinx_gallery_start_ignore


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def worker(rank, experiment, port, folder, mesh_shape):
    # Each rank writes its output (gloo's connection messages, warnings) to
    # a log file of its own, not to this page or notebook.
    log = open(f"{folder}/rank{rank}.log", "w", buffering=1)
    os.dup2(log.fileno(), 1)
    os.dup2(log.fileno(), 2)
    sys.stdout = sys.stderr = log
    torch.set_num_threads(1)  # the ranks share the CPU
    try:
        dist.init_process_group(
            "gloo",
            init_method=f"tcp://127.0.0.1:{port}",
            rank=rank,
            world_size=math.prod(mesh_shape),
            timeout=datetime.timedelta(seconds=60),
        )
        result = experiment(init_device_mesh("cpu", mesh_shape))
    except BaseException:
        # Stamped and written before this rank exits, so before its peers
        # lose the connection to it and fail in turn.
        report = f"{time.monotonic_ns()} {rank}\n{traceback.format_exc()}"
        Path(folder, f"rank{rank}.err").write_text(report)
        raise
    torch.save(result, f"{folder}/rank{rank}.pt")
    # No destroy_process_group(): the worker process ends here, and its exit
    # closes the group's connections.


def run_on_ranks(experiment, mesh_shape=(2,), deadline_s=120):
    """What experiment(mesh) returned on each rank, in rank order."""
    # start_processes logs each worker it stops; the exception says enough.
    logging.getLogger("torch.multiprocessing.spawn").setLevel(logging.ERROR)
    ranks = math.prod(mesh_shape)
    with tempfile.TemporaryDirectory() as folder:
        args = (experiment, free_port(), folder, mesh_shape)
        workers = torch.multiprocessing.start_processes(
            worker,
            args=args,
            nprocs=ranks,
            join=False,
            daemon=True,
            start_method="fork",
        )
        started = time.monotonic()
        try:
            while not workers.join(timeout=1):
                if time.monotonic() - started > deadline_s:
                    raise TimeoutError(f"workers still running after {deadline_s} s")
        except torch.multiprocessing.ProcessRaisedException:
            # join() reports whichever failed rank it saw first, which may be
            # a rank whose peer had left; report each rank's own error, in
            # the order they failed.
            failed = []
            for file in Path(folder).glob("rank*.err"):
                header, _, text = file.read_text().partition("\n")
                stamp, rank = map(int, header.split())
                failed.append((stamp, rank, text))
            reports = [f"rank {r} raised:\n{text}" for _, r, text in sorted(failed)]
            raise RuntimeError("\n".join(reports)) from None
        finally:
            for process in workers.processes:
                if process.is_alive():
                    process.kill()
                    process.join()
        return [torch.load(Path(folder, f"rank{rank}.pt")) for rank in range(ranks)]


# The helper's own check: a failure on rank 1, while rank 0 waits for it at a
# barrier, comes back with its traceback and leaves no worker running.
def fails_on_rank_1(mesh):
    if dist.get_rank() == 1:
        raise ValueError("rank 1 gives up")
    dist.barrier()


try:
    run_on_ranks(fails_on_rank_1)
except RuntimeError as error:
    first_line = str(error).partition("\n")[0]
    assert first_line == "rank 1 raised:", error
    assert "ValueError: rank 1 gives up" in str(error), error
else:
    raise AssertionError("expected the failing experiment to raise")
assert not multiprocessing.active_children()
# sphinx_gallery_end_ignore
assert "fork" in multiprocessing.get_all_start_methods()

# %%
# Without a sharding rule
# -----------------------
#
# The first experiment shards ``x`` by rows, ``Shard(0)``, and calls
# ``row_normalize`` on it. ``distribute_tensor`` does not cut up each
# rank's own tensor: it sends each rank its rows of rank 0's tensor (its
# ``src_data_rank`` is 0 by default). The experiment checks this with a
# tensor that differs between ranks. Every rank still builds ``x`` from the
# same seed, so that this process can compare results with its own ``x``.


def same_x():
    torch.manual_seed(0)
    return torch.randn(6, 4)


def call_without_rule(mesh):
    own = torch.full((2, 1), float(dist.get_rank()))  # 0s on rank 0, 1s on rank 1
    received = distribute_tensor(own, mesh, [Shard(0)]).to_local()
    sharded = distribute_tensor(same_x(), mesh, [Shard(0)])
    builtin = (sharded * sharded).sum(dim=1).full_tensor()  # built-in operators
    try:
        row_normalize(sharded)
    except NotImplementedError as error:
        return (
            f"{type(error).__name__}: {str(error).splitlines()[0]}",
            builtin,
            received,
        )
    return "no error", builtin, received


(message_0, builtin, _), (message_1, _, received) = run_on_ranks(call_without_rule)
print(f"rank 0: {message_0}\nrank 1: {message_1}")
print(f"rank 1 received rank 0's values: {received.flatten().tolist()}")
torch.testing.assert_close(received, torch.zeros(1, 1))
torch.testing.assert_close(same_x(), x)
torch.testing.assert_close(builtin, expected["row_sq_norms"])
assert message_0 == message_1
assert "does not have a sharding strategy registered" in message_0

# %%
# Rank 1 received a row of rank 0's tensor, not of its own. Both ranks
# raised the same ``NotImplementedError``, which names the
# operator as DTensor sees it, ``shard_demo.row_normalize.default``; the
# built-in multiplication and sum on the same DTensor ran fine. DTensor
# has no idea whether normalizing a block of rows, or a block of columns,
# gives the right piece of the answer; a rule tells it.
#
# A rule is a list of what the kernel can do locally
# --------------------------------------------------
#
# ``register_sharding`` takes the operator's overload and decorates a
# function with the same arguments. The function returns a list of pairs: the
# placements of the outputs, and the placements the inputs must have for the
# local kernel to compute exactly that. Here is a tempting rule, the one for
# elementwise operators: whatever the input's sharding, the output has the
# same. It is wrong for ``row_normalize``, and we register it on purpose.


def same_as_input(x):
    return [
        ([Replicate()], [Replicate()]),
        ([Shard(0)], [Shard(0)]),
        ([Shard(1)], [Shard(1)]),  # wrong: a row's length needs all columns
    ]


register_sharding(torch.ops.shard_demo.row_normalize.default)(same_as_input)

# %%
# Each experiment from here on tries one operator on the three placements of
# ``x`` and reports, for each, the output's placement, the collectives
# counted by ``CommDebugMode`` during the call, and the whole result,
# gathered with ``full_tensor()`` after the count. Each rank also reports
# which elements of ``x`` and of the output it holds, for the figure at the
# end.

PLACEMENTS = {"Shard(0)": Shard(0), "Shard(1)": Shard(1), "Replicate()": Replicate()}


def try_placements(op):
    def experiment(mesh):
        report = {}
        for name, placement in PLACEMENTS.items():
            sharded = distribute_tensor(same_x(), mesh, [placement])
            with CommDebugMode() as comms:
                out = op(sharded)
            report[name] = {
                "output": repr(out.placements[0]),
                "collectives": {
                    str(collective).split(".")[-1]: count
                    for collective, count in comms.get_comm_counts().items()
                },
                "result": out.full_tensor(),
                "local_in": sharded.to_local(),
                "local_out": out.to_local(),
            }
        return report

    return experiment


def summarize(op_name, reports):
    for name, row in reports[0].items():
        matches = torch.allclose(row["result"], expected[op_name])
        print(
            f"{name:>12} -> {row['output']:<14} collectives {row['collectives']}, "
            f"matches the unsharded result: {matches}"
        )


wrong = run_on_ranks(try_placements(row_normalize))
summarize("row_normalize", wrong)
assert wrong[0]["Shard(1)"]["output"] == "Shard(dim=1)"
assert not torch.allclose(wrong[0]["Shard(1)"]["result"], expected["row_normalize"])
for name in ("Shard(0)", "Replicate()"):
    torch.testing.assert_close(wrong[0][name]["result"], expected["row_normalize"])

# %%
# DTensor believed the rule. With the columns sharded, each rank normalized
# its half of every row by the length of that half, and the result came back
# wrong, with no error and no warning. DTensor does not check a rule against
# the kernel: the comparison with the unsharded result is the test, and it
# must cover every placement the rule lists.
#
# The correct rule leaves ``Shard(1)`` out. Registering again for the same
# operator replaces the rule, but only for calls DTensor has not decided yet
# in that process (we check this below). This process never calls the
# operator on DTensors and each experiment forks fresh workers, so each sees
# the latest rule.


@register_sharding(torch.ops.shard_demo.row_normalize.default)
def whole_rows(x):
    return [
        ([Replicate()], [Replicate()]),
        ([Shard(0)], [Shard(0)]),  # rows are independent of each other
    ]


fixed = run_on_ranks(try_placements(row_normalize))
summarize("row_normalize", fixed)
for row in fixed[0].values():
    torch.testing.assert_close(row["result"], expected["row_normalize"])
assert fixed[0]["Shard(0)"]["collectives"] == {}
assert fixed[0]["Shard(1)"]["collectives"] == {"all_gather_into_tensor": 1}
assert fixed[0]["Shard(1)"]["output"] == "Replicate()"


def register_after_a_call(mesh):
    columns = distribute_tensor(same_x(), mesh, [Shard(1)])
    before = repr(row_normalize(columns).placements[0])
    register_sharding(torch.ops.shard_demo.row_normalize.default)(same_as_input)
    return before, repr(row_normalize(columns).placements[0])


before, after = run_on_ranks(register_after_a_call)[0]
print(
    f"Shard(1) input: {before} with whole_rows; {after} after registering the old rule"
)
assert before == after == "Replicate()"

# %%
# All three placements now give the unsharded result. Row sharding costs
# nothing: each rank normalizes its own rows. For column sharding, the rule
# offers no local option, so DTensor first *redistributed* the input to a
# placement the rule accepts: one all-gather gave every rank the whole
# matrix, and the output came out replicated. That is correct but costs
# communication, which ``CommDebugMode`` makes visible.
#
# The last experiment registered the wrong rule again inside a worker, after
# a first call: the second call still used the decision cached for that
# input, ``Replicate()``. Register rules at import time, before any call.
#
# ``Partial``: postponing the reduction
# -------------------------------------
#
# ``row_sq_norms`` can do better with columns. The squared length of a row
# is a sum over its columns, so the sum of each rank's local result over the
# ranks is the answer: the output is ``Partial()``, and no communication is
# needed until someone asks for the total.


@register_sharding(torch.ops.shard_demo.row_sq_norms.default)
def row_sums(x):
    return [
        ([Replicate()], [Replicate()]),
        ([Shard(0)], [Shard(0)]),
        ([Partial()], [Shard(1)]),  # each rank sums its own columns
    ]


sums = run_on_ranks(try_placements(row_sq_norms))
summarize("row_sq_norms", sums)
for name, row in sums[0].items():
    torch.testing.assert_close(row["result"], expected["row_sq_norms"])
    assert row["collectives"] == {}, name
assert sums[0]["Shard(1)"]["output"] == "Partial(sum)"
halves = sums[0]["Shard(1)"]["local_out"] + sums[1]["Shard(1)"]["local_out"]
torch.testing.assert_close(halves, expected["row_sq_norms"])

# %%
# No placement needed a collective inside the operator. With ``Shard(1)``,
# each rank's local output is a full-length vector of partial sums, and the
# two add up to the answer; the all-reduce happened later, inside
# ``full_tensor()``, where it was needed.
#
# The figure shows who held what in the three ``row_sq_norms`` calls, and
# in the ``row_normalize`` call on ``Shard(1)`` that needed an all-gather:
# blue cells live on rank 0, orange on rank 1, grey on both; hatched cells
# are partial values that the two ranks must add. (The drawing helpers are
# hidden on the web page.)

# sphinx_gallery_start_ignore


def holder(global_tensor, locals_, partial):
    """0: rank 0 only, 1: rank 1 only, 2: both, 3: partial on both."""
    if partial:
        return np.full(global_tensor.shape, 3)
    held = [torch.isin(global_tensor, local).numpy() for local in locals_]
    return np.where(held[0] & held[1], 2, np.where(held[0], 0, 1))


def draw_grid(ax, codes, left):
    codes = codes.reshape(codes.shape[0], -1)
    colors = ["#4c78a8", "#f58518", "#bbbbbb", "#dddddd"]
    for (row, col), code in np.ndenumerate(codes):
        ax.add_patch(
            Rectangle(
                (left + col, -row - 1),
                1,
                1,
                facecolor=colors[code],
                edgecolor="white",
                hatch="//" if code == 3 else None,
            )
        )


def draw_call(ax, title, reports, op_name, name):
    row = reports[0][name]
    inputs = [reports[rank][name]["local_in"] for rank in range(2)]
    outputs = [reports[rank][name]["local_out"] for rank in range(2)]
    partial = row["output"].startswith("Partial")
    draw_grid(ax, holder(x, inputs, False), 0)
    draw_grid(ax, holder(expected[op_name], outputs, partial), 6)
    counts = row["collectives"].items()
    collectives = ", ".join(f"{n} {name}" for name, n in counts) or "no collectives"
    ax.annotate("", xy=(5.8, -3), xytext=(4.2, -3), arrowprops={"arrowstyle": "->"})
    ax.text(5, -6.6, collectives, ha="center", size=8)
    ax.set_title(f"{title}\nx as {name} -> {row['output']}", size=9)
    ax.set_xlim(-0.2, 10.2)
    ax.set_ylim(-7, 0.2)
    ax.set_aspect("equal")
    ax.set_axis_off()


# sphinx_gallery_end_ignore
fig, axes = plt.subplots(2, 2, figsize=(6.4, 5.2), layout="constrained")
for ax, name in zip(axes.flat, PLACEMENTS, strict=False):
    draw_call(ax, "row_sq_norms", sums, "row_sq_norms", name)
draw_call(axes[1, 1], "row_normalize", fixed, "row_normalize", "Shard(1)")
fig.legend(
    handles=[
        Patch(color="#4c78a8", label="rank 0"),
        Patch(color="#f58518", label="rank 1"),
        Patch(color="#bbbbbb", label="both ranks"),
        Patch(facecolor="#dddddd", hatch="//", label="partial sum on both"),
    ],
    loc="outside lower center",
    ncols=4,
    fontsize=8,
)
fig.suptitle("Where the input and the output of each call live", size=10)
plt.show()

# %%
# DTensor runs the fake kernel
# ----------------------------
#
# The checklist asked for a fake kernel before the rule. DTensor needs the
# shape and strides of the global output to build the output DTensor, and
# it learns them from the operator's fake kernel. An operator with a rule but
# no fake kernel fails on the first call:


@torch.library.custom_op("shard_demo::row_maxima", mutates_args=())
def row_maxima(x: Tensor) -> Tensor:
    return torch.from_numpy(x.detach().cpu().numpy().max(axis=1)).to(x.device)


register_sharding(torch.ops.shard_demo.row_maxima.default)(whole_rows)


def call_without_fake_kernel(mesh):
    try:
        row_maxima(distribute_tensor(same_x(), mesh, [Shard(0)]))
    except RuntimeError as error:
        causes = [error] + ([error.__cause__] if error.__cause__ else [])
        return [f"{type(e).__name__}: {e}" for e in causes]
    return ["no error"]


messages = run_on_ranks(call_without_fake_kernel)[0]
print(messages[0].splitlines()[0][:150])
chain = "\n".join(messages)
assert (
    "There was no fake impl registered for <CustomOpDef(shard_demo::row_maxima)>"
    in chain
)
assert ("Sharding propagation failed" in chain) == (RELEASE >= (2, 9))

# %%
# The error names what is missing, the fake kernel; from PyTorch 2.9
# DTensor adds a ``Sharding propagation failed`` line that names the operator
# and the input placements. The fix is a ``register_fake``, as for the other
# two operators.
#
# An operator that writes into an argument
# ----------------------------------------
#
# A kernel that writes into a buffer, declared with ``mutates_args`` and
# returning ``None``, has no output placements: its rule pairs an empty list
# of outputs with the inputs' placements. DTensor's rule machinery assumed at
# least one output before PyTorch 2.11 (issue #167219,
# :ref:`edge-sharding-no-output`), so this part of the page depends on the
# release. The first rule below looks like
# ``whole_rows``: both tensors replicated, or both sharded by rows. The
# experiment calls the operator with ``x`` sharded by rows and ``out`` in
# each of the three placements, and reports whether ``out`` received the
# sum.


@torch.library.custom_op("shard_demo::add_rows_into", mutates_args=("out",))
def add_rows_into(x: Tensor, out: Tensor) -> None:
    out.add_(x)


@add_rows_into.register_fake
def _(x, out):
    return None


@register_sharding(torch.ops.shard_demo.add_rows_into.default)
def rows_into_rows(x, out):
    return [([], [Replicate(), Replicate()]), ([], [Shard(0), Shard(0)])]


def accumulate(mesh):
    outcomes = {}
    for name, placement in PLACEMENTS.items():
        out = distribute_tensor(torch.ones(6, 4), mesh, [placement])
        try:
            add_rows_into(distribute_tensor(same_x(), mesh, [Shard(0)]), out)
        except (IndexError, RuntimeError) as error:
            outcomes[name] = f"{type(error).__name__}: {str(error).splitlines()[0]}"
        else:
            outcomes[name] = out.full_tensor()
    return outcomes


def verdicts(outcomes):
    """'written', 'unchanged', or the error, for each placement of out."""
    found = {}
    for name, outcome in outcomes.items():
        if not isinstance(outcome, Tensor):
            found[name] = outcome
        elif torch.allclose(outcome, x + 1):
            found[name] = "written"
        else:
            torch.testing.assert_close(outcome, torch.ones(6, 4))
            found[name] = "unchanged"
        print(f"out as {name:>12}: {found[name][:110]}")
    return found


WRITES_SUPPORTED = RELEASE >= (2, 11)
first = verdicts(run_on_ranks(accumulate)[0])
if WRITES_SUPPORTED:
    assert first == {
        "Shard(0)": "written",
        "Shard(1)": "unchanged",
        "Replicate()": "unchanged",
    }
else:
    failure = "IndexError" if RELEASE < (2, 9) else "RuntimeError"
    assert all(verdict.startswith(failure) for verdict in first.values())

# %%
# From PyTorch 2.11, with ``out`` sharded by rows, each rank added its rows
# into its own rows of ``out``, and the buffer holds the unsharded result.
# With ``out`` in any other placement, ``out`` still holds its ones, and
# nothing raised. DTensor knows which argument an operator writes into only
# for a few naming conventions (an in-place ``op_`` writes its first
# argument, an ``out=`` variant its keyword argument); ``add_rows_into``
# follows neither. So it treated ``out`` like any input: it redistributed
# ``out`` into a new tensor that matches the rule, and the kernel wrote into
# that temporary (:ref:`edge-dtensor-lost-write`). Earlier releases fail
# inside DTensor's rule machinery (an
# ``IndexError``, or on 2.9 and 2.10 a ``RuntimeError`` around it); there,
# return the result instead of writing into a buffer.
#
# The rule function receives each tensor argument's current placement (a
# ``DTensorSpec``, with ``placements``), so it can offer a single pair built
# from ``out``'s own placement: DTensor then moves ``x`` to ``out``, never
# ``out`` to ``x``. Registering it replaces the first rule:


@register_sharding(torch.ops.shard_demo.add_rows_into.default)
def as_out_is(x, out):
    (placement,) = out.placements  # one entry per mesh dimension
    return [([], [placement, placement])]


pinned = verdicts(run_on_ranks(accumulate)[0])
if WRITES_SUPPORTED:
    assert set(pinned.values()) == {"written"}
else:
    assert all(verdict.startswith(failure) for verdict in pinned.values())

# %%
# On releases that support such operators, every placement of ``out`` now
# receives the sum; DTensor moved ``x`` instead, which costs communication
# but keeps the write. Test a mutating operator with every placement of the
# argument it writes into, not only the one the rule was written for.
#
# Arguments that are not tensors
# ------------------------------
#
# ``register_sharding`` passes the operator's other arguments to the rule
# as they are, and the rule gives each of them the placement ``None``.
# ``normalize_along`` normalizes rows or columns, chosen by a ``bool``:
# normalizing rows allows row shards, normalizing columns allows column
# shards. ``normalize_dim`` does the same with an ``int`` dimension. Each
# rule counts its calls.


@torch.library.custom_op("shard_demo::normalize_along", mutates_args=())
def normalize_along(x: Tensor, by_rows: bool) -> Tensor:
    return x / x.norm(dim=1 if by_rows else 0, keepdim=True)


@torch.library.custom_op("shard_demo::normalize_dim", mutates_args=())
def normalize_dim(x: Tensor, dim: int) -> Tensor:
    return x / x.norm(dim=dim, keepdim=True)


normalize_along.register_fake(lambda x, by_rows: torch.empty_like(x))
normalize_dim.register_fake(lambda x, dim: torch.empty_like(x))
rule_calls = {"normalize_along": [], "normalize_dim": []}


@register_sharding(torch.ops.shard_demo.normalize_along.default)
def along_rule(x, by_rows):
    rule_calls["normalize_along"].append(by_rows)
    kept = Shard(0) if by_rows else Shard(1)  # the dimension not reduced
    return [([Replicate()], [Replicate(), None]), ([kept], [kept, None])]


@register_sharding(torch.ops.shard_demo.normalize_dim.default)
def dim_rule(x, dim):
    rule_calls["normalize_dim"].append(dim)
    kept = Shard(1 - dim)
    return [([Replicate()], [Replicate(), None]), ([kept], [kept, None])]


def both_settings(mesh):
    columns = distribute_tensor(same_x(), mesh, [Shard(1)])
    report = {}
    settings = {
        "normalize_along": (normalize_along, (False, True)),
        "normalize_dim": (normalize_dim, (0, 1)),
    }
    for name, (op, values) in settings.items():
        for value in values:
            out = op(columns, value)
            right = torch.allclose(out.full_tensor(), op(same_x(), value))
            report[(name, value)] = (repr(out.placements[0]), right)
    return report, rule_calls


report, calls = run_on_ranks(both_settings)[0]
for (name, value), (placement, right) in report.items():
    print(f"{name}({value!r:>5}) on Shard(1): {placement:<14} correct: {right}")
print(f"rule calls: {calls}")
assert report[("normalize_along", False)] == ("Shard(dim=1)", True)
assert report[("normalize_along", True)] == ("Shard(dim=1)", False)
assert calls == {"normalize_along": [False], "normalize_dim": [0, 1]}
assert report[("normalize_dim", 1)] == ("Replicate()", True)

# %%
# The ``bool`` rule ran once. DTensor caches its decision per operator and
# input placements, and its cache key holds a non-tensor argument only from
# the first ``int`` argument on. So the call with ``by_rows=True`` reused
# the decision made for ``False``, ran the kernel on column shards, which
# the rule forbids for that value, and returned a wrong result without an
# error. The ``int`` version ran its rule for each value and got both right.
# If a rule depends on a ``bool``, ``float``, string or list, pass it as an
# ``int`` (or put an ``int`` argument before it;
# :ref:`edge-sharding-cache-non-int`).
#
# Meshes with more dimensions
# ---------------------------
#
# A rule describes one mesh dimension; on a 2-D mesh, as when data and
# tensor parallelism are combined, DTensor applies it to each dimension of
# the mesh. On a 2×2 mesh of four ranks, ``x`` sharded by rows on the first
# dimension and by columns on the second:


def on_2d_mesh(mesh):
    sharded = distribute_tensor(same_x(), mesh, [Shard(0), Shard(1)])
    with CommDebugMode() as comms:
        out = row_sq_norms(sharded)
    return out.placements, comms.get_total_counts(), out.full_tensor()


placements_2d, collectives_2d, result_2d = run_on_ranks(on_2d_mesh, (2, 2))[0]
print(
    f"row_sq_norms on (Shard(0), Shard(1)) -> {placements_2d}, "
    f"{collectives_2d} collectives"
)
assert placements_2d == (Shard(0), Partial()) and collectives_2d == 0
torch.testing.assert_close(result_2d, expected["row_sq_norms"])

# %%
# The row shards stayed row shards, the column shards gave partial sums,
# and no collective ran until ``full_tensor()``. Two more notes. An
# operator whose backward calls other custom operators needs a rule for each
# of those too, since DTensor meets them one by one. And where writing rules
# is not worth it, ``torch.distributed.tensor.experimental.local_map``
# (public, experimental) wraps a function that works on local tensors,
# with the placements you declare for its inputs and outputs.

assert hasattr(torch.distributed.tensor.experimental, "local_map")

# %%
# Conclusion
# ----------
#
# DTensor runs a custom operator on each rank's local piece only when a rule
# says which placements make that correct. Write the rule as a list of
# ``(outputs, inputs)`` placement pairs with ``register_sharding``, list only
# what the kernel computes exactly, and let DTensor redistribute the rest;
# use ``Partial`` when the kernel computes a piece of a sum. Never let it
# redistribute an argument the kernel writes into: build the pairs from that
# argument's own placement. Give a rule's non-tensor inputs ``None``, and
# make any it depends on an ``int``. DTensor trusts the rule completely, so
# test it the way this page does: with real ranks, for every placement,
# against the operator on the whole tensor.
#
# Previous: :ref:`sphx_glr_tutorials_custom_op_transforms.py`, for
# ``torch.func`` transforms. Next,
# :ref:`sphx_glr_tutorials_custom_op_troubleshooting.py` collects the errors
# you are most likely to meet with custom operators.
