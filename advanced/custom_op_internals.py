"""
Under the Hood of custom_op
===========================

``torch.library.custom_op`` looks like a plain decorator, but it leaves a
trail of entries in PyTorch's operator registry, the *dispatcher*. This page
follows that trail with the dispatcher's own query functions. Afterwards you
will be able to inspect any operator's registrations yourself and explain the
errors that come out of them.

.. grid:: 2

    .. grid-item-card:: :octicon:`mortar-board;1em;` What you will learn
       :class-card: card-prerequisites

       * How type hints become an operator schema
       * Which dispatch keys ``custom_op`` fills, and how to list them
       * What ``register_fake``, ``register_autograd`` and
         ``register_kernel`` change
       * How operator lifetimes work, and how to reuse a name
       * How ``torch.ops`` and the decorated function relate

    .. grid-item-card:: :octicon:`list-unordered;1em;` Prerequisites
       :class-card: card-prerequisites

       * PyTorch 2.7 or later
       * :ref:`sphx_glr_tutorials_python_custom_ops.py`

.. admonition:: Checklist
   :class: checklist

   #. Check the schema your type hints produce with
      ``torch.library.infer_schema`` before you decorate.
   #. List an operator's kernels with ``torch._C._dispatch_dump`` or
      ``torch._C._dispatch_has_kernel_for_dispatch_key``.
   #. Name every argument the kernel writes in ``mutates_args``, so that
      autograd's version counters stay honest.
   #. Expect ``register_fake`` and ``register_autograd`` to fill slots, and
      ``register_kernel``, ``register_vmap`` and ``register_autocast`` to add
      dispatch keys.
   #. Never call a handle kept from before an operator was redefined; pick a
      new name, or scope test libraries with ``_scoped_library``.

The ``torch._C._dispatch_*`` functions and other underscore names used here
are PyTorch's internal inspection tools: fine for looking around, not an API
to build on.
"""

# %%
# Setting up
# ----------

import sys

import torch

if tuple(int(part) for part in torch.__version__.split(".")[:2]) < (2, 7):
    sys.exit(f"This page needs PyTorch 2.7 or later; this is {torch.__version__}.")

import gc
import inspect
import math

import matplotlib.pyplot as plt
from torch import Tensor

torch.manual_seed(0)
devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
hardware = torch.cuda.get_device_name() if torch.cuda.is_available() else "no CUDA"
print(f"PyTorch {torch.__version__}; devices exercised: {devices} ({hardware})")
release = tuple(int(part) for part in torch.__version__.split(".")[:2])


def layouts(rows=3, cols=4, device="cpu", requires_grad=False):
    """The same kind of 2-D input in the layouts an operator must handle."""

    def make(*shape):
        return torch.randn(*shape, device=device)

    samples = {
        "row-major": make(rows, cols),
        "non-contiguous": make(rows, 2 * cols)[:, ::2],
        "permuted": make(cols, rows).t(),  # dense, but column-major
        "empty": make(0, cols),
    }
    return {k: v.requires_grad_(requires_grad) for k, v in samples.items()}


# %%
# From type hints to a schema
# ---------------------------
#
# Every operator in the dispatcher has a *schema*, a one-line signature such
# as ``(Tensor x, float factor) -> Tensor``. ``custom_op`` writes it from the
# type hints with ``torch.library.infer_schema``, which we call on a few
# signatures (never called, so their bodies are ``...``):


def scaled(x: Tensor, factor: float) -> Tensor: ...


def add_into(x: Tensor, out: Tensor) -> None: ...


def biased(
    x: Tensor, bias: Tensor | None = None, alpha: float = 1.0, mode: str = "sum"
) -> Tensor: ...


def mix(xs: list[Tensor], weights: list[float]) -> tuple[Tensor, Tensor]: ...


def reduce_dim(x: Tensor, *, dim: int = -1, keepdim: bool = False) -> Tensor: ...


def make_ramp(n: int, device: torch.device, dtype: torch.dtype) -> Tensor: ...


signatures = [
    (scaled, ()),
    (add_into, {"out"}),
    (biased, ()),
    (mix, ()),
    (reduce_dim, ()),
    (make_ramp, ()),
    (add_into, "unknown"),
]
schemas = {}
for function, mutates in signatures:
    schema = torch.library.infer_schema(function, mutates_args=mutates)
    schemas[function.__name__, str(mutates)] = schema
    print(f"{function.__name__}{inspect.signature(function)}")
    print(f"    mutates_args={mutates!r:10} ->  {schema}\n")

