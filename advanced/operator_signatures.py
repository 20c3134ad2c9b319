"""
Operators with Real Signatures
==============================

After this page you will be able to give a custom operator the signature a
real kernel needs: several outputs of which some have no gradient, optional
and list arguments, defaults and keyword-only arguments, an integer result,
and an output whose size depends on the data. You will also know which
integer type to write in a schema so that ``torch.compile`` does not compile
again for every new size, and how to test fake kernels on the input layouts
that expose their mistakes.

.. grid:: 2

    .. grid-item-card:: :octicon:`mortar-board;1em;` What you will learn
       :class-card: card-prerequisites

       * How Python type hints become an operator schema, defaults and
         keyword-only arguments included
       * How ``setup_context`` and ``backward`` handle several outputs,
         ``ctx.needs_input_grad`` and non-differentiable outputs
       * How to return an ``int`` and a tensor of data-dependent size
       * Why ``int`` in a hand-written schema recompiles under dynamic shapes,
         and how ``SymInt`` fixes it
       * Which ``opcheck`` samples catch a fake kernel with wrong strides

    .. grid-item-card:: :octicon:`list-unordered;1em;` Prerequisites
       :class-card: card-prerequisites

       * PyTorch 2.7 or later
       * Matplotlib
       * :ref:`sphx_glr_tutorials_python_custom_ops.py`
       * :ref:`sphx_glr_tutorials_fake_kernels_and_shapes.py`

.. admonition:: Checklist
   :class: checklist

   #. Write the Python signature with type hints and read the schema that
      ``torch.library.infer_schema`` makes of it.
   #. For several outputs, return a tuple; in ``setup_context`` mark the
      outputs that have no gradient with ``ctx.mark_non_differentiable``, and
      in ``backward`` compute only the gradients ``ctx.needs_input_grad``
      asks for.
   #. For an ``int`` result that follows from the input's sizes, make the
      fake kernel compute it from them (``x.shape[-1] // 2``); for one that
      depends on the data, or a data-dependent output size, return
      ``torch.library.get_ctx().new_dynamic_size()``.
   #. In a hand-written schema, write ``SymInt`` (not ``int``) for any
      integer that can come from a tensor's size.
   #. Run ``opcheck`` on samples that include an empty tensor, a strided
      slice, tensors whose dimensions are not in row-major order (transposed
      or permuted, with gaps and without) and inputs that require grad.

An operator's *schema* is its contract with the rest of PyTorch: the
dispatcher, autograd, ``torch.compile`` and ``torch.export`` all read it.
``torch.library.custom_op`` writes it for you from the function's type hints,
so the signature you give the Python function is the contract.
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

import matplotlib.pyplot as plt
from torch.fx.experimental.proxy_tensor import make_fx

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


def failed_tests(verdicts):
    """The sub-tests of an opcheck(..., raise_exception=False) run that failed."""
    return {test: result for test, result in verdicts.items() if result != "SUCCESS"}


def first_line(error):
    return f"{type(error).__name__}: {str(error).strip().splitlines()[0]}"


# %%
# From type hints to a schema
# ---------------------------
#
# ``torch.library.infer_schema`` is the function ``custom_op`` uses to turn a
# signature into a schema, and it is public, so we can ask it directly. Each
# row below is one parameter annotation and the schema type it becomes.

annotations = {
    "torch.Tensor": torch.Tensor,
    "torch.Tensor | None": torch.Tensor | None,
    "list[torch.Tensor]": list[torch.Tensor],
    "list[torch.Tensor | None]": list[torch.Tensor | None],
    "int": int,
    "int | None": int | None,
    "list[int]": list[int],
    "float": float,
    "list[float]": list[float],
    "bool": bool,
    "str": str,
    "torch.dtype": torch.dtype,
    "torch.device": torch.device,
}
schema_types = {}
for text, annotation in annotations.items():

    def one_argument(x: torch.Tensor, arg) -> torch.Tensor:
        raise NotImplementedError

    one_argument.__annotations__["arg"] = annotation
    schema = torch.library.infer_schema(one_argument, mutates_args=())
    schema_types[text] = schema.split(", ")[1].rsplit(" arg)", 1)[0]
    print(f"{text:<30} -> {schema_types[text]}")
assert schema_types["int"] == "SymInt" and schema_types["list[int]"] == "SymInt[]"
assert schema_types["torch.Tensor | None"] == "Tensor?"

# %%
# Two rows deserve attention. A plain ``int`` becomes ``SymInt``, an integer
# that may be symbolic under ``torch.compile``; we come back to why that
# matters. And ``Tensor | None`` (or ``Optional[Tensor]``) becomes
# ``Tensor?``.
#
# Defaults and keyword-only arguments carry over too. Parameters after a bare
# ``*`` become keyword-only, and the schema marks them with ``*``:


def blend(
    x: torch.Tensor,
    other: torch.Tensor | None = None,
    *,
    alpha: float = 0.5,
    mode: str = "linear",
    repeats: int = 1,
) -> torch.Tensor:
    raise NotImplementedError


blend_schema = torch.library.infer_schema(blend, mutates_args=())
print(blend_schema)
assert "Tensor? other=None, *, float alpha=0.5" in blend_schema
assert 'str mode="linear"' in blend_schema and "SymInt repeats=1" in blend_schema

# %%
# Several outputs, one of them without a gradient
# -----------------------------------------------
#
# ``weighted_top_k`` scores each element as ``x * weight`` and returns the
# ``k`` largest scores along the last dimension together with their
# positions, like ``torch.topk``. A ``tuple`` return annotation gives the
# operator two outputs. The kernel here is ``torch.topk`` for brevity; yours
# would be the kernel you cannot express otherwise. Every operator on this
# page checks its arguments and raises ``ValueError``, and its fake kernel
# runs the same checks.


def check_top_k(x, weight, k):
    if not x.dtype.is_floating_point or x.dim() == 0:
        raise ValueError(f"x must be a floating-point tensor with dimensions, got {x}")
    if weight.shape != x.shape or weight.dtype != x.dtype:
        raise ValueError(
            f"weight must match x, got {tuple(weight.shape)} {weight.dtype} "
            f"for x {tuple(x.shape)} {x.dtype}"
        )
    if not 0 <= k <= x.shape[-1]:
        raise ValueError(f"k must be in [0, {x.shape[-1]}], got {k}")


@torch.library.custom_op("signatures::weighted_top_k", mutates_args=())
def weighted_top_k(
    x: torch.Tensor, weight: torch.Tensor, k: int
) -> tuple[torch.Tensor, torch.Tensor]:
    check_top_k(x, weight, k)
    values, indices = torch.topk(x * weight, k, dim=-1)
    return values.contiguous(), indices.contiguous()


@weighted_top_k.register_fake
def _(x, weight, k):
    check_top_k(x, weight, k)
    shape = (*x.shape[:-1], k)
    return x.new_empty(shape), x.new_empty(shape, dtype=torch.int64)


print(weighted_top_k._opoverload._schema)

# %%
# The backward formula: a score's gradient lands where the score came from,
# so the incoming gradient is scattered back to the chosen positions, then
# multiplied by ``weight`` for ``x`` and by ``x`` for ``weight``.
#
# * ``setup_context`` marks the indices non-differentiable. Integer tensors
#   can never require grad, so autograd would not track them anyway; the
#   call documents the intent and is what a floating-point output without a
#   gradient (a mask, a count) needs.
# * ``ctx.needs_input_grad`` says, input by input and in order, whether a
#   gradient is wanted. The backward computes only those; a list records
#   what was computed.
# * ``backward`` takes one gradient argument per output; the one for the
#   indices carries nothing and is ignored.

computed = []


def top_k_setup_context(ctx, inputs, output):
    x, weight, k = inputs
    values, indices = output
    ctx.mark_non_differentiable(indices)
    ctx.save_for_backward(x, weight, indices)


def top_k_backward(ctx, grad_values, grad_indices):
    x, weight, indices = ctx.saved_tensors
    grad_scores = torch.zeros_like(x).scatter(-1, indices, grad_values)
    grad_x = grad_weight = None
    if ctx.needs_input_grad[0]:
        grad_x = grad_scores * weight
        computed.append("x")
    if ctx.needs_input_grad[1]:
        grad_weight = grad_scores * x
        computed.append("weight")
    return grad_x, grad_weight, None


weighted_top_k.register_autograd(top_k_backward, setup_context=top_k_setup_context)

# %%
# Only ``x`` requires grad here, so only its gradient is computed; the
# indices never require grad.

x = torch.randn(3, 6, dtype=torch.float64, requires_grad=True)
weight = torch.rand(3, 6, dtype=torch.float64)
values, indices = weighted_top_k(x, weight, 2)
print(f"values.requires_grad={values.requires_grad}, indices.dtype={indices.dtype}")
assert values.requires_grad and not indices.requires_grad
values.sum().backward()
print(f"gradients computed: {computed}")
assert computed == ["x"]
expected = torch.zeros_like(x).scatter(-1, indices, 1.0) * weight
torch.testing.assert_close(x.grad, expected)

# %%
# ``gradcheck`` confirms the formula for both inputs against finite
# differences.

weight.requires_grad_()
assert torch.autograd.gradcheck(lambda x, w: weighted_top_k(x, w, 2)[0], (x, weight))
print("gradcheck passes for weighted_top_k")

# %%
# ``opcheck`` samples: an empty batch, a transposed view, a strided slice, a
# permuted (dense, not row-major) tensor, and inputs that require grad.


def top_k_samples(device):
    grid = torch.randn(6, 4, device=device)
    block = torch.randn(2, 3, 5, device=device)
    return [
        (torch.randn(0, 5, device=device), torch.rand(0, 5, device=device), 2),
        (grid.t(), torch.rand(4, 6, device=device), 3),
        (grid[..., ::2], torch.rand(6, 2, device=device), 1),
        (block.permute(1, 2, 0), torch.rand(3, 5, 2, device=device), 2),
        (
            torch.randn(3, 7, dtype=torch.float64, device=device, requires_grad=True),
            torch.rand(3, 7, dtype=torch.float64, device=device, requires_grad=True),
            4,
        ),
    ]


for device in devices:
    for args in top_k_samples(device):
        verdicts = torch.library.opcheck(weighted_top_k, args, raise_exception=False)
        assert not failed_tests(verdicts), failed_tests(verdicts)
print(f"opcheck passed for weighted_top_k on {devices}")

# %%
# Bad arguments raise a ``ValueError`` that names the problem:

for bad_args in [
    (torch.randn(3, 4), torch.rand(3, 5), 2),
    (torch.randn(3, 4), torch.rand(3, 4), 5),
    (torch.arange(4), torch.arange(4), 1),
]:
    try:
        weighted_top_k(*bad_args)
    except ValueError as error:
        print(first_line(error))
    else:
        raise AssertionError(f"expected a ValueError for {bad_args}")

# %%
# Optional and list arguments, a list result
# ------------------------------------------
#
# ``rms_norm_all`` normalizes several tensors at once, each to unit root mean
# square over its last dimension, and scales them by an optional ``weight``
# (as when the queries and keys of an attention layer are normalized
# together). It takes a ``list[Tensor]`` and an optional tensor, and returns
# a ``list[Tensor]``. ``weight`` has no default here: callers pass a tensor
# or ``None``. The end of this section shows why.

EPS = 1e-6


def check_rms_norm(xs, weight):
    if not xs:
        raise ValueError("xs must hold at least one tensor")
    width = xs[0].shape[-1] if xs[0].dim() else None
    for x in xs:
        if x.dim() == 0 or x.shape[-1] != width or not x.dtype.is_floating_point:
            raise ValueError(
                f"every tensor must be floating point with last dimension {width}, "
                f"got {tuple(x.shape)} {x.dtype}"
            )
    if weight is not None and tuple(weight.shape) != (width,):
        raise ValueError(
            f"weight must have shape ({width},), got {tuple(weight.shape)}"
        )


@torch.library.custom_op("signatures::rms_norm_all", mutates_args=())
def rms_norm_all(
    xs: list[torch.Tensor], weight: torch.Tensor | None
) -> list[torch.Tensor]:
    check_rms_norm(xs, weight)
    outputs = []
    for x in xs:
        normalized = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS)
        if weight is not None:
            normalized = normalized * weight
        outputs.append(normalized.contiguous())
    return outputs


@rms_norm_all.register_fake
def _(xs, weight):
    check_rms_norm(xs, weight)
    return [torch.empty_like(x, memory_format=torch.contiguous_format) for x in xs]


print(rms_norm_all._opoverload._schema)

# %%
# With a list output, ``backward`` receives one list of gradients and returns,
# for the list input, a list of gradients; for the optional ``weight``, a
# gradient or ``None`` when no weight was passed. The weight's gradient sums
# the contributions of every tensor in the list.


def rms_norm_setup_context(ctx, inputs, output):
    xs, weight = inputs
    ctx.count = len(xs)
    ctx.has_weight = weight is not None
    ctx.save_for_backward(*xs, *([weight] if weight is not None else []))


def rms_norm_backward(ctx, grads):
    saved = ctx.saved_tensors
    xs = saved[: ctx.count]
    weight = saved[ctx.count] if ctx.has_weight else None
    grad_xs, grad_weight = [], None
    for x, grad in zip(xs, grads, strict=True):
        scale = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS)
        grad_normalized = grad * weight if weight is not None else grad
        mean_term = (grad_normalized * x).mean(-1, keepdim=True)
        grad_xs.append(scale * (grad_normalized - x * scale.pow(2) * mean_term))
        if weight is not None:
            term = (grad * x * scale).reshape(-1, x.shape[-1]).sum(0)
            grad_weight = term if grad_weight is None else grad_weight + term
    return grad_xs, grad_weight


rms_norm_all.register_autograd(rms_norm_backward, setup_context=rms_norm_setup_context)

queries = torch.randn(2, 3, 8, dtype=torch.float64, requires_grad=True)
keys = torch.randn(5, 8, dtype=torch.float64, requires_grad=True)
gain = torch.rand(8, dtype=torch.float64, requires_grad=True)
normalized_q, normalized_k = rms_norm_all([queries, keys], gain)
rms = normalized_q.div(gain).pow(2).mean(-1).sqrt()
torch.testing.assert_close(rms, torch.ones_like(rms), atol=1e-5, rtol=0)
assert torch.autograd.gradcheck(
    lambda q, k, w: rms_norm_all([q, k], w), (queries, keys, gain)
)
assert torch.autograd.gradcheck(
    lambda q, k: rms_norm_all([q, k], None), (queries, keys)
)
print("unit RMS after normalizing; gradcheck passes with and without weight")

# %%
# ``opcheck`` samples, each a list mixing the layouts above, with and without
# a weight, and with gradients required:


def rms_norm_samples(device):
    grid = torch.randn(8, 6, device=device)
    wide = torch.randn(4, 12, device=device)
    block = torch.randn(2, 6, 3, device=device)
    return [
        ([torch.randn(0, 6, device=device), grid[:3]], None),
        ([grid.t()[:, :6], wide[..., ::2]], torch.rand(6, device=device)),
        ([block.permute(0, 2, 1), grid], torch.rand(6, device=device)),
        (
            [torch.randn(4, 6, dtype=torch.float64, device=device, requires_grad=True)],
            torch.rand(6, dtype=torch.float64, device=device, requires_grad=True),
        ),
    ]


for device in devices:
    for xs, weight in rms_norm_samples(device):
        verdicts = torch.library.opcheck(
            rms_norm_all, (xs, weight), raise_exception=False
        )
        assert not failed_tests(verdicts), failed_tests(verdicts)
print(f"opcheck passed for rms_norm_all on {devices}")

try:
    rms_norm_all([torch.randn(2, 6), torch.randn(2, 5)], None)
except ValueError as error:
    print(first_line(error))
else:
    raise AssertionError("expected tensors of different widths to be rejected")

# %%
# Why no default for ``weight``? Give the same operator ``weight=None`` as a
# default and train through it without a weight: up to PyTorch 2.13 the
# backward of an operator with a list input then fails its own structure
# check. The dispatcher drops trailing arguments left at their defaults,
# and the check compared the gradients with the shortened inputs (a bug
# fixed by pytorch PR 185132, in 2.14). The cell tries it on this release.


def rms_norm_all_with_default(
    xs: list[torch.Tensor], weight: torch.Tensor | None = None
) -> list[torch.Tensor]:
    return rms_norm_all(xs, weight)


with_default = torch.library.custom_op(
    "signatures::rms_norm_all_with_default",
    rms_norm_all_with_default,
    mutates_args=(),
)
with_default.register_fake(lambda xs, weight=None: rms_norm_all(xs, weight))
with_default.register_autograd(rms_norm_backward, setup_context=rms_norm_setup_context)
try:
    sum(y.sum() for y in with_default([queries, keys])).backward()
    print("a default on the optional weight trains on this release")
    trains = True
except RuntimeError as error:
    message = first_line(error).split(". Got")[0]
    print(f"a default on the optional weight breaks backward here: {message}")
    assert "same structure as the inputs" in str(error)
    trains = False
assert trains == (RELEASE >= (2, 14))

# %%
# An integer result and a data-dependent output size
# --------------------------------------------------
#
# Two operators pick the elements above a threshold: ``count_above`` returns
# how many there are, as a Python ``int``, and ``values_above`` returns them.
# The threshold is keyword-only, with a default. The return annotation
# ``int`` becomes ``SymInt`` in the schema.
#
# Neither fake kernel can know the answer: it depends on the values. Both ask
# the fake-tensor context for a new symbolic size,
# ``torch.library.get_ctx().new_dynamic_size()``, an unknown non-negative
# integer that the compiler carries through the rest of the graph.


def check_floating(x):
    if not x.dtype.is_floating_point:
        raise ValueError(f"x must be a floating-point tensor, got {x.dtype}")


@torch.library.custom_op("signatures::count_above", mutates_args=())
def count_above(x: torch.Tensor, *, threshold: float = 0.0) -> int:
    check_floating(x)
    return int((x > threshold).sum())


@count_above.register_fake
def _(x, *, threshold=0.0):
    check_floating(x)
    return torch.library.get_ctx().new_dynamic_size()


@torch.library.custom_op("signatures::values_above", mutates_args=())
def values_above(x: torch.Tensor, *, threshold: float = 0.0) -> torch.Tensor:
    check_floating(x)
    return x[x > threshold].clone()


@values_above.register_fake
def _(x, *, threshold=0.0):
    check_floating(x)
    return x.new_empty(torch.library.get_ctx().new_dynamic_size())


print(count_above._opoverload._schema)
print(values_above._opoverload._schema)
assert str(count_above._opoverload._schema).endswith("-> SymInt")

# %%
# An ``int`` that follows from the input's sizes needs no new symbol: under
# ``torch.compile`` the sizes are symbols already, and the fake kernel can
# compute the result from them. ``half_width`` returns ``x.shape[-1] // 2``.
# ``make_fx``, from the public but experimental ``torch.fx.experimental``,
# traces a call with symbolic sizes and shows what the compiler knows about
# a buffer of that length, and of ``count_above``'s.


@torch.library.custom_op("signatures::half_width", mutates_args=())
def half_width(x: torch.Tensor) -> int:
    return x.shape[-1] // 2


@half_width.register_fake
def _(x):
    return x.shape[-1] // 2


def traced_length(int_op):
    """The length of x.new_zeros(int_op(x)) in a trace with symbolic sizes."""
    trace = make_fx(lambda x: x.new_zeros(int_op(x)), tracing_mode="symbolic")
    graph = trace(torch.randn(2, 6)).graph
    output = next(node for node in graph.nodes if node.op == "output")
    return str(output.args[0].meta["val"].shape[0])


from_sizes, from_data = traced_length(half_width), traced_length(count_above)
print(f"half_width: {from_sizes}; count_above: {from_data}")
assert "//2" in from_sizes and from_data.startswith("u")

# %%
# The first length is an expression in the input's width; the second is a
# new unknown, of which the compiler knows only that it is not negative. A
# fake kernel that returned a new symbol for ``half_width`` would throw the
# relation to the width away.

# %%
# ``opcheck`` with an input that requires grad finds something before we
# even try to train: ``values_above`` has no backward formula yet, and the
# sub-test that runs the operator through AOTAutograd with gradients says so.

grad_sample = torch.randn(4, 5, dtype=torch.float64, requires_grad=True)
verdicts = torch.library.opcheck(
    values_above, (grad_sample,), {"threshold": 0.1}, raise_exception=False
)
failed = failed_tests(verdicts)
print({test: first_line(error) for test, error in failed.items()})
assert list(failed) == ["test_aot_dispatch_dynamic"]
assert "no autograd formula" in str(failed["test_aot_dispatch_dynamic"])

# %%
# The gradient of a selection is the incoming gradient placed back where the
# selected elements came from. A keyword-only argument does not arrive in
# ``inputs``: ``setup_context`` receives it in a separate
# ``keyword_only_inputs`` dictionary, and ``backward`` returns gradients for
# the positional inputs only.


def values_above_setup_context(ctx, inputs, keyword_only_inputs, output):
    (x,) = inputs
    ctx.save_for_backward(x > keyword_only_inputs["threshold"])


def values_above_backward(ctx, grad):
    (mask,) = ctx.saved_tensors
    return grad.new_zeros(mask.shape).masked_scatter(mask, grad)


values_above.register_autograd(
    values_above_backward, setup_context=values_above_setup_context
)
assert torch.autograd.gradcheck(
    lambda x: values_above(x, threshold=0.1), (grad_sample,)
)


def selection_samples(device):
    grid = torch.randn(6, 4, device=device)
    return [
        torch.randn(0, 3, device=device),
        grid.t(),
        grid[..., ::2],
        torch.randn(2, 3, 4, device=device).permute(2, 0, 1),
        torch.randn(4, 5, dtype=torch.float64, device=device, requires_grad=True),
    ]


for device in devices:
    for x in selection_samples(device):
        for op in (values_above, count_above):
            verdicts = torch.library.opcheck(
                op, (x,), {"threshold": 0.1}, raise_exception=False
            )
            assert not failed_tests(verdicts), failed_tests(verdicts)
print(f"gradcheck and opcheck pass for both operators on {devices}")

# %%
# Under ``torch.compile`` the two operators go into one graph even though
# their output sizes are unknown while compiling. The function below keeps
# the large values and allocates a buffer of the counted length. A counting
# backend (any callable works as a backend) counts the compilations.
#
# PyTorch 2.7 to 2.9 refuse an operator with a data-dependent output size in
# a full graph unless two Dynamo settings, ``capture_dynamic_output_shape_ops``
# and ``capture_scalar_outputs``, are switched on; from 2.10 it compiles
# without them. The cell tries without them first and says whether this
# release needed them.


class CountingBackend:
    """A torch.compile backend that counts the graphs it is handed."""

    def __init__(self):
        self.compilations = 0

    def __call__(self, graph_module, example_inputs):
        self.compilations += 1
        return graph_module.forward


def keep_large(x):
    large = values_above(x, threshold=0.5)
    buffer = x.new_zeros(count_above(x, threshold=0.5))
    return large * 2, buffer


batches = [torch.randn(4, 5) for _ in range(3)]


def compile_and_run(backend):
    torch.compiler.reset()
    compiled = torch.compile(keep_large, backend=backend, fullgraph=True)
    return [compiled(batch) for batch in batches]


backend = CountingBackend()
try:
    outputs = compile_and_run(backend)
    print("compiled in one graph without extra settings")
    assert RELEASE >= (2, 10)
except torch._dynamo.exc.Unsupported as error:
    print(f"this release refuses at first: {first_line(error)}")
    assert RELEASE < (2, 10)
    backend = CountingBackend()
    with torch._dynamo.config.patch(
        capture_dynamic_output_shape_ops=True, capture_scalar_outputs=True
    ):
        outputs = compile_and_run(backend)
    print("compiled in one graph with the two capture settings switched on")
for batch, (large, buffer) in zip(batches, outputs, strict=True):
    torch.testing.assert_close(large, batch[batch > 0.5] * 2)
    assert buffer.shape == (int((batch > 0.5).sum()),)
print(
    f"sizes {[tuple(large.shape) for large, _ in outputs]}, compilations: "
    f"{backend.compilations}"
)
assert backend.compilations == 1

# %%
# Three batches, three different output sizes, one compilation: the size is
# a symbol in the graph, so a new value needs no new graph.
#
# ``int`` or ``SymInt``: recompiling for every size
# -------------------------------------------------
#
# ``custom_op`` writes ``SymInt`` for an ``int`` annotation. A schema written
# by hand, with ``torch.library.define``, ``custom_op(..., schema=...)`` or
# C++'s ``TORCH_LIBRARY``, says exactly what you type, and ``int`` there
# means a concrete integer. When the compiler passes a size that is a symbol
# to such an argument, it must turn the symbol into a number and guard on
# that number, and every new size then compiles again (PyTorch issues 121080 and
# 154851).
#
# ``zero_pad`` pads the last dimension with zeros to a given length. We
# define it twice from the same Python function, once with ``int length`` and
# once with ``SymInt length``, and call each inside a function compiled with
# ``dynamic=True`` that pads to twice the input's width, for six widths.


def check_zero_pad(x, length):
    if x.dim() == 0 or length < x.shape[-1]:
        raise ValueError(
            f"length must be at least the last dimension of x, got {length} "
            f"for shape {tuple(x.shape)}"
        )


def zero_pad_kernel(x, length):
    check_zero_pad(x, length)
    return torch.nn.functional.pad(x, (0, length - x.shape[-1])).contiguous()


def zero_pad_fake(x, length):
    check_zero_pad(x, length)
    return x.new_empty(*x.shape[:-1], length)


zero_pad = {}
for integer_type in ("int", "SymInt"):
    op = torch.library.custom_op(
        f"signatures::zero_pad_{integer_type.lower()}",
        zero_pad_kernel,
        mutates_args=(),
        schema=f"(Tensor x, {integer_type} length) -> Tensor",
    )
    op.register_fake(zero_pad_fake)
    zero_pad[integer_type] = op
    print(op._opoverload._schema)

widths = [3, 4, 5, 6, 7, 8]
compilations = {}
for integer_type, op in zero_pad.items():
    counter = CountingBackend()
    torch.compiler.reset()

    @torch.compile(backend=counter, dynamic=True)
    def pad_to_double(x, op=op):
        return op(x, 2 * x.shape[-1]) + 1

    compilations[integer_type] = []
    for width in widths:
        x = torch.randn(2, width)
        expected = torch.cat([x, torch.zeros(2, width)], dim=-1) + 1
        torch.testing.assert_close(pad_to_double(x), expected)
        compilations[integer_type].append(counter.compilations)
    print(
        f"{integer_type:>6}: compilations after each call {compilations[integer_type]}"
    )
assert compilations["SymInt"][-1] == 1
assert compilations["int"][-1] == len(widths)

# %%
# The ``int`` version compiled once per width; the ``SymInt`` version once in
# all. The figure shows the count growing call by call.

fig, ax = plt.subplots(figsize=(6.4, 3.4), layout="constrained")
positions = torch.arange(len(widths)).float()
for offset, (integer_type, colour) in zip(
    (-0.2, 0.2), (("int", "#d95f02"), ("SymInt", "#1b9e77")), strict=True
):
    ax.bar(
        positions + offset,
        compilations[integer_type],
        width=0.4,
        color=colour,
        label=f"length: {integer_type}",
    )
ax.set_xticks(positions.tolist(), [str(width) for width in widths])
ax.set_xlabel("width of the input, one call each")
ax.set_ylabel("compilations so far")
ax.set_title("zero_pad(x, 2 * x.shape[-1]) under torch.compile(dynamic=True)")
ax.legend(frameon=False)
plt.show()

# %%
# A fake kernel that is wrong only for some layouts
# -------------------------------------------------
#
# A fake kernel must produce the same strides as the real one. The mistake
# that slips through most often is ``torch.empty_like(x)``. It keeps the
# *order* of the strides of ``x`` (which dimension is innermost, which comes
# next) and makes the result dense: it copies the strides of a dense ``x``
# (contiguous, transposed, permuted), and gives an ``x`` with gaps (a strided
# slice) the dense strides of that same order. ``dense_in_order`` below
# computes that rule by hand, and the cell checks it on every layout.
#
# A kernel that always writes a fresh row-major result therefore agrees with
# ``empty_like`` exactly when the dimensions of ``x`` are in row-major order:
# a contiguous tensor, an empty one, a slice of a row-major tensor. It
# disagrees on every input in another order, with gaps or without. Samples
# in row-major order cannot catch it.
#
# ``softsign_bad`` below has such a kernel and such a fake kernel. (The
# ``softsign`` formula, ``x / (1 + |x|)``, is incidental.)


def softsign_kernel(x: torch.Tensor) -> torch.Tensor:
    check_floating(x)
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)  # row-major
    return out.copy_(x / (1 + x.abs()))


softsign_bad = torch.library.custom_op(
    "signatures::softsign_bad", softsign_kernel, mutates_args=()
)


@softsign_bad.register_fake
def _(x):
    check_floating(x)
    return torch.empty_like(x)  # wrong for inputs not in row-major order


def dense_in_order(x):
    """Dense strides in the order of x's strides, innermost dimension first."""
    strides, step = [0] * x.dim(), 1
    for dim in sorted(range(x.dim()), key=x.stride):
        strides[dim] = step
        step *= x.shape[dim]
    return tuple(strides)


