"""
Sharp Edges: PyTorch Behaviours That Surprise Operator Authors
==============================================================

After this page you will be able to tell "my operator is wrong" from "I hit
a known PyTorch edge", know which releases have the edge, and work around
it. Some failures are not your bug: PyTorch itself drops a call, forgets a
tangent or reuses a stale decision. Each entry gives what you see, a repro
that runs in this build, the workaround and the upstream report.

.. grid:: 2

    .. grid-item-card:: :octicon:`mortar-board;1em;` What you will learn
       :class-card: card-prerequisites

       * Which PyTorch behaviours around custom operators fail silently or
         crash, and in which releases
       * A workaround for each that holds on every release
       * How to tell whether the release you have still has the edge

    .. grid-item-card:: :octicon:`list-unordered;1em;` Prerequisites
       :class-card: card-prerequisites

       * PyTorch 2.7 or later
       * :ref:`sphx_glr_tutorials_python_custom_ops.py`
       * :ref:`sphx_glr_tutorials_mutable_custom_ops.py`

.. admonition:: Checklist
   :class: checklist

   #. Look up the symptom in the table below and read its section.
   #. Apply the workaround; it holds on every release, fixed or not.
   #. Run the section's repro on your release: its last line says whether
      the edge is still there.

Release by release
------------------

Each repro below ends by printing ``sharp edge <name>: present`` (the
behaviour is still there), ``gone`` (this release behaves as it should) or
``not applicable`` (the feature is missing from this release). The version
matrix keeps that line for every release it runs the page on, and the
site's table of edges by release is built from those records, so a release
that fixes an edge shows up there as soon as the matrix has run it.

.. sharp-edges-table::
"""

# %%
# Setting up
# ----------
#
# The repros run on the CPU. ``edge`` prints the line the version matrix
# records.

import sys

import torch

if tuple(int(part) for part in torch.__version__.split(".")[:2]) < (2, 7):
    sys.exit(f"This page needs PyTorch 2.7 or later; this is {torch.__version__}.")

import json
import logging
import os
import signal
import socket
import subprocess
import tempfile
import textwrap
import warnings
from concurrent.futures import ThreadPoolExecutor

import matplotlib.pyplot as plt
import torch.autograd.forward_ad as forward_ad
import torch.distributed as dist
from torch import Tensor

torch.manual_seed(0)
devices = ["cpu"]
hardware = torch.cuda.get_device_name() if torch.cuda.is_available() else "no CUDA"
print(f"PyTorch {torch.__version__}; devices exercised: {devices} ({hardware})")
RELEASE = tuple(int(part) for part in torch.__version__.split(".")[:2])
# sphinx_gallery_start_ignore
# A notice that says nothing about the edges: the C++ compiler's search for
# CUDA, when AOTInductor compiles the package.
logging.getLogger("torch.utils.cpp_extension").setLevel(logging.ERROR)
# sphinx_gallery_end_ignore


def edge(name: str, present: bool | None, detail: str = "") -> None:
    """Print whether the edge ``name`` is still there (None: not applicable)."""
    status = {True: "present", False: "gone", None: "not applicable"}[present]
    print(f"sharp edge {name}: {status}" + (f" ({detail})" if detail else ""))


def first_line(error: BaseException) -> str:
    return f"{type(error).__name__}: {str(error).strip().splitlines()[0][:160]}"


def run_child(code: str, *args: str, env: dict | None = None, timeout=600):
    """Run ``code`` in a fresh Python process; (return code, stdout, stderr's
    lines), the return code None if it was killed after ``timeout`` seconds.
    Used where an edge needs a fresh process or may crash it. ``env`` adds
    variables to this process's environment, or removes those given as None."""
    environment = {**os.environ, **(env or {})}
    try:
        process = subprocess.run(
            [sys.executable, "-c", textwrap.dedent(code), *args],
            capture_output=True,
            text=True,
            env={k: v for k, v in environment.items() if v is not None},
            timeout=timeout,
        )
    except subprocess.TimeoutExpired as expired:
        stdout = (expired.stdout or b"").decode(errors="replace").strip()
        return None, stdout, [f"no answer after {timeout} s"]
    errors = [line for line in process.stderr.splitlines() if line.strip()]
    return process.returncode, process.stdout.strip(), errors or [""]


# %%
# .. _edge-maybe-out-index-error:
#
# An omitted optional ``out`` raises ``IndexError``
# -------------------------------------------------
#
# **What you see.** An operator declared with ``mutates_args={"out"}`` and
# ``out: Tensor | None = None`` raises ``IndexError: tuple index out of
# range`` from inside PyTorch when called *without* ``out``: the
# version-counter bookkeeping looks for the argument the caller left out.
#
# **Workaround.** Split it into two operators, one that allocates and one
# that writes into ``out``, and choose between them in a plain Python
# function (:ref:`sphx_glr_tutorials_mutable_custom_ops.py`).
#
# **Upstream.** `pytorch/pytorch#176078
# <https://github.com/pytorch/pytorch/issues/176078>`_.