# %%
# Reading the table:
#
# * Python defaults become schema defaults (``float alpha=1.0``).
# * ``int`` becomes ``SymInt``: under ``torch.compile`` it may be a symbolic
#   size.
# * ``Tensor | None`` becomes ``Tensor?`` and ``list[Tensor]`` becomes
#   ``Tensor[]``; a tuple return becomes a list of returns, ``None`` ``()``.
# * ``torch.device`` and ``torch.dtype`` become ``Device`` and
#   ``ScalarType``; keyword-only arguments stay behind a ``*``.
# * An argument in ``mutates_args`` gets an *alias annotation* ending in
#   ``!``, "written to"; ``"unknown"`` marks every tensor that way.
#
# Parsing the schemas back confirms each point:

add_schema = torch._C.parse_schema("f" + schemas["add_into", "{'out'}"])
written = [arg.name for arg in add_schema.arguments if arg.alias_info is not None]
assert written == ["out"] and add_schema.arguments[1].alias_info.is_write
unknown_schema = torch._C.parse_schema("f" + schemas["add_into", "unknown"])
assert all(arg.alias_info.is_write for arg in unknown_schema.arguments)
assert "Tensor? bias=None" in schemas["biased", "()"]
assert 'float alpha=1.0, str mode="sum"' in schemas["biased", "()"]
assert schemas["mix", "()"] == "(Tensor[] xs, float[] weights) -> (Tensor, Tensor)"
assert schemas["add_into", "{'out'}"].endswith("-> ()")
assert "*, SymInt dim=-1, bool keepdim=False" in schemas["reduce_dim", "()"]
assert "Device device, ScalarType dtype" in schemas["make_ramp", "()"]
print("every schema reads back as described")

# %%
# What the decorator registers
# ----------------------------
#
# Now a real operator: ``internals::scale`` multiplies a tensor by a number,
# and rejects a non-finite one with a ``ValueError``.


def check_factor(factor: float) -> None:
    if not math.isfinite(factor):
        raise ValueError(f"factor must be a finite number, got {factor}")


@torch.library.custom_op("internals::scale", mutates_args=())
def scale(x: Tensor, factor: float) -> Tensor:
    check_factor(factor)
    return x * factor


registered_schema = str(torch.ops.internals.scale.default._schema)
print(registered_schema)
assert registered_schema == "internals::scale" + schemas["scaled", "()"]
try:
    scale(torch.ones(2), float("inf"))
except ValueError as error:
    print(f"{type(error).__name__}: {error}")
else:
    raise AssertionError("expected scale to reject an infinite factor")

# %%
# The registered schema is the one inferred for ``scaled``, with the name in
# front. ``torch._C._dispatch_dump`` lists the kernels, one per *dispatch
# key*: a slot the dispatcher consults depending on the arguments (device,
# whether autograd is recording, ...). We strip the file locations.


def kernel_lines(qualname: str) -> list[str]:
    """The dispatch keys with a kernel in ``_dispatch_dump``, without locations."""
    lines = []
    for line in torch._C._dispatch_dump(qualname).splitlines():
        key, found, _ = line.partition(": registered at ")
        if found and key != "debug":
            lines.append(key)
    return lines


scale_lines = kernel_lines("internals::scale")
print("\n".join(scale_lines))
assert set(scale_lines) == {
    "Meta",
    "Autograd[alias]",
    "CompositeExplicitAutograd[alias]",
}

# %%
# Three kernels, each with a job:
#
# * ``CompositeExplicitAutograd`` holds your function. It is an *alias* key,
#   standing for every backend without a kernel of its own.
# * ``Autograd`` (an alias for ``AutogradCPU``, ``AutogradCUDA``, ...) holds
#   ``custom_op``'s kernel that records the backward formula, then passes the
#   call on.
# * ``Meta`` forwards to the fake kernel, so meta tensors work.
#
# The dispatcher expands alias keys into a *computed* table: nothing is
# registered under ``CPU``, yet a CPU call finds a kernel.

for key in ("CPU", "CUDA", "AutogradCPU"):
    direct = torch._C._dispatch_has_kernel_for_dispatch_key("internals::scale", key)
    computed = torch._C._dispatch_has_computed_kernel_for_dispatch_key(
        "internals::scale", key
    )
    print(f"{key:<12} registered directly: {direct!s:<5}  found in table: {computed}")
    assert not direct and computed