block = torch.randn(2, 3, 4)
layouts = {
    "contiguous": block,
    "empty": torch.randn(0, 3),
    "strided slice": block[..., ::2],
    "transposed": block[0].t(),
    "permuted": block.permute(2, 0, 1),
    "sliced, transposed": block[0].t()[:, ::2],
}
for name, x in layouts.items():
    fake_strides = torch.empty_like(x).stride()
    print(
        f"{name:>18}: input {x.stride()}, real {softsign_bad(x).stride()}, "
        f"fake {fake_strides}"
    )
    assert fake_strides == dense_in_order(x), name
assert not torch.empty_like(layouts["sliced, transposed"]).is_contiguous()

# %%
# ``opcheck``'s ``test_faketensor`` compares the fake kernel's output with
# the real one, strides included. For CPU tensors it has done so since
# PyTorch 2.13 (for CUDA tensors, for longer). On an older release the CPU
# samples pass, so the cell also compiles a call: Inductor's generated code
# checks the size and strides of every output it receives from an operator
# against what the fake kernel promised, and raises an ``AssertionError``.
# (It does so while the private setting
# ``torch._inductor.config.size_asserts`` is on, as it is by default.)


def check_layout(op, x):
    verdicts = torch.library.opcheck(op, (x,), raise_exception=False)
    torch.compiler.reset()
    try:
        torch.compile(lambda t: op(t) * 2)(x)
        compiled = "runs"
    except AssertionError as error:
        compiled = first_line(error)
    return failed_tests(verdicts), compiled