@torch.library.custom_op("sharp_edges::double_maybe_out", mutates_args={"out"})
def double_maybe_out(x: Tensor, out: Tensor | None = None) -> Tensor:
    if out is None:
        return 2 * x
    out.copy_(2 * x)
    return out.clone()


x = torch.randn(5)
try:
    result = double_maybe_out(x)
except IndexError as error:
    print(f"without out: {first_line(error)}")
    edge("maybe-out-index-error", True)
else:
    torch.testing.assert_close(result, 2 * x)
    print("without out: works")
    edge("maybe-out-index-error", False)


@torch.library.custom_op("sharp_edges::double", mutates_args=())
def double(x: Tensor) -> Tensor:
    return 2 * x


@torch.library.custom_op("sharp_edges::double_out", mutates_args={"out"})
def double_out(x: Tensor, out: Tensor) -> None:
    out.copy_(2 * x)


def double_or_fill(x: Tensor, out: Tensor | None = None) -> Tensor:
    if out is None:
        return double(x)
    double_out(x, out)
    return out


buffer = torch.empty(5)
torch.testing.assert_close(double_or_fill(x), 2 * x)
assert double_or_fill(x, buffer) is buffer
torch.testing.assert_close(buffer, 2 * x)

# %%
# .. _edge-forward-ad-no-tangent:
#
# Forward-mode AD returns no tangent
# ----------------------------------
#
# **What you see.** ``torch.autograd.forward_ad`` through a custom
# operator returns ``None`` as the output's tangent, and ``torch.func.jvp``
# and ``jacfwd`` return zeros: no error, no warning.
# ``register_autograd`` registers a backward only, and ``custom_op`` has no
# forward-mode registration, so the tangent is dropped.
#
# **Workaround.** Wrap the operator in a ``torch.autograd.Function`` with a
# ``jvp`` (and ``setup_context``, so that ``torch.func`` accepts it), and
# call the wrapper wherever forward mode may run
# (:ref:`sphx_glr_tutorials_custom_op_transforms.py`). Test it with
# ``gradcheck(..., check_forward_ad=True)``.
#
# **Upstream.** No issue found; a forward-mode registration,
# ``register_jvp``, was drafted in `pytorch/pytorch#131116
# <https://github.com/pytorch/pytorch/pull/131116>`_ and closed.


@torch.library.custom_op("sharp_edges::triple", mutates_args=())
def triple(x: Tensor) -> Tensor:
    return 3 * x


@triple.register_fake
def _(x):
    return torch.empty_like(x)


triple.register_autograd(lambda ctx, grad: 3 * grad)

x = torch.randn(5, dtype=torch.float64)
direction = torch.ones(5, dtype=torch.float64)
with forward_ad.dual_level():
    output = triple(forward_ad.make_dual(x, direction))
    tangent = forward_ad.unpack_dual(output).tangent
print(f"forward_ad tangent of the bare operator: {tangent}")
if tangent is None:
    _, func_tangent = torch.func.jvp(triple, (x,), (direction,))
    assert not func_tangent.any() and not torch.func.jacfwd(triple)(x).any()
    print("torch.func.jvp and jacfwd: all zeros")
    edge("forward-ad-no-tangent", True)
else:
    torch.testing.assert_close(tangent, 3 * direction)
    edge("forward-ad-no-tangent", False)


class Tripled(torch.autograd.Function):
    """The operator, with the derivatives in both directions."""

    @staticmethod
    def forward(x):
        return triple(x)

    @staticmethod
    def setup_context(ctx, inputs, output):
        pass

    @staticmethod
    def backward(ctx, grad):
        return 3 * grad

    @staticmethod
    def jvp(ctx, x_tangent):
        return 3 * x_tangent


with forward_ad.dual_level():
    output = Tripled.apply(forward_ad.make_dual(x, direction))
    torch.testing.assert_close(forward_ad.unpack_dual(output).tangent, 3 * direction)
assert torch.autograd.gradcheck(
    Tripled.apply, (x.clone().requires_grad_(),), check_forward_ad=True
)
print("the wrapper: tangent 3 * direction, gradcheck with forward AD passes")

# %%
# .. _edge-func-grad-raises:
#
# ``torch.func.grad`` raises on a custom operator
# -----------------------------------------------
#
# **What you see.** ``torch.func.grad`` of a function that calls a custom
# operator with ``register_autograd`` raises a ``RuntimeError`` asking for
# an ``autograd.Function`` that overrides ``setup_context``: the function
# ``register_autograd`` builds behind the scenes lacks that form.
# ``torch.autograd.grad`` on the same operator works. ``vjp``, ``jacrev``
# and ``hessian`` fail the same way
# (:ref:`sphx_glr_tutorials_custom_op_transforms.py` tries each).
#
# **Workaround.** The same wrapper as above; its ``setup_context`` is what
# ``torch.func`` needs.
#
# **Upstream.** `pytorch/pytorch#168393
# <https://github.com/pytorch/pytorch/issues/168393>`_, reported again as
# #179652.