# %%
# Different operators, different keys
# -----------------------------------
#
# What ``custom_op`` installs depends on the function. Four more operators:
# one that writes into its argument, one restricted to CPU, and two factories
# that take only a ``device``, ``ramp`` with ``device_types`` and
# ``ramp_anywhere`` without.


ad_inplace_excluded = []  # what the kernel sees; see the version counter below


@torch.library.custom_op("internals::fill_with", mutates_args={"x"})
def fill_with(x: Tensor, value: float) -> None:
    # Note whether the ADInplaceOrView key is switched off while the kernel runs.
    ad_inplace_excluded.append(
        torch._C._dispatch_tls_is_dispatch_key_excluded(
            torch._C.DispatchKey.ADInplaceOrView
        )
    )
    x.fill_(value)


@torch.library.custom_op("internals::cpu_double", mutates_args=(), device_types="cpu")
def cpu_double(x: Tensor) -> Tensor:
    return x * 2


def check_length(n: int) -> None:
    if n < 0:
        raise ValueError(f"n must be non-negative, got {n}")


@torch.library.custom_op("internals::ramp", mutates_args=(), device_types="cpu")
def ramp(n: int, device: torch.device) -> Tensor:
    check_length(n)
    return torch.arange(n, dtype=torch.float32, device=device)


@torch.library.custom_op("internals::ramp_anywhere", mutates_args=())
def ramp_anywhere(n: int, device: torch.device) -> Tensor:
    check_length(n)
    return torch.arange(n, dtype=torch.float32, device=device)


KEYS = [
    "CompositeExplicitAutograd",
    "CPU",
    "Meta",
    "Autograd",
    "ADInplaceOrView",
    "BackendSelect",
    "FuncTorchBatched",
    "AutocastCPU",
]


def registered_keys(qualname: str) -> set[str]:
    """The keys from KEYS under which ``qualname`` has a kernel of its own."""
    return {
        key
        for key in KEYS
        if torch._C._dispatch_has_kernel_for_dispatch_key(qualname, key)
    }


def print_key_table(columns: dict[str, set[str]]) -> None:
    """Print KEYS down the side, one column per entry, x where a kernel exists."""
    width = max(len(name) for name in columns) + 2
    print(f"{'dispatch key':<26}" + "".join(f"{name:^{width}}" for name in columns))
    for key in KEYS:
        marks = "".join(
            f"{'x' if key in keys else '.':^{width}}" for keys in columns.values()
        )
        print(f"{key:<26}{marks}")


by_kind = {
    "scale": registered_keys("internals::scale"),
    "fill_with": registered_keys("internals::fill_with"),
    "cpu_double": registered_keys("internals::cpu_double"),
    "ramp": registered_keys("internals::ramp"),
    "ramp_anywhere": registered_keys("internals::ramp_anywhere"),
}
print_key_table(by_kind)

# %%
# Every operator has ``Meta`` and ``Autograd``. The differences:
#
# * ``fill_with`` mutates ``x``, so it also has an ``ADInplaceOrView``
#   kernel, which bumps the *version counter* of each tensor written to;
#   autograd uses it to detect a saved tensor modified later.
# * ``cpu_double`` has a ``CPU`` kernel instead of
#   ``CompositeExplicitAutograd``.
# * ``ramp`` has no tensor to read a device from, and a kernel for one
#   backend only, so a ``BackendSelect`` kernel routes the call by its
#   ``device`` argument.
# * ``ramp_anywhere``'s one function serves every device: nothing to route.

mutable_keys = {"CompositeExplicitAutograd", "Meta", "Autograd", "ADInplaceOrView"}
assert by_kind["fill_with"] == mutable_keys
assert by_kind["cpu_double"] == {"CPU", "Meta", "Autograd"}
assert by_kind["ramp"] == {"CPU", "Meta", "Autograd", "BackendSelect"}
assert by_kind["ramp_anywhere"] == {"CompositeExplicitAutograd", "Meta", "Autograd"}
for device in ["meta", *devices]:
    made = ramp_anywhere(3, torch.device(device))
    assert made.device.type == device and made.shape == (3,)