caught = {}
for name, x in layouts.items():
    failed, compiled = check_layout(softsign_bad, x)
    caught[name] = (bool(failed), compiled != "runs")
    opcheck_verdict = ", ".join(failed) or "passes"
    print(f"{name:>18}: opcheck {opcheck_verdict}; compiled call: {compiled}")
assert torch._inductor.config.size_asserts
for name in ("contiguous", "empty", "strided slice"):
    assert caught[name] == (False, False), name
for name in ("transposed", "permuted", "sliced, transposed"):
    assert caught[name][1], name
opcheck_sees_cpu_strides = caught["permuted"][0]
print(f"opcheck compares CPU strides on this release: {opcheck_sees_cpu_strides}")
assert opcheck_sees_cpu_strides == (RELEASE >= (2, 13))

# %%
# Only the samples whose dimensions are out of row-major order expose the
# bug, the one with gaps included. The fix is to say what the kernel does:
# its result is always row-major. ``softsign`` is the same kernel with that
# fake kernel.

softsign = torch.library.custom_op(
    "signatures::softsign", softsign_kernel, mutates_args=()
)


@softsign.register_fake
def _(x):
    check_floating(x)
    return torch.empty_like(x, memory_format=torch.contiguous_format)


for device in devices:
    for name, x in layouts.items():
        failed, compiled = check_layout(softsign, x.to(device))
        assert not failed and compiled == "runs", (device, name, failed, compiled)
        grad_input = x.to(device).double().requires_grad_()
        verdicts = torch.library.opcheck(softsign, (grad_input,), raise_exception=False)
        assert list(failed_tests(verdicts)) == ["test_aot_dispatch_dynamic"]