try:
    gradient = torch.func.grad(lambda x: triple(x).sum())(x)
except RuntimeError as error:
    assert "setup_context" in str(error)
    print(f"torch.func.grad: {first_line(error)}")
    edge("func-grad-raises", True)
else:
    torch.testing.assert_close(gradient, torch.full_like(x, 3.0))
    edge("func-grad-raises", False)
torch.testing.assert_close(
    torch.func.grad(lambda x: Tripled.apply(x).sum())(x), torch.full_like(x, 3.0)
)
leaf = x.clone().requires_grad_()
(autograd_gradient,) = torch.autograd.grad(triple(leaf).sum(), leaf)
torch.testing.assert_close(autograd_gradient, torch.full_like(x, 3.0))

# %%
# .. _edge-unbacked-minimum-two:
#
# ``create_unbacked_symint`` assumes at least two
# -----------------------------------------------
#
# **What you see.** A fake kernel that sizes a data-dependent output with
# the older ``ctx.create_unbacked_symint()`` works eagerly, but compiled or
# exported code fails with ``Runtime assertion failed for expression u0 >=
# 2`` whenever the real output has zero or one rows: that call gives the
# size a minimum of 2. torchvision's ``nms`` meets this
# (:ref:`sphx_glr_tutorials_check_your_operator.py`).
#
# **Workaround.** Use ``ctx.new_dynamic_size()``, whose minimum is 0.
#
# **Upstream.** No issue found; ``new_dynamic_size`` is the call that
# replaced it.


def positives_op(name: str, new_size):
    @torch.library.custom_op(f"sharp_edges::{name}", mutates_args=())
    def positives(x: Tensor) -> Tensor:
        return x[x > 0].clone()

    @positives.register_fake
    def _(x):
        return x.new_empty(new_size(torch.library.get_ctx()))

    return positives


def compiled_counts(op):
    """{number of positives: what the compiled call did}, one compilation."""
    torch._dynamo.reset()
    compiled = torch.compile(lambda x: op(x) + 1, backend="aot_eager", fullgraph=True)
    outcomes = {}
    for values in ([1.0, 2.0, -1.0], [1.0, -2.0, -1.0], [-1.0, -2.0, -3.0]):
        x = torch.tensor(values)
        try:
            torch.testing.assert_close(compiled(x), x[x > 0] + 1)
            outcomes[int((x > 0).sum())] = "ok"
        except RuntimeError as error:
            outcomes[int((x > 0).sum())] = first_line(error)
    return outcomes


# Dynamo's switch for operators whose output size depends on the data is off
# by default. Up to 2.9, a fullgraph compile of such an operator fails with
# it off, so the page turns it on there; from 2.10, Dynamo captures the
# operator under fullgraph=True with the switch still off.
assert not torch._dynamo.config.capture_dynamic_output_shape_ops
new_op = positives_op("positives_new", lambda ctx: ctx.new_dynamic_size())
switch_off = compiled_counts(new_op)
print(f"new_dynamic_size, capture_dynamic_output_shape_ops off: {switch_off}")
if RELEASE < (2, 10):
    assert all(
        outcome.startswith("Unsupported: Dynamic shape operator")
        for outcome in switch_off.values()
    ), switch_off
    torch._dynamo.config.capture_dynamic_output_shape_ops = True
else:
    assert set(switch_off.values()) == {"ok"}, switch_off

with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # the older call is deprecated
    old_op = positives_op("positives_old", lambda ctx: ctx.create_unbacked_symint())
    for values in ([1.0, -2.0], [-1.0, -2.0]):  # eagerly, any size works
        x = torch.tensor(values)
        torch.testing.assert_close(old_op(x), x[x > 0])
    old = compiled_counts(old_op)
for count, outcome in old.items():
    print(f"create_unbacked_symint, {count} positives: {outcome}")
assert old[2] == "ok"
small = [old[0], old[1]]
if all(">= 2" in outcome for outcome in small):
    edge("unbacked-minimum-two", True)
else:
    assert small == ["ok", "ok"], small
    edge("unbacked-minimum-two", False)
new = compiled_counts(new_op)
assert set(new.values()) == {"ok"}, new
print("new_dynamic_size: with 0, 1 and 2 positives the compiled call matches")