# %%
# This operator writes into ``x`` through NumPy, behind PyTorch's back, yet
# the ``ADInplaceOrView`` kernel bumps the counter once, because ``x`` is in
# ``mutates_args``:


@torch.library.custom_op("internals::fill_through_numpy", mutates_args={"x"})
def fill_through_numpy(x: Tensor, value: float) -> None:
    if x.device.type != "cpu" or not x.is_contiguous():
        raise ValueError("fill_through_numpy needs a contiguous CPU tensor")
    x.numpy()[...] = value


buffer = torch.zeros(3)
fill_through_numpy(buffer, 7.0)
print(f"version after fill_through_numpy: {buffer._version}")
assert buffer._version == 1 and torch.equal(buffer, torch.full((3,), 7.0))

# %%
# That bump keeps autograd honest: a multiplication saves its inputs with
# their versions, so writing into one afterwards, even through NumPy, makes
# the backward refuse to run:

weights = torch.randn(3, requires_grad=True)
buffer = torch.ones(3)
loss = (weights * buffer).sum()  # saves buffer for the backward pass
fill_through_numpy(buffer, 2.0)
try:
    loss.backward()
except RuntimeError as error:
    print(f"{type(error).__name__}: {str(error).splitlines()[0][:100]}...")
    assert "modified by an inplace operation" in str(error)
else:
    raise AssertionError("expected autograd to notice the modified buffer")

# %%
# Whether in-place operations *inside* a kernel bump it too depends on the
# release. Up to PyTorch 2.12, the rest of the call ran with the
# ``ADInplaceOrView`` key excluded, so an inner ``fill_`` bumped nothing; from
# 2.13 the key stays active and it adds its own bump. ``fill_with`` noted
# which this release does:

plain, through_op = torch.zeros(3), torch.zeros(3)
plain.fill_(7.0)
fill_with(through_op, 7.0)
print(
    f"version after fill_: {plain._version}, after fill_with: {through_op._version}; "
    f"ADInplaceOrView excluded inside the kernel: {ad_inplace_excluded[-1]}"
)
inner_bumps = release >= (2, 13)
print(f"PyTorch {torch.__version__}: the inner fill_ bumps the counter: {inner_bumps}")
assert plain._version == 1 and torch.equal(through_op, plain)
assert ad_inplace_excluded[-1] is not inner_bumps
assert through_op._version == (2 if inner_bumps else 1)

# %%
# Either way the counter moves at least once per call, which is all autograd
# needs. ``opcheck`` agrees with the registration for every layout:

for device in devices:
    for x in layouts(device=device).values():
        torch.library.opcheck(fill_with, (x, 7.0))
for x in layouts().values():
    if x.is_contiguous():
        torch.library.opcheck(fill_through_numpy, (x, 7.0))
print(f"opcheck passed for fill_with on {devices}, and for fill_through_numpy")

# %%
# Asked for a device without a kernel (here ``meta``), ``ramp``'s
# ``BackendSelect`` kernel refuses, naming the device:

assert torch.equal(ramp(4, torch.device("cpu")), torch.arange(4.0))
try:
    ramp(4, torch.device("meta"))
except RuntimeError as error:
    print(f"{type(error).__name__}: {str(error).splitlines()[0]}")
    assert "kernel registered for meta" in str(error)
else:
    raise AssertionError("expected BackendSelect to refuse the meta device")

# %%
# Where the fake kernel lives
# ---------------------------
#
# The ``Meta`` kernel appeared before any fake kernel was registered: at
# definition time ``custom_op`` stores a placeholder in the Python-side *fake
# kernel registry*, which installs the ``Meta`` kernel. Until
# ``register_fake`` fills it, the placeholder raises:

meta_input = torch.empty(3, device="meta")
try:
    scale(meta_input, 2.0)
except RuntimeError as error:
    print(f"{type(error).__name__}: {str(error).splitlines()[0]}")
else:
    raise AssertionError("expected the placeholder fake kernel to raise")

# The registry is private (``torch._library.simple_registry``); we only peek
# at it to confirm that the placeholder is already there.
registry = torch._library.simple_registry.singleton
assert registry.find("internals::scale").fake_impl.kernel is not None

# %%
# There is one exception to "until ``register_fake`` fills it": when an
# operator returns nothing, like ``fill_with``, the output needs no
# description, and the placeholder answers by itself.

fill_with(torch.empty(3, device="meta"), 1.0)
print("fill_with ran on a meta tensor without a fake kernel")

