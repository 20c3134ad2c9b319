"""
Layouts, CUDA Graphs and Streams
================================

After this page you will be able to predict the memory layout of the tensors
your operator receives under ``torch.compile``, choose the operator tag that
states what your kernel needs, and prepare an operator for CUDA graphs and for
work on a side CUDA stream.

.. grid:: 2

    .. grid-item-card:: :octicon:`mortar-board;1em;` What you will learn
       :class-card: card-prerequisites

       * What Inductor promises about the strides of an operator's inputs,
         by default and with ``needs_exact_strides``,
         ``needs_fixed_stride_order``, ``flexible_layout`` and
         ``needs_contiguous_strides``
       * How the default changed between releases, and how to check yours
       * What ``Tag.cudagraph_unsafe`` does with ``mode="reduce-overhead"``
       * How an operator launches work on a side stream and synchronizes

    .. grid-item-card:: :octicon:`list-unordered;1em;` Prerequisites
       :class-card: card-prerequisites

       * PyTorch 2.7 or later; the page detects the tags that arrived later
         and says which parts ran
       * A CUDA GPU for the CUDA-graph and stream demonstrations (the page
         runs without one and says what it skipped)
       * Matplotlib
       * :ref:`sphx_glr_tutorials_fake_kernels_and_shapes.py`

.. admonition:: Checklist
   :class: checklist

   #. Decide what your kernel needs from its inputs' layout: nothing
      (``flexible_layout``), row-major (``needs_contiguous_strides``), the
      same stride order as in eager mode (``needs_fixed_stride_order``), or
      exactly eager's strides (``needs_exact_strides``, the default for
      custom operators since PyTorch 2.8).
   #. Pass the tag in ``torch.library.custom_op(..., tags=...)``, or in
      ``torch.library.define`` on releases whose ``custom_op`` has no
      ``tags`` argument.
   #. If the kernel reads host state, synchronizes, or must not be replayed
      from a capture, tag it ``torch.Tag.cudagraph_unsafe``.
   #. If the kernel uses a side stream, allocate its outputs on the current
      stream, make the side stream wait for the current one before it
      starts, and make the current stream wait for the side stream before
      returning.
   #. Test with inputs that are transposed, sliced and permuted, compiled
      and not.

Eager PyTorch hands an operator whatever tensor the caller made. Inside a
compiled graph, Inductor allocates the intermediate tensors itself and may
choose their memory layout. An operator tag tells Inductor how much freedom it
has. This page measures that freedom on the running release.
"""

# %%
# Setting up
# ----------
#
# Where CUDA's compiler is installed on a machine without a GPU, the setup
# also keeps a harmless notice of ``torch.utils.cpp_extension`` (``No CUDA
# runtime is found``) out of the output, and prints one line saying so.

import sys

import torch

if tuple(int(part) for part in torch.__version__.split(".")[:2]) < (2, 7):
    sys.exit(f"This page needs PyTorch 2.7 or later; this is {torch.__version__}.")

import inspect
import re
from pathlib import Path

import matplotlib.pyplot as plt
from torch._dynamo.backends.common import aot_autograd

RELEASE = tuple(int(part) for part in torch.__version__.split(".")[:2])
torch.manual_seed(0)
devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
hardware = torch.cuda.get_device_name() if torch.cuda.is_available() else "no CUDA"
print(f"PyTorch {torch.__version__}; devices exercised: {devices} ({hardware})")
# sphinx_gallery_start_ignore
# Inductor imports torch.utils.cpp_extension to compile CPU code. Where CUDA's
# compiler is installed but no GPU is visible, that import warns "No CUDA
# runtime is found" (PyTorch 2.7 prints it, later releases log it), which says
# nothing about this page. Import the module now with the notice caught.
import contextlib
import io
import logging

first_import = "torch.utils.cpp_extension" not in sys.modules
notices = []
logging.getLogger("torch.utils.cpp_extension").addFilter(notices.append)
with contextlib.redirect_stderr(io.StringIO()) as printed:
    from torch.utils import cpp_extension