# %%
# .. _edge-decompositions-drop-call:
#
# ``run_decompositions`` drops a call that returns nothing
# --------------------------------------------------------
#
# **What you see.** An operator that returns nothing and mutates nothing (a
# logger, a callback) survives ``torch.export.export``: the exported
# program calls it. ``run_decompositions()``, which AOTInductor and other
# lowerings run, removes it as dead code, without an error.
#
# **Workaround.** From PyTorch 2.10, declare the side effect with
# ``register_effect`` (:ref:`sphx_glr_tutorials_custom_op_side_effects.py`);
# before that, give the operator an output that the program uses.
#
# **Upstream.** Expected, by the schema's rules: nothing marks the call as
# needed. `pytorch/pytorch#129680
# <https://github.com/pytorch/pytorch/pull/129680>`_ kept such calls alive
# once they carry an effect token.

journal: list[int] = []


@torch.library.custom_op("sharp_edges::note", mutates_args=())
def note(x: Tensor) -> None:
    journal.append(x.shape[0])


@note.register_fake
def _(x):
    return None


class Noting(torch.nn.Module):
    def forward(self, x):
        note(x)
        return x.sin()


def calls_to(program, op) -> int:
    return sum(node.target == op for node in program.graph.nodes)


program = torch.export.export(Noting(), (torch.randn(4),))
journal.clear()
program.module()(torch.randn(4))
assert calls_to(program, torch.ops.sharp_edges.note.default) == 1 and journal == [4]
decomposed = program.run_decompositions()
journal.clear()
decomposed.module()(torch.randn(4))
kept = calls_to(decomposed, torch.ops.sharp_edges.note.default)
print(f"exported: 1 call; after run_decompositions: {kept} calls, journal {journal}")
edge("decompositions-drop-call", kept == 0 and journal == [])


def journal_after_decompositions(op) -> list[int]:
    """What reaches ``journal`` when the decomposed program of a model that
    calls ``op`` runs (an output of ``op`` is added to the model's)."""

    class Model(torch.nn.Module):
        def forward(self, x):
            noted = op(x)
            return x.sin() if noted is None else x.sin() + noted

    decomposed = torch.export.export(Model(), (torch.randn(4),)).run_decompositions()
    journal.clear()
    decomposed.module()(torch.randn(4))
    return list(journal)


@torch.library.custom_op("sharp_edges::note_and_return", mutates_args=())
def note_and_return(x: Tensor) -> Tensor:
    journal.append(x.shape[0])
    return x.new_zeros(())


@note_and_return.register_fake
def _(x):
    return x.new_empty(())


assert journal_after_decompositions(note_and_return) == [4]
print("an operator whose output the program uses: kept")
if hasattr(torch.library, "EffectType"):

    @torch.library.custom_op("sharp_edges::note_declared", mutates_args=())
    def note_declared(x: Tensor) -> None:
        journal.append(x.shape[0])

    @note_declared.register_fake
    def _(x):
        return None

    note_declared.register_effect(torch.library.EffectType.ORDERED)
    assert journal_after_decompositions(note_declared) == [4]
    print("an operator with a declared effect: kept")

# %%
# .. _edge-autograd-cache-effects:
#
# The compile cache ignores an effect declaration
# -----------------------------------------------
#
# **What you see.** You add ``register_effect`` to an operator that has been
# compiled before, and the compiled program still drops its calls, in every
# new process. The AOTAutograd cache keys a program by Dynamo's graph, which
# the declaration does not change, so the program compiled before the
# declaration is loaded again. Turning the cache off for one run
# (``TORCHINDUCTOR_AUTOGRAD_CACHE=0``) does not remove that entry.
#
# **Workaround.** After adding a declaration, delete the compile cache once
# (``TORCHINDUCTOR_CACHE_DIR``, by default ``torchinductor_<user>`` in the
# temporary folder) and any remote cache.
#
# **Upstream.** No issue found for effects; `pytorch/pytorch#144344
# <https://github.com/pytorch/pytorch/issues/144344>`_ reports the same for
# a changed backward.
#
# The repro runs in two new processes that share a cache folder, each
# printing how many calls reached the operator. The first compiles the
# operator without the declaration. The second declares it and compiles
# three times, each after ``torch.compiler.reset()``, so that it looks in
# the folder as a new process would: with the AOTAutograd cache switched
# off (``enable_autograd_cache``, the switch that
# ``TORCHINDUCTOR_AUTOGRAD_CACHE=0`` sets, as
# :ref:`sphx_glr_tutorials_custom_op_side_effects.py` shows), with it on
# again, and after deleting the folder.