# %%
# ``torch.compile``'s *fake* tensors, a Python subclass with no data, skip the
# ``Meta`` key and call the fake kernel directly. The difference shows when a
# fake kernel asks ``torch.library.get_ctx()`` for a data-dependent size:
# fake tensors provide the context, meta tensors cannot.


@torch.library.custom_op("internals::positive_part", mutates_args=())
def positive_part(x: Tensor) -> Tensor:
    if x.dim() != 1:
        raise ValueError(f"expected a 1-D tensor, got shape {tuple(x.shape)}")
    return x[x > 0].clone()


@positive_part.register_fake
def _(x):
    if x.dim() != 1:
        raise ValueError(f"expected a 1-D tensor, got shape {tuple(x.shape)}")
    return x.new_empty(torch.library.get_ctx().new_dynamic_size())


try:
    positive_part(torch.empty(4, device="meta"))
except RuntimeError as error:
    reason = str(error).split("): ", 1)[-1]
    print(f"meta tensor -> {type(error).__name__}: {reason[:90]}...")
else:
    raise AssertionError("expected get_ctx() to fail for meta tensors")

shape_env = torch.fx.experimental.symbolic_shapes.ShapeEnv()
with torch._subclasses.FakeTensorMode(shape_env=shape_env) as fake_mode:
    fake_output = positive_part(fake_mode.from_tensor(torch.randn(4)))
print(f"fake tensor -> output shape {tuple(fake_output.shape)}")
assert isinstance(fake_output.shape[0], torch.SymInt)

vectors = {"contiguous": torch.randn(8), "strided": torch.randn(16)[::2]}
vectors["empty"] = torch.randn(0)
for vector in vectors.values():
    torch.library.opcheck(positive_part, (vector,))
    torch.testing.assert_close(positive_part(vector), vector[vector > 0])
print(f"opcheck passed for positive_part on {list(vectors)} vectors (1-D only)")

# %%
# What later registrations change
# -------------------------------
#
# We add the usual registrations to ``scale`` one at a time and record the
# dispatch keys after each (``register_vmap`` and ``register_autocast`` where
# this release has them).

stages = {"defined": registered_keys("internals::scale")}


@scale.register_fake
def _(x, factor):
    check_factor(factor)
    return torch.empty_like(x)


stages["+fake"] = registered_keys("internals::scale")


def scale_setup_context(ctx, inputs, output):
    ctx.factor = inputs[1]


def scale_backward(ctx, grad):
    return grad * ctx.factor, None


scale.register_autograd(scale_backward, setup_context=scale_setup_context)
stages["+autograd"] = registered_keys("internals::scale")

cpu_kernel_calls = 0


@scale.register_kernel("cpu")
def _(x, factor):
    global cpu_kernel_calls
    cpu_kernel_calls += 1
    check_factor(factor)
    return torch.mul(x, factor)


stages["+kernel(cpu)"] = registered_keys("internals::scale")

if hasattr(scale, "register_vmap"):

    @scale.register_vmap
    def _(info, in_dims, x, factor):
        return scale(x, factor), in_dims[0]

    stages["+vmap"] = registered_keys("internals::scale")

if hasattr(scale, "register_autocast"):
    scale.register_autocast("cpu", torch.bfloat16)
    stages["+autocast"] = registered_keys("internals::scale")

print_key_table(stages)

# %%
# ``register_fake`` and ``register_autograd`` leave the table as it was: the
# kernels installed at definition time look them up when they run.
# ``register_kernel``, ``register_vmap`` and ``register_autocast`` add
# ``CPU``, ``FuncTorchBatched`` and ``AutocastCPU`` respectively.

assert stages["+fake"] == stages["defined"] == stages["+autograd"]
assert stages["+kernel(cpu)"] == stages["defined"] | {"CPU"}
if "+vmap" in stages:
    assert stages["+vmap"] == stages["+kernel(cpu)"] | {"FuncTorchBatched"}
if "+autocast" in stages:
    assert stages["+autocast"] - stages["+vmap"] == {"AutocastCPU"}

# %%
# Both tables in one picture: on the left, what ``custom_op`` installs for
# each kind of operator; on the right, what each registration adds to
# ``scale``. Blue squares sit under *alias* keys.