logging.getLogger("torch.utils.cpp_extension").removeFilter(notices.append)
notice = printed.getvalue() + "".join(record.getMessage() for record in notices)
if first_import:
    nvcc_without_gpu = bool(cpp_extension.CUDA_HOME) and not torch.cuda.is_available()
    assert ("No CUDA runtime is found" in notice) == nvcc_without_gpu, notice
    assert not notice or bool(printed.getvalue()) == (RELEASE < (2, 8)), notice
if "No CUDA runtime is found" in notice:
    print(f"CUDA's compiler is installed ({cpp_extension.CUDA_HOME}), but no GPU:")
    print("  torch.utils.cpp_extension's 'No CUDA runtime is found' is kept out")
# sphinx_gallery_end_ignore

# %%
# ``aot_autograd`` comes from a private module; we use it once, to look at the
# forward graph AOTAutograd builds, the stage before Inductor, which no public
# API returns.
#
# An operator that sees the layout
# --------------------------------
#
# ``memory_order`` returns the elements of its input in the order they sit in
# memory, and the strides it received, with the storage offset last. It is a
# stand-in for any kernel that walks raw memory, such as C code handed a data
# pointer: its first output depends on the layout, not only on the values.


def memory_order_kernel(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    addresses = torch.zeros((), dtype=torch.int64, device=x.device)
    for size, stride in zip(x.shape, x.stride(), strict=True):
        step = torch.arange(size, device=x.device) * stride
        addresses = addresses.unsqueeze(-1) + step
    order = torch.argsort(addresses.flatten(), stable=True)
    layout = torch.tensor([*x.stride(), x.storage_offset()], device=x.device)
    return x.flatten()[order], layout


def memory_order_fake(x):
    return x.new_empty(x.numel()), x.new_empty(x.dim() + 1, dtype=torch.int64)


grid = torch.arange(24.0).reshape(4, 6)
values, layout = memory_order_kernel(grid.t())
print(f"grid.t(): strides {grid.t().stride()}, reported {layout.tolist()}")
print(f"in memory: {values[:8].tolist()} ...")
torch.testing.assert_close(values, grid.flatten())

# %%
# ``grid.t()`` is the transpose of a row-major 4 by 6 grid, so its memory
# holds the original rows one after another: reading memory gives back 0, 1,
# 2, ... even though the first row of ``grid.t()`` is 0, 6, 12, 18.
#
# One copy of the operator per tag
# --------------------------------
#
# We register the same kernel several times: twice without a tag, once with
# ``custom_op`` and once with ``torch.library.define`` (the Python twin of a
# C++ ``TORCH_LIBRARY`` definition), then once for each layout tag this
# release has. ``needs_exact_strides`` and ``needs_contiguous_strides`` arrived in
# PyTorch 2.8, as did the ``tags`` argument of ``custom_op``; where it is
# missing, the tagged copies use ``torch.library.define``, which takes tags
# on every release this page supports. A C++ operator takes them as a list
# after the schema, ``m.def("f(Tensor x) -> Tensor", {at::Tag::flexible_layout})``;
# the cell finds that signature of ``Library::def`` in PyTorch's header.

layout_tags = {
    name: getattr(torch.Tag, name)
    for name in (
        "needs_exact_strides",
        "needs_fixed_stride_order",
        "flexible_layout",
        "needs_contiguous_strides",
    )
    if hasattr(torch.Tag, name)
}
print(f"layout tags on this release: {list(layout_tags)}")
CUSTOM_OP_TAKES_TAGS = "tags" in inspect.signature(torch.library.custom_op).parameters
print(f"custom_op accepts tags=: {CUSTOM_OP_TAKES_TAGS}")
assert ("needs_exact_strides" in layout_tags) == (RELEASE >= (2, 8))
assert ("needs_contiguous_strides" in layout_tags) == (RELEASE >= (2, 8))
assert CUSTOM_OP_TAKES_TAGS == (RELEASE >= (2, 8))
library_h = Path(torch.__file__).parent / "include" / "torch" / "library.h"
cpp_def = r"raw_schema,\s*const std::vector<at::Tag>& tags = \{\}"
assert re.search(cpp_def, library_h.read_text())
print("torch/library.h: Library::def(schema, tags) takes a list of at::Tag")


def define_memory_order(name, tags):
    """The operator made with torch.library.define; returns its overload."""
    qualname = f"layouts::memory_order_{name}"
    torch.library.define(qualname, "(Tensor x) -> (Tensor, Tensor)", tags=tags)
    torch.library.register_kernel(qualname, ("cpu", "cuda"), memory_order_kernel)
    torch.library.register_fake(qualname, memory_order_fake)
    return getattr(torch.ops.layouts, f"memory_order_{name}").default


def custom_memory_order(name, tags):
    """The operator made with torch.library.custom_op; returns its overload."""
    qualname = f"layouts::memory_order_{name}"
    extra = {"tags": tags} if tags else {}
    op = torch.library.custom_op(
        qualname, memory_order_kernel, mutates_args=(), **extra
    )
    op.register_fake(memory_order_fake)
    return op._opoverload


probes = {
    "untagged": custom_memory_order("untagged", ()),
    "untagged, define": define_memory_order("untagged_define", ()),
}
for name, tag in layout_tags.items():
    make = custom_memory_order if CUSTOM_OP_TAKES_TAGS else define_memory_order
    probes[name] = make(name, (tag,))
for name, op in probes.items():
    print(f"{name:>24}: tags {[str(tag) for tag in op.tags]}")

# %%
# ``opcheck`` on the untagged copy, with an empty tensor, a transpose, a
# strided slice and a permuted tensor. (The probe has no backward formula, so
# no sample requires grad.)

for device in devices:
    block = torch.randn(2, 3, 4, device=device)
    for sample in (
        torch.randn(0, 3, device=device),
        block[0].t(),
        block[..., ::2],
        block.permute(2, 0, 1),
    ):
        verdicts = torch.library.opcheck(
            probes["untagged"], (sample,), raise_exception=False
        )
        assert all(v == "SUCCESS" for v in verdicts.values()), verdicts
print(f"opcheck passed for the untagged memory_order on {devices}")

# %%
# The default for an untagged custom operator is a configuration value.
# PyTorch 2.7 kept it in ``torch._inductor.config``, later releases in
# ``torch._functorch.config``; both modules are private, so we read the value
# only to print it and compare it with what we measure.

in_functorch = hasattr(torch._functorch.config, "custom_op_default_layout_constraint")
if in_functorch:
    default_tag = torch._functorch.config.custom_op_default_layout_constraint
else:
    default_tag = torch._inductor.config.custom_op_default_layout_constraint
print(f"default for untagged custom operators on this release: {default_tag}")
assert default_tag in layout_tags and in_functorch == (RELEASE >= (2, 8))
if RELEASE >= (2, 8):
    assert default_tag == "needs_exact_strides", default_tag
else:
    assert default_tag == "needs_fixed_stride_order", default_tag

# %%
# What the operator receives
# --------------------------
#
# Four producers make the operator's input inside a compiled function, each
# from the same 4 by 6 grid:
#
# * **transposed input**: ``grid.t()``, a view of the function's input;
# * **column-major sum**: ``grid.t() + bias``, a new tensor that eager mode
#   lays out like its first operand, column by column;
# * **strided slice**: ``(grid * 2)[:, ::2]``, every other column of a new
#   tensor, with gaps in memory;
# * **expanded row**: ``grid[:1].expand(4, 6) * 1``, a new, dense tensor whose
#   rows are all equal.
#
# Each is compiled with Inductor once per operator copy, and the strides each
# copy receives are compared with eager mode's.
#
# In the table each column is a producer and each row an operator copy
# (``define`` is the untagged copy made with ``torch.library.define``); a
# ``+n`` would be a storage offset.

bias = torch.randn(6, 4)
producers = {
    "transposed input": lambda g: g.t(),
    "column-major sum": lambda g: g.t() + bias,
    "strided slice": lambda g: (g * 2)[:, ::2],
    "expanded row": lambda g: g[:1].expand(4, 6) * 1,
}

seen = {}
for case, produce in producers.items():
    eager_values, eager_layout = probes["untagged"](produce(grid))
    seen[case] = {"eager": (eager_layout.tolist(), eager_values)}
    for name, op in probes.items():
        torch.compiler.reset()
        compiled = torch.compile(lambda g, op=op, produce=produce: op(produce(g)))
        values, layout = compiled(grid)
        seen[case][name] = (layout.tolist(), values)


def strides_text(layout):
    *strides, offset = layout
    return str(tuple(strides)) + (f"+{offset}" if offset else "")


short_names = {
    "eager": "eager",
    "untagged": "untagged",
    "untagged, define": "define",
    "needs_exact_strides": "exact",
    "needs_fixed_stride_order": "fixed order",
    "flexible_layout": "flexible",
    "needs_contiguous_strides": "contiguous",
}
short_cases = {
    "transposed input": "transposed",
    "column-major sum": "col-major sum",
    "strided slice": "strided slice",
    "expanded row": "expanded row",
}
print(f"{'':<12}" + "".join(f"{short_cases[case]:>15}" for case in seen))
for name in ["eager", *probes]:
    cells = "".join(f"{strides_text(seen[case][name][0]):>15}" for case in seen)
    print(f"{short_names[name]:<12}" + cells)

# %%
# The assertions below check, for every producer (every column of the
# table), the promises the tags make:
#
# * ``needs_exact_strides``: exactly eager's strides.
# * ``needs_fixed_stride_order``: the same order of strides (which dimension
#   is innermost, and so on) as in eager mode; Inductor may close gaps, so the
#   strides themselves can differ. One exception shows from PyTorch 2.14:
#   where eager mode made a dense copy of a broadcast row, Inductor passes
#   the broadcast view itself, with stride 0.
# * ``needs_contiguous_strides``: row-major.
# * untagged ``custom_op``: whatever the release's default tag promises.
# * untagged ``define``: either the same, or, on a release that applies the
#   default to ``custom_op`` operators only (PyTorch 2.7 does), the same as
#   ``flexible_layout``.
# * ``flexible_layout``: nothing.


def stride_order(layout):
    strides = layout[:-1]
    return sorted(range(len(strides)), key=lambda dim: strides[dim])


broadcast_producers = []
define_matches = {"the default": True, "flexible_layout": True}
for case, row in seen.items():
    eager_strides = row["eager"][0][:-1]
    if "needs_exact_strides" in row:
        assert row["needs_exact_strides"][0][:-1] == eager_strides, case
    fixed = row["needs_fixed_stride_order"][0]
    if 0 in fixed[:-1] and 0 not in eager_strides:
        broadcast_producers.append(case)
    else:
        assert stride_order(fixed) == stride_order(row["eager"][0]), case
    if "needs_contiguous_strides" in row:
        size = producers[case](grid).shape
        contiguous = list(torch.empty(size).stride())
        assert row["needs_contiguous_strides"][0][:-1] == contiguous, case
    assert row["untagged"][0][:-1] == row[default_tag][0][:-1], case
    define_strides = row["untagged, define"][0][:-1]
    define_matches["the default"] &= define_strides == row["untagged"][0][:-1]
    define_matches["flexible_layout"] &= (
        define_strides == row["flexible_layout"][0][:-1]
    )
assert define_matches["the default"] == (RELEASE >= (2, 8))
assert define_matches["flexible_layout"] or RELEASE >= (2, 8)
print(f"asserted: the tags keep their promises; untagged behaves as {default_tag}")
print(f"an untagged torch.library.define operator matches: {define_matches}")
print(
    "producers where needs_fixed_stride_order passed a broadcast view:",
    broadcast_producers,
)
assert broadcast_producers == (["expanded row"] if RELEASE >= (2, 14) else [])

# %%
# On this release the untagged ``custom_op`` copy behaves as the configured
# default says. The history: the default was ``needs_fixed_stride_order`` in
# PyTorch 2.7, where it reached only operators made by ``custom_op`` (an
# operator defined with ``torch.library.define`` or in C++ got a flexible
# layout), and has been ``needs_exact_strides`` for every custom operator
# since 2.8 (pytorch PR 150511, after issues 124647 and 137979). If the last
# line above lists a producer, ``needs_fixed_stride_order`` handed the operator a
# broadcast view there, several elements at one address: harmless for a
# kernel that only reads through the strides, wrong for one that writes into
# its input or gives the pointer to code expecting one element per address.
#
# What the differences mean
# -------------------------
#
# The first output of ``memory_order`` is the grid read in memory order. Where
# a copy received eager mode's strides, it returns eager mode's answer; where
# Inductor chose another layout, it returns something else, with no error.
# The lines below list, for each producer, the copies whose result differs
# from eager mode's.

for case, row in seen.items():
    differs = [
        name for name in probes if not torch.equal(row[name][1], row["eager"][1])
    ]
    print(f"{case:<18} result differs from eager for: {differs or 'none'}")
    if "needs_exact_strides" in row:
        assert torch.equal(row["needs_exact_strides"][1], row["eager"][1])
flexible_differs = not torch.equal(
    seen["column-major sum"]["flexible_layout"][1],
    seen["column-major sum"]["eager"][1],
)
print(f"flexible_layout changed the column-major sum's layout: {flexible_differs}")
assert flexible_differs

# %%
# ``needs_exact_strides`` never differs. ``flexible_layout`` does: Inductor
# laid out the column-major sum row by row, the order its own kernel found
# convenient. For a kernel that honours strides, or that wants row-major
# memory anyway (tag it ``needs_contiguous_strides`` then), that is free
# speed. For a kernel that walks memory and was only ever tested in eager
# mode, it is a wrong answer that appears only when compiled.
#
# The figure draws, for the column-major sum (6 by 4) and the strided slice
# (4 by 3), which memory slot each element occupies in the tensor the
# operator received: eager mode's (which ``needs_exact_strides``
# reproduces) against Inductor's choice under ``flexible_layout`` and
# ``needs_fixed_stride_order``.


def slots(case, name):
    """The memory offset of every element, as the operator saw it."""
    *strides, offset = seen[case][name][0]
    shape = producers[case](grid).shape
    rows = torch.arange(shape[0]).unsqueeze(1) * strides[0]
    cols = torch.arange(shape[1]).unsqueeze(0) * strides[1]
    return rows + cols + offset


panels = [
    ("column-major sum", "eager"),
    ("column-major sum", "flexible_layout"),
    ("strided slice", "eager"),
    ("strided slice", "needs_fixed_stride_order"),
]
fig, axes = plt.subplots(2, 2, figsize=(7.2, 5.4), layout="constrained")
for ax, (case, name) in zip(axes.flat, panels, strict=True):
    offsets = slots(case, name)
    ax.imshow(offsets, cmap="Blues", vmin=-4, vmax=2 * int(offsets.max()) + 4)
    for (row, col), value in zip(
        torch.cartesian_prod(
            torch.arange(offsets.shape[0]), torch.arange(offsets.shape[1])
        ).tolist(),
        offsets.flatten().tolist(),
        strict=True,
    ):
        ax.text(col, row, str(value), ha="center", va="center", fontsize=9)
    ax.set_title(f"{case}\n{name}: strides {strides_text(seen[case][name][0])}")
    ax.set_xticks([])
    ax.set_yticks([])
fig.suptitle("Memory slot of each element, as handed to the operator")
plt.show()

# %%
# CUDA graphs and ``Tag.cudagraph_unsafe``
# ----------------------------------------
#
# ``torch.compile(mode="reduce-overhead")`` records the compiled graph's GPU
# work once as a CUDA graph and then replays the recording, without running
# the Python that launched it. An operator whose kernel reads host state at
# run time, synchronizes with the CPU, or allocates in ways a recording
# cannot repeat must not be recorded. ``torch.Tag.cudagraph_unsafe`` (PyTorch
# 2.8 and later) says so: Inductor then runs the operator eagerly, either by
# splitting the graph around it and recording the pieces (with graph
# partitioning, on by default since 2.9) or by not recording that graph at
# all. The code below checks both releases.
#
# ``add_step`` adds a number kept in a Python dictionary, read when the
# kernel runs: a host-side value that a recording would freeze. We define it
# twice, with and without the tag.

step = {"value": 1.0}


def add_step_kernel(x: torch.Tensor) -> torch.Tensor:
    return x + step["value"]


def add_step_fake(x):
    return torch.empty_like(x)


def save_nothing(ctx, inputs, output):
    pass


def pass_gradient(ctx, grad):
    return grad


HAS_CUDAGRAPH_TAG = hasattr(torch.Tag, "cudagraph_unsafe") and CUSTOM_OP_TAKES_TAGS
assert HAS_CUDAGRAPH_TAG == (RELEASE >= (2, 8))
add_step_ops = {}
if HAS_CUDAGRAPH_TAG:
    for label, tags in (
        ("untagged", ()),
        ("cudagraph_unsafe", (torch.Tag.cudagraph_unsafe,)),
    ):
        op = torch.library.custom_op(
            f"layouts::add_step_{label}", add_step_kernel, mutates_args=(), tags=tags
        )
        op.register_fake(add_step_fake)
        op.register_autograd(pass_gradient, setup_context=save_nothing)
        add_step_ops[label] = op
    unsafe_overload = add_step_ops["cudagraph_unsafe"]._opoverload
    print(
        f"tags of add_step_cudagraph_unsafe: {[str(t) for t in unsafe_overload.tags]}"
    )
    assert torch.Tag.cudagraph_unsafe in unsafe_overload.tags
    for device in devices:
        block = torch.randn(2, 3, 4, device=device)
        samples = (
            torch.randn(0, 3, device=device),
            block[0].t(),
            block[..., ::2],
            block.permute(2, 0, 1),
            torch.randn(5, device=device, requires_grad=True),
        )
        for op in add_step_ops.values():
            for sample in samples:
                verdicts = torch.library.opcheck(op, (sample,), raise_exception=False)
                assert all(v == "SUCCESS" for v in verdicts.values()), verdicts
    print(f"opcheck passed for both add_step operators on {devices}")
else:
    print("This release has no torch.Tag.cudagraph_unsafe: the section is skipped.")

# %%
# What the compiler records can be checked on any machine: the tag travels
# with the operator into the forward graph AOTAutograd builds for Inductor.
# The tagged operator's node carries it; its untagged twin's does not.
# Inductor's ``graph_partition`` setting (private configuration) decides
# which of the two strategies a GPU run uses.

if HAS_CUDAGRAPH_TAG:
    partition = getattr(torch._inductor.config, "graph_partition", False)
    print(f"Inductor graph partitioning on this release: {partition}")
    assert partition == (RELEASE >= (2, 9))
    graphs = []

    def keep_graph(graph_module, example_inputs):
        graphs.append(graph_module)
        return graph_module.forward

    for label, op in add_step_ops.items():
        graphs.clear()

        torch.compiler.reset()
        compiled = torch.compile(
            lambda x, op=op: op(x.sin()).cos(),
            backend=aot_autograd(fw_compiler=keep_graph),
        )
        x = torch.randn(8)
        torch.testing.assert_close(compiled(x), (x.sin() + step["value"]).cos())
        node = next(
            node
            for node in graphs[0].graph.nodes
            if node.op == "call_function" and "add_step" in str(node.target)
        )
        marked = torch.Tag.cudagraph_unsafe in node.target.tags
        print(f"{label:>16}: node {node.target}, marked cudagraph_unsafe: {marked}")
        assert marked == (label == "cudagraph_unsafe")

# %%
# On a GPU, the difference shows in the results. Each operator is compiled
# with ``mode="reduce-overhead"``; the first calls warm up and record, later
# calls replay. Then the host-side step changes. The recorded untagged
# operator keeps adding the old value; the tagged one runs each time and adds
# the new one.

if not torch.cuda.is_available():
    print("Skipped on this machine (no CUDA device): the CUDA-graph run.")
elif not HAS_CUDAGRAPH_TAG:
    print("Skipped on this release (no Tag.cudagraph_unsafe): the CUDA-graph run.")
else:
    x = torch.randn(1024, device="cuda")
    results = {}
    for label, op in add_step_ops.items():
        torch.compiler.reset()
        step["value"] = 1.0
        compiled = torch.compile(lambda t, op=op: op(t * 2) * 3, mode="reduce-overhead")
        for _ in range(3):
            torch.testing.assert_close(compiled(x), (x * 2 + 1.0) * 3)
        step["value"] = 5.0
        results[label] = compiled(x).clone()
    step["value"] = 1.0
    torch.testing.assert_close(results["untagged"], (x * 2 + 1.0) * 3)
    torch.testing.assert_close(results["cudagraph_unsafe"], (x * 2 + 5.0) * 3)
    print("CUDA graphs ran: the replayed untagged operator kept the old step;")
    print("the cudagraph_unsafe operator ran eagerly and used the new one")

# %%
# Work on a side stream
# ---------------------
#
# A kernel may launch its work on a CUDA stream of its own, to overlap with
# other work. The operator must then keep three rules, because the caller,
# the compiler and the caching allocator all assume the current stream:
#
# 1. the side stream waits for the current stream before reading the inputs;
# 2. the current stream waits for the side stream before the result is used;
# 3. the output is allocated on the current stream, before the switch.
#
# The third rule is about memory. The caching allocator hands a freed block
# to later work on the stream that allocated it. The inputs the caller made
# and an output made by rule 3 belong to the current stream, where rule 2
# orders all later work after the side stream's, so none of them needs
# ``record_stream``. An output allocated on the side stream would need
# ``out.record_stream(current)``: freed by the caller, its block could go to
# the side stream's next allocation while the current stream still reads it.
#
# On the CPU there are no streams and the kernel computes directly. The
# backward formula is ordinary PyTorch code and runs on the current stream.

side_streams = {}
side_stream_runs = {"count": 0}


def side_stream_for(device):
    if device not in side_streams:
        side_streams[device] = torch.cuda.Stream(device=device)
    return side_streams[device]


@torch.library.custom_op("layouts::scaled_softplus", mutates_args=())
def scaled_softplus(x: torch.Tensor, scale: float) -> torch.Tensor:
    if not x.dtype.is_floating_point:
        raise ValueError(f"x must be a floating-point tensor, got {x.dtype}")
    if x.device.type != "cuda":
        return torch.nn.functional.softplus(x) * scale
    side_stream_runs["count"] += 1
    current = torch.cuda.current_stream(x.device)
    side = side_stream_for(x.device)
    out = torch.empty_like(x)  # rule 3, on the current stream
    side.wait_stream(current)  # rule 1
    with torch.cuda.stream(side):
        torch.mul(torch.nn.functional.softplus(x), scale, out=out)
    current.wait_stream(side)  # rule 2
    return out


@scaled_softplus.register_fake
def _(x, scale):
    if not x.dtype.is_floating_point:
        raise ValueError(f"x must be a floating-point tensor, got {x.dtype}")
    return torch.empty_like(x)


def softplus_setup_context(ctx, inputs, output):
    x, scale = inputs
    ctx.scale = scale
    ctx.save_for_backward(x)


def softplus_backward(ctx, grad):
    (x,) = ctx.saved_tensors
    return grad * torch.sigmoid(x) * ctx.scale, None


scaled_softplus.register_autograd(
    softplus_backward, setup_context=softplus_setup_context
)

for device in devices:
    x = torch.randn(64, 32, device=device)
    expected = torch.nn.functional.softplus(x) * 0.5
    torch.testing.assert_close(scaled_softplus(x, 0.5), expected)
    torch.compiler.reset()
    compiled = torch.compile(lambda t: scaled_softplus(t + 1, 0.5) - 1)
    torch.testing.assert_close(
        compiled(x), torch.nn.functional.softplus(x + 1) * 0.5 - 1
    )
    samples = (
        torch.randn(0, 3, device=device),
        x.t(),
        x[:, ::2],
        torch.randn(2, 3, 4, device=device).permute(2, 0, 1),
        torch.randn(6, dtype=torch.float64, device=device, requires_grad=True),
    )
    for sample in samples:
        verdicts = torch.library.opcheck(
            scaled_softplus, (sample, 0.5), raise_exception=False
        )
        assert all(v == "SUCCESS" for v in verdicts.values()), verdicts
    leaf = torch.randn(6, dtype=torch.float64, device=device, requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: scaled_softplus(t, 0.5), (leaf,))
print(f"scaled_softplus matches eager and compiled, and trains, on {devices}")
print(f"the side stream was used: {bool(side_streams)}")
assert bool(side_streams) == torch.cuda.is_available()

# %%
# Such an operator can also be recorded in a CUDA graph: a fork to a side
# stream and a join back through ``wait_stream`` are what a recording can
# capture. On a GPU the cell compiles a call with ``mode="reduce-overhead"``
# and counts how often the kernel's Python code runs: after warm-up and
# recording, replays run none of it.

if torch.cuda.is_available():
    torch.compiler.reset()
    replayed = torch.compile(
        lambda t: scaled_softplus(t + 1, 0.5) - 1, mode="reduce-overhead"
    )
    x = torch.randn(64, 32, device="cuda")
    side_stream_runs["count"] = 0
    for _ in range(5):
        result = replayed(x)
        expected = torch.nn.functional.softplus(x + 1) * 0.5 - 1
        torch.testing.assert_close(result, expected)
    kernel_runs = side_stream_runs["count"]
    print(f"5 calls under reduce-overhead; the kernel's Python ran {kernel_runs}")
    assert 0 < kernel_runs < 5
else:
    print("Skipped on this machine (no CUDA device): the side stream in a CUDA graph.")

# %%
# Conclusion
# ----------
#
# Under ``torch.compile`` an operator receives tensors whose layout Inductor
# chose, within the limits of the operator's tag. Since PyTorch 2.8 an
# untagged custom operator gets eager mode's exact strides, which keeps
# compiled results equal to eager ones; ``needs_contiguous_strides`` suits a
# kernel that wants row-major memory and would otherwise copy;
# ``flexible_layout`` is for kernels that really handle any strides.
# ``Tag.cudagraph_unsafe`` keeps an operator out of CUDA graph recordings, and
# a kernel that uses a side stream must synchronize both ways and allocate
# its output on the current stream.
#
# Related pages:
#
# * :ref:`sphx_glr_tutorials_fake_kernels_and_shapes.py` for the fake kernels
#   that describe output layouts
# * :ref:`sphx_glr_tutorials_operator_signatures.py` for catching a fake
#   kernel that gets the output strides wrong
# * :ref:`sphx_glr_tutorials_custom_op_performance.py` for what a custom
#   operator costs per call