NOTE_IN_A_CHILD = """
import shutil
import sys

import torch
import torch._functorch.config as functorch_config  # private: the cache switch

journal = []


@torch.library.custom_op("sharp_edges::child_note", mutates_args=())
def child_note(x: torch.Tensor) -> None:
    journal.append(x.shape[0])


@child_note.register_fake
def _(x):
    return None


# A matrix product, which Inductor hands to a library: no C++ kernel to
# compile, even in an empty cache.
def noted_product(x):
    child_note(x)
    return x @ x


def calls(autograd_cache=True):
    torch.compiler.reset()  # forget this process's compiles: read the folder
    journal.clear()
    with functorch_config.patch(enable_autograd_cache=autograd_cache):
        torch.compile(noted_product, fullgraph=True)(torch.randn(3, 3))
    return len(journal)


if sys.argv[1] == "undeclared":
    print(calls())
else:
    child_note.register_effect(torch.library.EffectType.ORDERED)
    off, on = calls(autograd_cache=False), calls()
    shutil.rmtree(sys.argv[2])  # the workaround: delete the cache folder
    print(off, on, calls())
"""


def calls_in_a_child(kind: str, cache: str) -> list[int]:
    """Run NOTE_IN_A_CHILD in a new process: how many calls reached the op,
    compile by compile."""
    # The variable would override the switch the child sets.
    settings = {"TORCHINDUCTOR_CACHE_DIR": cache, "TORCHINDUCTOR_AUTOGRAD_CACHE": None}
    code, out, errors = run_child(NOTE_IN_A_CHILD, kind, cache, env=settings)
    assert code == 0, errors[-1]
    return [int(calls) for calls in out.splitlines()[-1].split()]


if hasattr(torch.library, "EffectType"):
    with tempfile.TemporaryDirectory() as shared:
        (undeclared,) = calls_in_a_child("undeclared", shared)
        cache_off, same_cache, deleted = calls_in_a_child("declared", shared)
    runs = {
        "undeclared": undeclared,
        "declared, cache off": cache_off,
        "declared, same cache": same_cache,
        "declared, folder deleted": deleted,
    }
    for label, calls in runs.items():
        print(f"{label}: {calls} call(s) reached the operator")
    assert runs["undeclared"] == 0 and runs["declared, folder deleted"] == 1
    assert runs["declared, cache off"] == 1
    edge("autograd-cache-effects", runs["declared, same cache"] == 0)

    figure, axes = plt.subplots(figsize=(6.4, 3.0), layout="constrained")
    colours = ["#888", "#484", "#c44", "#484"]
    bars = axes.barh(list(runs), list(runs.values()), color=colours)
    axes.bar_label(bars)
    axes.invert_yaxis()
    axes.set_xlim(0, 1.4)
    axes.set_xticks([0, 1])
    axes.set_xlabel("calls that reached the operator (one expected)")
    axes.set_title("A stale compile cache hides the new declaration")
    plt.show()
else:
    edge("autograd-cache-effects", None, "register_effect arrived in 2.10")

# %%
# DTensor, on two ranks
# ---------------------
#
# The next three edges concern DTensor's sharding rules. One script tries
# all three, run as two processes that form a two-rank ``gloo`` group on
# this machine; rank 0 prints what it saw, and the cells after it read the
# verdicts. :ref:`sphx_glr_tutorials_custom_op_dtensor.py` explains the
# rules themselves.

DTENSOR_ON_TWO_RANKS = """
import json
import os

import torch
import torch.distributed as dist
from torch.distributed.tensor import DeviceMesh, Replicate, Shard, distribute_tensor
from torch.distributed.tensor.experimental import register_sharding

dist.init_process_group("gloo")
mesh = DeviceMesh("cpu", [0, 1])
torch.manual_seed(0)
seen = {"rule_calls": {}, "chosen": {}}


def scale_op(name, switch_type):
    qualname = f"sharp_edges::{name}"
    torch.library.define(qualname, f"(Tensor x, {switch_type} along_rows) -> Tensor")
    torch.library.impl(qualname, "cpu")(lambda x, along_rows: 2 * x)
    torch.library.register_fake(qualname)(lambda x, along_rows: torch.empty_like(x))
    op = getattr(torch.ops.sharp_edges, name).default
    seen["rule_calls"][name] = []

    @register_sharding(op)
    def rule(x, along_rows):
        seen["rule_calls"][name].append(along_rows)
        allowed = Shard(0) if along_rows else Shard(1)
        return [([allowed], [allowed, None]), ([Replicate()], [Replicate(), None])]

    return op


columns = distribute_tensor(torch.randn(4, 4), mesh, [Shard(1)])
for name, switch_type, values in (
    ("scale_bool", "bool", (False, True)),
    ("scale_float", "float", (0.0, 1.0)),
    ("scale_int", "int", (0, 1)),
):
    op = scale_op(name, switch_type)
    seen["chosen"][name] = [str(op(columns, value).placements[0]) for value in values]


def add_into_op(name, rule):
    @torch.library.custom_op(f"sharp_edges::{name}", mutates_args=("out",))
    def add_into(x: torch.Tensor, out: torch.Tensor) -> None:
        out.add_(x)

    @add_into.register_fake
    def _(x, out):
        return None

    register_sharding(getattr(torch.ops.sharp_edges, name).default)(rule)
    return add_into


def outcome(op, placement):
    ones = distribute_tensor(torch.ones(4, 4), mesh, [Shard(0)])
    out = distribute_tensor(torch.zeros(4, 4), mesh, [placement])
    try:
        op(ones, out)
    except (IndexError, RuntimeError) as error:
        cause = error if isinstance(error, IndexError) else error.__cause__
        first = str(error).strip().splitlines()[0][:100]
        return f"{type(error).__name__} ({type(cause).__name__}): {first}"
    whole = out.full_tensor()
    if torch.equal(whole, torch.ones(4, 4)):
        return "written"
    return "unchanged" if torch.equal(whole, torch.zeros(4, 4)) else "other values"


rows_only = add_into_op("add_into", lambda x, out: [([], [Shard(0), Shard(0)])])
pinned = add_into_op(
    "add_into_pinned", lambda x, out: [([], [out.placements[0], out.placements[0]])]
)
places = {"Shard(0)": Shard(0), "Replicate()": Replicate(), "Shard(1)": Shard(1)}
seen["rows_only"] = {name: outcome(rows_only, p) for name, p in places.items()}
seen["pinned"] = {name: outcome(pinned, p) for name, p in places.items()}
if dist.get_rank() == 0:
    print(json.dumps(seen), flush=True)
dist.barrier()
# Leave without tearing the group down: on 2.10 the teardown aborts
# ("terminate called without an active exception").
os._exit(0)
"""