# sphinx_gallery_start_ignore
ALIAS_KEYS = {"CompositeExplicitAutograd", "Autograd"}
panels = {
    "custom_op, by kind of operator": by_kind,
    "scale, registration by registration": stages,
}
fig, axes = plt.subplots(
    1,
    2,
    figsize=(8, 3.8),
    sharey=True,
    layout="constrained",
    width_ratios=[len(by_kind), len(stages)],
)
for ax, (title, columns) in zip(axes, panels.items(), strict=True):
    for column, keys in enumerate(columns.values()):
        for row, key in enumerate(KEYS):
            if key in keys:
                color = "#1f618d" if key in ALIAS_KEYS else "#ca6f1e"
                ax.plot(column, row, "s", markersize=13, color=color)
    ax.set_xticks(range(len(columns)), list(columns), rotation=35, ha="right")
    ax.set_xlim(-0.6, len(columns) - 0.4)
    ax.set_title(title, fontsize="medium")
    ax.grid(color="0.9")
    ax.set_axisbelow(True)
axes[0].set_yticks(range(len(KEYS)), KEYS)
axes[0].set_ylim(len(KEYS) - 0.5, -0.5)
axes[0].plot([], [], "s", color="#1f618d", label="kernel under an alias key")
axes[0].plot([], [], "s", color="#ca6f1e", label="kernel under a runtime key")
fig.legend(loc="outside lower center", ncols=2, frameon=False)
plt.show()
# sphinx_gallery_end_ignore

# %%
# The behaviour did change, of course: meta tensors and backward now work.

meta_output = scale(meta_input, 2.0)
print(f"meta call now gives: {meta_output}")
assert meta_output.device.type == "meta" and meta_output.shape == meta_input.shape
leaf = torch.ones(3, requires_grad=True)
scale(leaf, 3.0).sum().backward()
assert torch.equal(leaf.grad, torch.full((3,), 3.0))

# %%
# The ``CPU`` kernel takes dense CPU calls; every other backend, including
# sparse CPU tensors, still reaches the general function. Up to PyTorch 2.10
# the sparse call then failed in ``custom_op``'s aliasing check, which could
# not read a sparse tensor's storage; the cell says what this release does.

samples = {device: torch.randn(4, device=device) for device in devices}
samples["sparse cpu"] = torch.randn(4).to_sparse()
sparse_supported = release >= (2, 11)
for name, sample in samples.items():
    calls_before = cpu_kernel_calls
    try:
        result = scale(sample, 0.5)
    except NotImplementedError as error:
        assert name == "sparse cpu" and not sparse_supported
        assert "Cannot access storage of SparseTensorImpl" in str(error)
        outcome = f"then the aliasing check raised {type(error).__name__}"
    else:
        assert name != "sparse cpu" or sparse_supported
        torch.testing.assert_close(result.to_dense(), sample.to_dense() * 0.5)
        outcome = "and the result is right"
    used_cpu_kernel = cpu_kernel_calls > calls_before
    print(f"{name:>10}: the CPU-specific kernel ran: {used_cpu_kernel}, {outcome}")
    assert used_cpu_kernel == (name == "cpu")

for device in devices:
    for requires_grad in (False, True):
        for sample in layouts(device=device, requires_grad=requires_grad).values():
            torch.library.opcheck(scale, (sample, 0.5))
print(f"opcheck passed for internals::scale on {devices}, every layout")

# %%
# One operator, several handles
# -----------------------------
#
# The decorated ``scale`` is a ``CustomOpDef`` that keeps the registrations
# together. ``torch.ops.internals.scale`` is an *overload packet*, and its
# ``.default`` the ``OpOverload`` that ``custom_op`` defined, which the
# ``CustomOpDef`` keeps (privately, as ``_opoverload``) and calls.

packet = torch.ops.internals.scale
overload = torch.ops.internals.scale.default
print(f"{type(scale).__name__}, {type(packet).__name__}, {type(overload).__name__}")
print(f"overloads in the packet: {packet.overloads()}")
handle_types = [type(handle).__name__ for handle in (scale, packet, overload)]
assert handle_types == ["CustomOpDef", "OpOverloadPacket", "OpOverload"]
assert scale._opoverload is overload
assert packet.overloads() == ["default"]

sample = torch.randn(5)
results = [scale(sample, 1.5), packet(sample, 1.5), overload(sample, 1.5)]
assert all(torch.equal(results[0], other) for other in results[1:])
print("all three handles return the same tensor values")