print(f"fixed fake kernel: every layout passes on {devices}")

# %%
# The last check in that loop fed an input that requires grad, and
# ``opcheck`` reported, as it did for ``values_above``, that ``softsign`` has
# no backward formula: one more reason to include such a sample. Adding one
# (the derivative is ``1 / (1 + |x|) ** 2``) makes every sample pass:


def softsign_setup_context(ctx, inputs, output):
    ctx.save_for_backward(inputs[0])


def softsign_backward(ctx, grad):
    (x,) = ctx.saved_tensors
    return grad / (1 + x.abs()) ** 2


softsign.register_autograd(softsign_backward, setup_context=softsign_setup_context)
for device in devices:
    for x in layouts.values():
        grad_input = x.to(device).double().requires_grad_()
        verdicts = torch.library.opcheck(softsign, (grad_input,), raise_exception=False)
        assert not failed_tests(verdicts), failed_tests(verdicts)
assert torch.autograd.gradcheck(softsign, (block.double().requires_grad_(),))
print("softsign: opcheck and gradcheck pass")

# %%
# Conclusion
# ----------
#
# The Python signature is the operator's contract. Tuples give several
# outputs, and ``setup_context`` decides which carry gradients; ``Tensor |
# None`` and ``list[Tensor]`` give optional and list arguments, and a list
# result needs a list of gradients back. An ``int`` result computed from
# the sizes is computed from them in the fake kernel too; data-dependent
# ``int`` results and sizes come from ``new_dynamic_size()``. In a schema you
# write yourself, ``SymInt`` is the integer type that lets one compiled graph
# serve every size. Finally, samples decide what ``opcheck`` can see: those
# out of row-major order caught a fake kernel that every row-major sample
# passed, and the ones that require grad caught missing backward formulas.
#
# Related pages:
#
# * :ref:`sphx_glr_tutorials_fake_kernels_and_shapes.py` for symbolic sizes in
#   fake kernels
# * :ref:`sphx_glr_tutorials_custom_op_registrations.py` for the other
#   registrations
# * :ref:`sphx_glr_tutorials_strides_and_runtime.py` for the strides an
#   operator's inputs have under ``torch.compile``