def run_on_two_ranks(code: str) -> str:
    """Run ``code`` as ranks 0 and 1 of a ``gloo`` group; rank 0's output."""
    with socket.socket() as probe:  # a free port for the group to meet on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    group = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "WORLD_SIZE": "2"}
    ranks = [
        subprocess.Popen(
            [sys.executable, "-c", code],
            env={**os.environ, **group, "RANK": str(rank)},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for rank in (0, 1)
    ]
    outputs = [rank.communicate(timeout=600) for rank in ranks]
    for rank, (_, errors) in zip(ranks, outputs, strict=True):
        assert rank.returncode == 0, errors.strip().splitlines()[-1:]
    return outputs[0][0]


if dist.is_available():
    seen = json.loads(run_on_two_ranks(DTENSOR_ON_TWO_RANKS).splitlines()[-1])

# %%
# .. _edge-sharding-cache-non-int:
#
# A sharding rule's decision is reused across values of a non-``int`` argument
# ------------------------------------------------------------------------------
#
# **What you see.** A rule registered with ``register_sharding`` that
# depends on an argument other than an ``int`` (the repro tries ``bool`` and
# ``float``) runs once; its decision is reused for every other value of
# that argument, so the kernel can run on shards the rule forbids for that
# value. An ``int`` argument gets a fresh decision for each value.
#
# **Workaround.** Pass the switch as an ``int`` (``0`` or ``1``), or make
# the rule independent of it.
#
# **Upstream.** No issue found; `pytorch/pytorch#171248
# <https://github.com/pytorch/pytorch/pull/171248>`_ proposed choosing the
# cached arguments.

if dist.is_available():
    rule_calls, chosen = seen["rule_calls"], seen["chosen"]
    for name, outputs in chosen.items():
        print(f"{name}: outputs {outputs}, rule ran for {rule_calls[name]}")
    assert chosen["scale_int"] == ["S(1)", "R"]  # str() of Shard(1), Replicate()
    assert rule_calls["scale_int"] == [0, 1]
    reused = [
        name
        for name in ("scale_bool", "scale_float")
        if len(rule_calls[name]) == 1 and chosen[name] == ["S(1)"] * 2
    ]
    if reused:
        edge("sharding-cache-non-int", True, f"reused by {', '.join(reused)}")
    else:
        assert chosen["scale_bool"] == chosen["scale_float"] == chosen["scale_int"]
        edge("sharding-cache-non-int", False)
else:
    edge("sharding-cache-non-int", None, "torch.distributed is not available")

# %%
# Where the decision was reused, ``along_rows`` true still gave a
# column-sharded output: the kernel ran on column shards, which the rule
# allows only for false. The ``int`` operator got a fresh decision.
#
# .. _edge-sharding-no-output:
#
# A sharding rule for an operator that returns nothing fails
# ----------------------------------------------------------
#
# **What you see.** Calling a DTensor operator whose sharding rule has no
# output placements (an operator that only writes into ``out`` and returns
# ``None``) raises ``IndexError: list index out of range`` from DTensor's
# rule machinery (on 2.9 and 2.10 inside a ``RuntimeError``, "Sharding
# propagation failed").
#
# **Workaround.** On the releases that have it, write the operator
# functionally: a rule with output placements works on every release, as
# the previous repro shows.
#
# **Upstream.** `pytorch/pytorch#167219
# <https://github.com/pytorch/pytorch/issues/167219>`_.

if dist.is_available():
    rows_into_rows = seen["rows_only"]["Shard(0)"]
    print(f"add_into with x and out sharded by rows: {rows_into_rows}")
    if rows_into_rows.startswith(("IndexError", "RuntimeError (IndexError)")):
        edge("sharding-no-output", True)
    else:
        assert rows_into_rows == "written", rows_into_rows
        edge("sharding-no-output", False)
else:
    edge("sharding-no-output", None, "torch.distributed is not available")

# %%
# .. _edge-dtensor-lost-write:
#
# A write into a redistributed argument is lost
# ---------------------------------------------
#
# **What you see.** An operator that writes into an argument, called on a
# DTensor whose placement the rule does not list, returns normally and
# leaves the argument unchanged. DTensor redistributes the argument to a
# placement the rule allows, the kernel writes into that copy, and the copy
# is thrown away.
#
# **Workaround.** Make the rule pin the written argument where it already
# is: the rule receives its current placement, so it can return strategies
# that keep it, as ``add_into_pinned``'s rule above does
# (:ref:`sphx_glr_tutorials_custom_op_dtensor.py`). Or return the result
# instead of writing it.
#
# **Upstream.** No issue found.

if dist.is_available() and seen["rows_only"]["Shard(0)"] == "written":
    print(f"rows-only rule, by placement of out: {seen['rows_only']}")
    print(f"pinned rule, by placement of out:    {seen['pinned']}")
    assert set(seen["pinned"].values()) == {"written"}
    assert set(seen["rows_only"].values()) <= {"written", "unchanged"}
    lost = [name for name, got in seen["rows_only"].items() if got == "unchanged"]
    edge(
        "dtensor-lost-write", bool(lost), f"lost for {', '.join(lost)}" if lost else ""
    )
elif dist.is_available():
    edge("dtensor-lost-write", None, "no rule for an operator without outputs")
else:
    edge("dtensor-lost-write", None, "torch.distributed is not available")

# %%
# .. _edge-aoti-unchecked-shapes:
#
# An AOTInductor package accepts shapes it was not compiled for
# -------------------------------------------------------------
#
# **What you see.** A package exported for a fixed shape, called with
# another, runs without an error. Its generated loops still cover the
# compiled shape: with more rows, only the rows it was compiled for come out
# right; with fewer, the loops write past the end of the smaller tensors
# that an operator returned, which corrupts the heap: the process usually
# dies, and can hang. The generated code checks its inputs only when
# ``AOTI_RUNTIME_CHECK_INPUTS=1`` is set in the environment of the process
# that loads it.
#
# **Workaround.** Deploy with ``AOTI_RUNTIME_CHECK_INPUTS=1``, and export
# with ``torch.export.Dim`` for every size that varies
# (:ref:`sphx_glr_tutorials_aot_inductor_custom_ops.py`).
#
# **Upstream.** `pytorch/pytorch#141115
# <https://github.com/pytorch/pytorch/issues/141115>`_.
#
# The package, exported for 64 rows, calls a Python custom operator and then
# a generated loop. It is compiled here and called in two new processes, one
# with the check and one without. Each process calls it with more rows and
# then with fewer: that call comes last, since it may crash the process. Both
# processes register the same operator, which the package calls through
# Python.

DOUBLED = """
import torch


@torch.library.custom_op("sharp_edges::doubled", mutates_args=())
def doubled(x: torch.Tensor) -> torch.Tensor:
    return 2 * x


@doubled.register_fake
def _(x):
    return torch.empty_like(x)
"""
CALL_PACKAGE = (
    DOUBLED
    + """
import faulthandler
import sys

package, hang_seconds = sys.argv[1], float(sys.argv[2])
try:
    model = torch._inductor.aoti_load_package(package)
except AttributeError as error:
    print(f"the loader failed: {error}", flush=True)
    import torch._inductor.codecache  # the workaround

    model = torch._inductor.aoti_load_package(package)
for rows in map(int, sys.argv[3:]):
    # A line on each stream, so that the caller can tell the calls apart.
    print(f"call with {rows} rows", flush=True)
    print(f"call with {rows} rows", file=sys.stderr, flush=True)
    x = torch.randn(rows, 256)
    # A corrupted heap can deadlock the call: end the process if it hangs.
    faulthandler.dump_traceback_later(hang_seconds, exit=True)
    try:
        output = model(x)
    except RuntimeError:
        print("refused", flush=True)
        continue
    finally:
        faulthandler.cancel_dump_traceback_later()
    right = (output == (2 * x).relu() + 1).all(dim=1).sum()
    print(f"{int(right)} of {rows} rows right", flush=True)
"""
)
exec(DOUBLED)  # the same operator, registered in this process too
HANG_SECONDS = 60  # how long a call may take before it counts as hung


def by_call(lines: list[str]) -> dict[int, list[str]]:
    """A child's lines after each "call with N rows" line, by N."""
    calls: dict[int, list[str]] = {}
    for line in lines:
        if line.startswith("call with "):
            rows = int(line.split()[2])
            calls[rows] = []
        elif calls:
            calls[rows].append(line)
    return calls


def call_in_a_child(package: str, check: str | None) -> tuple[dict[int, str], str]:
    """Call the package with 100 rows, then 3, in one new process: what each
    call did, and the process's standard output."""
    # The loader unpacks the package into a new folder under TMPDIR and
    # deletes it when the loaded model is freed; a process that crashes or
    # hangs leaves it, so the child unpacks into the package's own folder,
    # which the ``with`` below deletes.
    settings = {"AOTI_RUNTIME_CHECK_INPUTS": check, "TMPDIR": os.path.dirname(package)}
    code, out, errors = run_child(
        CALL_PACKAGE, package, str(HANG_SECONDS), "100", "3", env=settings
    )
    printed, said_by_call = by_call(out.splitlines()), by_call(errors)
    ended = {}
    for rows in (100, 3):
        if rows not in printed:
            ended[rows] = "not reached"  # the call before it ended the process
            continue
        said_lines = said_by_call.get(rows) or errors[-1:]
        # The check's own message; up to 2.9 a generic "API call failed"
        # line follows it.
        said = next((line for line in said_lines if "unmatched" in line), None)
        said = said or said_lines[-1]
        if printed[rows]:  # the call returned, or was refused
            answer = printed[rows][-1]
            ended[rows] = f"refused: {said[:90]}" if answer == "refused" else answer
        elif any(line.startswith("Timeout (") for line in said_lines):
            ended[rows] = f"hung for {HANG_SECONDS} s, ended by faulthandler"
        elif code is None:
            ended[rows] = f"hung: {said}, killed"
        elif code < 0:
            ended[rows] = f"killed by {signal.Signals(-code).name}: {said[:80]}"
        else:
            ended[rows] = f"exit status {code}: {said[:90]}"
    return ended, out


class DoubledThenRelu(torch.nn.Module):
    def forward(self, x):
        return torch.ops.sharp_edges.doubled(x).relu() + 1


with tempfile.TemporaryDirectory() as folder:
    exported = torch.export.export(DoubledThenRelu(), (torch.randn(64, 256),))
    package = torch._inductor.aoti_compile_and_package(
        exported, package_path=os.path.join(folder, "doubled.pt2")
    )
    # The process that compiled the package loads it on every release.
    loaded_here = torch._inductor.aoti_load_package(package)
    torch.testing.assert_close(
        loaded_here(torch.ones(64, 256)), torch.full((64, 256), 3.0)
    )
    del loaded_here  # its unpacked copy goes with it; an exit may not free it
    ended, loader = {}, []
    checks = (None, "1")  # AOTI_RUNTIME_CHECK_INPUTS unset, and set
    with ThreadPoolExecutor() as pool:  # the two processes run side by side
        children = list(pool.map(call_in_a_child, [package] * 2, checks))
    for check, (calls, out) in zip(checks, children, strict=True):
        loader += [line for line in out.splitlines() if "loader failed" in line]
        setting = "unset" if check is None else check
        for rows, what in calls.items():
            ended[rows, check] = what
            print(f"{rows} rows, AOTI_RUNTIME_CHECK_INPUTS {setting}: {what}")
for rows in (100, 3):
    assert "unmatched dim value" in ended[rows, "1"], ended[rows, "1"]
# Fewer rows: the process died or hung, or the call returned; never an error.
assert ended[3, None].startswith(
    ("killed by", "hung", "3 of 3", "0 of 3", "1 of 3", "2 of 3")
)
if ended[100, None] == "64 of 100 rows right":
    edge("aoti-unchecked-shapes", True)
else:  # the call was refused, or the package followed the real shape
    assert (
        ended[100, None] == "100 of 100 rows right" or "unmatched" in ended[100, None]
    )
    edge("aoti-unchecked-shapes", False)

# %%
# .. _edge-aoti-load-fresh-process:
#
# ``aoti_load_package`` fails in a fresh process
# ----------------------------------------------
#
# **What you see.** In a process that has compiled nothing, loading a
# package with ``torch._inductor.aoti_load_package`` raises
# ``AttributeError: module 'torch._inductor' has no attribute 'codecache'``:
# the loader uses a module that nothing has imported yet. The process that
# compiled the package loads it fine (the repro above does), so the failure
# shows only where the package is deployed.
#
# **Workaround.** ``import torch._inductor.codecache`` before loading, as
# the child processes above do when the loader fails.
#
# **Upstream.** `pytorch/pytorch#173706
# <https://github.com/pytorch/pytorch/issues/173706>`_.

print(f"loader failures in the two child processes: {len(loader)}")
if loader:
    assert len(loader) == 2 and all("codecache" in line for line in loader), loader
edge("aoti-load-fresh-process", bool(loader))