# %%
# Compiled and exported graphs record the ``OpOverload``, so the name must
# stay stable for a saved program to find it again. ``custom_op`` also tags it
# ``pt2_compliant_tag``, promising that it works with PyTorch 2's compilers.

assert torch.Tag.pt2_compliant_tag in overload.tags
print(f"tags: {overload.tags}")

# %%
# Defining the same name twice
# ----------------------------
#
# The dispatcher allows one definition per operator name. Defining a schema
# goes through a ``torch.library.Library`` object, and a second definition of
# a name that is still alive fails, whichever ``Library`` object it comes
# from:

first_library = torch.library.Library("internals", "FRAGMENT")
first_library.define("halve(Tensor x) -> Tensor")
first_library.impl("halve", lambda x: x / 2, "CompositeExplicitAutograd")

second_library = torch.library.Library("internals", "FRAGMENT")
try:
    second_library.define("halve(Tensor x) -> Tensor")
except RuntimeError as error:
    print(f"{type(error).__name__}: {str(error).splitlines()[0][:150]}...")
else:
    raise AssertionError("expected the second definition of internals::halve to fail")

# %%
# A definition lives as long as the ``Library`` object that made it; once it
# is garbage collected, the name is free again. Ask the dispatcher, not
# ``torch.ops``: up to PyTorch 2.12 that Python cache kept a stale entry
# (pytorch/pytorch `#181785 <https://github.com/pytorch/pytorch/pull/181785>`_).

print(f"halve(ones) = {torch.ops.internals.halve(torch.ones(2))}")
del first_library
gc.collect()
try:
    torch._C._dispatch_find_schema_or_throw("internals::halve", "")
except RuntimeError as error:
    print(f"dispatcher: {type(error).__name__}: {str(error).splitlines()[0]}")
else:
    raise AssertionError("expected internals::halve to have left the dispatcher")
stale_cache = release < (2, 13)
cached = hasattr(torch.ops.internals, "halve")
print(f"hasattr(torch.ops.internals, 'halve'): {cached} on PyTorch {torch.__version__}")
assert cached == stale_cache
second_library.define("halve(Tensor x) -> Tensor")
second_library.impl("halve", lambda x: x * 0.5, "CompositeExplicitAutograd")
assert torch.equal(torch.ops.internals.halve(torch.ones(2)), torch.full((2,), 0.5))

# %%
# PyTorch's tests tie that lifetime to a ``with`` block with the private
# ``torch.library._scoped_library``. Outside tests, the simplest way around a
# name clash is a new name, such as ``halve_v2``.

for divisor in (2.0, 4.0):
    with torch.library._scoped_library("internals", "FRAGMENT") as scoped:
        scoped.define("divide(Tensor x) -> Tensor")
        scoped.impl("divide", lambda x, d=divisor: x / d, "CompositeExplicitAutograd")
        quotient = torch.ops.internals.divide(torch.ones(1))
        print(f"internals::divide with divisor {divisor}: {quotient}")
        assert torch.equal(quotient, torch.ones(1) / divisor)
    assert not hasattr(torch.ops.internals, "divide")

# %%
# ``custom_op`` redefines quietly
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
#
# So that re-running a notebook cell works, ``custom_op`` keeps one private
# ``Library`` per name and destroys it when the name is decorated again: the
# name now belongs to the new function. A handle kept from before still
# points at the destroyed registration, and calling it reads freed memory: it
# may seem to work or crash the interpreter (pytorch/pytorch
# `#197025 <https://github.com/pytorch/pytorch/pull/197025>`_). This page
# never calls the old handle.


@torch.library.custom_op("internals::offset", mutates_args=())
def offset(x: Tensor) -> Tensor:
    return x + 1


old_offset = offset


@torch.library.custom_op("internals::offset", mutates_args=())
def offset(x: Tensor) -> Tensor:  # noqa: F811 (redefined on purpose)
    return x + 100


through_ops = torch.ops.internals.offset(torch.zeros(1))
print(f"new handle: {offset(torch.zeros(1))}, torch.ops: {through_ops}")
assert torch.equal(through_ops, torch.full((1,), 100.0))
assert offset is not old_offset

# %%
# This covers only names ``custom_op`` owns; a name a ``Library`` defined by
# hand is refused like any second definition:

try:

    @torch.library.custom_op("internals::halve", mutates_args=())
    def halve(x: Tensor) -> Tensor:
        return x / 2

except RuntimeError as error:
    print(f"{type(error).__name__}: {str(error).splitlines()[0][:150]}...")
else:
    raise AssertionError("expected custom_op to refuse a name owned by a Library")

# %%
# The decorator, step by step
# ---------------------------
#
# Putting the pieces together, this is what ``custom_op`` does in
# ``torch/_library/custom_ops.py`` when it decorates a function, in the order
# it happens:
#
# 1. Infer the schema from the type hints, unless you pass one as
#    ``schema=``.
# 2. Create a ``CustomOpDef`` and a ``Library`` for the namespace, destroying
#    the library of a previous ``custom_op`` with the same name.
# 3. Reject keyword-only tensor arguments, then define the schema, tagged
#    ``pt2_compliant_tag``.
# 4. Put a placeholder into the fake kernel registry, which also installs the
#    ``Meta`` kernel.
# 5. Install the ``Autograd`` kernel, which looks up the backward formula at
#    call time; for mutating operators, also an ``ADInplaceOrView`` kernel that
#    bumps version counters.
# 6. If you passed ``schema=``, check that its ``!`` annotations name exactly
#    the arguments in ``mutates_args``.
# 7. Register your function as the kernel for ``device_types``, under
#    ``CompositeExplicitAutograd`` when none are given, wrapped in a check
#    that the outputs do not alias the inputs. An operator with a ``device``
#    argument but no tensor, registered for specific ``device_types``, also
#    gets a ``BackendSelect`` kernel.
#
# Two of these steps are checks that can fail. Step 3 refuses a tensor that
# can only be passed by keyword, and step 6 refuses a hand-written schema
# whose ``!`` annotations disagree with ``mutates_args``:


def add_keyword_tensor(x: Tensor, *, other: Tensor) -> Tensor:
    return x + other


try:
    torch.library.custom_op("internals::add_keyword_tensor", mutates_args=())(
        add_keyword_tensor
    )
except NotImplementedError as error:
    print(f"step 3 -> {type(error).__name__}: {str(error)[:90]}...")
else:
    raise AssertionError("expected a keyword-only tensor to be refused")

try:
    torch.library.custom_op(
        "internals::mislabelled", mutates_args=(), schema="(Tensor(a!) x) -> ()"
    )(lambda x: None)
except ValueError as error:
    print(f"step 6 -> {type(error).__name__}: {str(error)[:90]}...")
else:
    raise AssertionError("expected the schema and mutates_args to disagree")

# %%
# The last check of this page confirms, for a fresh operator, the key set
# that these steps predict:


@torch.library.custom_op("internals::clamp_into", mutates_args={"out"})
def clamp_into(x: Tensor, out: Tensor) -> None:
    if x.shape != out.shape:
        raise ValueError(f"out has shape {tuple(out.shape)}, x has {tuple(x.shape)}")
    out.copy_(x.clamp(-1, 1))


predicted = {"CompositeExplicitAutograd", "Meta", "Autograd", "ADInplaceOrView"}
assert registered_keys("internals::clamp_into") == predicted
for device in devices:
    outs = layouts(device=device)
    for x in layouts(device=device).values():
        x = 3 * x
        for out in (torch.empty_like(x), outs["permuted"][: x.shape[0]]):
            torch.library.opcheck(clamp_into, (x, out))
            clamp_into(x, out)
            torch.testing.assert_close(out, x.clamp(-1, 1))
print(f"clamp_into has the predicted keys and passes opcheck on {devices}")

# %%
# Conclusion
# ----------
#
# ``custom_op`` is a thin layer over the dispatcher: a schema from your type
# hints, your function under a backend key, plus ``Meta``, ``Autograd`` and,
# for mutating operators, ``ADInplaceOrView``. ``register_fake`` and
# ``register_autograd`` fill slots those kernels consult; ``register_kernel``,
# ``register_vmap`` and ``register_autocast`` add keys. The
# ``torch._C._dispatch_*`` queries check this for any operator.
#
# :ref:`sphx_glr_tutorials_custom_op_troubleshooting.py` shows the errors
# you meet when these pieces disagree, and
# :ref:`sphx_glr_tutorials_custom_op_performance.py` measures what the layers
# cost per call. For the registrations themselves, see
# :ref:`sphx_glr_tutorials_custom_op_registrations.py`.
