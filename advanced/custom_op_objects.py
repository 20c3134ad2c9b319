"""
Operators That Take Objects
===========================

After this page you will be able to pass a stateful object, such as a
key/value cache or a handle, to a custom operator, and keep that operator
working under ``torch.compile`` and ``torch.export``. You will write the
object as a C++ class, give tracing the fake class it needs, see the error
without one, and, on the releases that have it, pass a plain Python object
instead.

.. grid:: 2

    .. grid-item-card:: :octicon:`mortar-board;1em;` What you will learn
       :class-card: card-prerequisites

       * How to register a C++ class with ``TORCH_LIBRARY`` and declare
         operators that take it
       * Why tracing needs a fake class, and how ``__obj_flatten__`` and
         ``__obj_unflatten__`` build one
       * How compiled and exported programs keep calls on an object in order
       * How to pass a Python object through the private opaque-object API,
         and how to guard your code against its changes

    .. grid-item-card:: :octicon:`list-unordered;1em;` Prerequisites
       :class-card: card-prerequisites

       * PyTorch 2.7 or later
       * A C++ compiler and ``ninja``
       * :ref:`sphx_glr_tutorials_cpp_custom_ops.py`

.. admonition:: Checklist
   :class: checklist

   #. Hold the state in a ``torch::CustomClassHolder`` subclass, registered
      with ``m.class_<T>("Name")``; give it ``__obj_flatten__`` (the tensors
      tracing may see) and ``def_pickle`` (so PyTorch can copy and save it).
   #. Declare operators that take ``__torch__.torch.classes.<namespace>.<Name>``.
   #. Register a fake class with ``__obj_unflatten__``, and a fake kernel for
      every operator.
   #. Create the object outside the compiled function and pass it in.
   #. Compare compiled and exported results, and the object's state, with
      eager mode.
   #. For a Python object, feature-test the private opaque-object API, and
      declare an effect on every operator that reads or writes the object.
"""

# %%
# Setting up
# ----------
#
# The cache's tensors live on every device this run has.

import sys

import torch

if tuple(int(part) for part in torch.__version__.split(".")[:2]) < (2, 7):
    sys.exit(f"This page needs PyTorch 2.7 or later; this is {torch.__version__}.")

import copy
import importlib.util
import inspect
import io
import itertools
import math
import operator
import os

import matplotlib.pyplot as plt
from torch.utils import cpp_extension

torch.manual_seed(0)
RELEASE = tuple(int(part) for part in torch.__version__.split(".")[:2])
devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
hardware = torch.cuda.get_device_name() if torch.cuda.is_available() else "no CUDA"
print(f"PyTorch {torch.__version__}; devices exercised: {devices} ({hardware})")

# sphinx_gallery_start_ignore
import contextlib
import logging
import re


@contextlib.contextmanager
def logged_warnings(logger_name):
    """Collect, instead of printing, the warnings a PyTorch logger emits."""
    messages = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = lambda record: messages.append(message_of(record))
    logger = logging.getLogger(logger_name)
    # PyTorch may attach its own handler to the logger itself.
    handlers, logger.handlers = logger.handlers, [handler]
    logger.propagate = False
    try:
        yield messages
    finally:
        logger.handlers = handlers
        logger.propagate = True


def message_of(record):
    # PyTorch 2.10 to 2.14 log one export warning with a %s too many.
    try:
        return record.getMessage()
    except TypeError:
        return str(record.msg)


def missing_methods(messages):
    """The methods named by the fake-class registry's warnings."""
    pattern = re.compile(r"doesn't implement method (\w+)")
    return {m.group(1) for m in map(pattern.search, messages) if m}


# sphinx_gallery_end_ignore

# %%
# Why pass an object?
# -------------------
#
# When a language model generates text, each decoding step computes a key and
# a value for the new token, appends them to a cache, and lets the new query
# attend over everything cached so far. The cache outlives every call. An
# operator could take the whole cache as tensors plus a length, but then
# every caller manages the buffers, and the operator cannot own its layout.
# Passing the cache itself as one argument keeps the state where it belongs.
#
# An operator's schema accepts tensors, numbers, strings, lists, and also
# *custom classes*: C++ classes registered with PyTorch, which Python sees
# as ``torch.ScriptObject``. Here is the reference the operators must match,
# in plain PyTorch:


def attend_reference(keys, values, query):
    """Single-head attention of one query over every cached row."""
    weights = torch.softmax(keys @ query / math.sqrt(query.shape[-1]), dim=0)
    return weights @ values


# %%
# The C++ class and its operators
# -------------------------------
#
# ``KVCache`` derives from ``torch::CustomClassHolder`` and preallocates
# ``capacity`` rows. ``m.class_`` registers it with a constructor and a
# ``size`` method, plus two members that tracing uses:
#
# * ``__obj_flatten__`` returns (name, value) pairs: what a fake copy of the
#   object is built from while tracing. We list only the two tensors.
# * ``def_pickle`` gives the object ``__getstate__`` and ``__setstate__``,
#   which let PyTorch copy it and save it. Tracing works on a copy of the
#   real object (without them it logs a warning and works on the original);
#   the copy shares the tensors, so only the other state, such as the
#   length, is kept apart. ``torch.export.save`` writes the object through
#   them (below).
#
# The two operators take the class by its qualified name,
# ``__torch__.torch.classes.objects_ops.KVCache``. ``cache_append`` returns
# nothing; ``cache_attend`` reads the rows filled so far. Both are plain
# ATen code, registered for ``CompositeExplicitAutograd`` so one kernel
# serves every device.

CPP_SOURCE = r"""
#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/softmax.h>
#include <ATen/ops/zeros.h>
#include <torch/custom_class.h>
#include <torch/library.h>

#include <cmath>
#include <string>
#include <tuple>

namespace objects_ops {

struct KVCache : torch::CustomClassHolder {
  at::Tensor keys;    // (capacity, dim); rows [0, length) are filled
  at::Tensor values;  // (capacity, dim)
  int64_t length = 0;

  KVCache(int64_t capacity, int64_t dim, const std::string& device)
      : keys(at::zeros({capacity, dim}, at::Device(device))),
        values(at::zeros({capacity, dim}, at::Device(device))) {}
  KVCache(at::Tensor keys, at::Tensor values, int64_t length)
      : keys(std::move(keys)), values(std::move(values)), length(length) {}

  int64_t size() const { return length; }

  std::tuple<std::tuple<std::string, at::Tensor>,
             std::tuple<std::string, at::Tensor>>
  obj_flatten() const {
    return {{"keys", keys}, {"values", values}};
  }
};

void cache_append(const c10::intrusive_ptr<KVCache>& cache,
                  const at::Tensor& key, const at::Tensor& value) {
  TORCH_CHECK_VALUE(cache->length < cache->keys.size(0),
                    "cache_append: the cache is full");
  cache->keys.select(0, cache->length).copy_(key);
  cache->values.select(0, cache->length).copy_(value);
  cache->length += 1;
}

at::Tensor cache_attend(const c10::intrusive_ptr<KVCache>& cache,
                        const at::Tensor& query) {
  const at::Tensor keys = cache->keys.narrow(0, 0, cache->length);
  const at::Tensor values = cache->values.narrow(0, 0, cache->length);
  const double scale = 1.0 / std::sqrt(static_cast<double>(query.size(-1)));
  return at::matmul(at::softmax(at::matmul(keys, query) * scale, 0), values);
}

}  // namespace objects_ops

TORCH_LIBRARY(objects_ops, m) {
  using objects_ops::KVCache;
  m.class_<KVCache>("KVCache")
      .def(torch::init<int64_t, int64_t, std::string>())
      .def("size", &KVCache::size)
      .def("__obj_flatten__", &KVCache::obj_flatten)
      .def_pickle(
          [](const c10::intrusive_ptr<KVCache>& self) {
            return std::make_tuple(self->keys, self->values, self->length);
          },
          [](std::tuple<at::Tensor, at::Tensor, int64_t> state) {
            return c10::make_intrusive<KVCache>(
                std::get<0>(state), std::get<1>(state), std::get<2>(state));
          });
  m.def("cache_append(__torch__.torch.classes.objects_ops.KVCache cache, "
        "Tensor key, Tensor value) -> ()");
  m.def("cache_attend(__torch__.torch.classes.objects_ops.KVCache cache, "
        "Tensor query) -> Tensor");
}

TORCH_LIBRARY_IMPL(objects_ops, CompositeExplicitAutograd, m) {
  m.impl("cache_append", &objects_ops::cache_append);
  m.impl("cache_attend", &objects_ops::cache_attend);
}
"""

# %%
# We build it as :ref:`sphx_glr_tutorials_cpp_custom_ops.py` does: into a
# fixed folder under ``$TORCH_EXTENSIONS_DIR`` (PyTorch's default cache
# folder when unset), one per Python and PyTorch version, so later runs only
# load the library.

root = os.environ.get("TORCH_EXTENSIONS_DIR") or cpp_extension.get_default_build_root()
version_tag = (
    f"py{sys.version_info.major}{sys.version_info.minor}_torch{torch.__version__}"
)
build_directory = os.path.join(root, version_tag, "objects_ops_kvcache")
os.makedirs(build_directory, exist_ok=True)
options = {}
if "no_implicit_headers" in inspect.signature(cpp_extension.load_inline).parameters:
    options["no_implicit_headers"] = True
library = cpp_extension.load_inline(
    name="objects_ops_kvcache",
    cpp_sources=[CPP_SOURCE],
    extra_cflags=["-O2"],
    build_directory=build_directory,
    is_python_module=False,
    **options,
)
print(f"library: {library}")
KVCache = torch.classes.objects_ops.KVCache
cache_append = torch.ops.objects_ops.cache_append.default
cache_attend = torch.ops.objects_ops.cache_attend.default
print(cache_append._schema)

# %%
# Decoding in eager mode
# ----------------------
#
# One decoding step appends the new key and value, then attends. We run
# twelve steps on every device and compare each output with the reference
# applied to the rows appended so far.

CAPACITY, DIM, STEPS = 16, 8, 12
queries, keys, values = torch.randn(3, STEPS, DIM).unbind(0)


def decode_step(cache, query, key, value):
    cache_append(cache, key, value)
    return cache_attend(cache, query)


for device in devices:
    cache = KVCache(CAPACITY, DIM, device)
    for step in range(STEPS):
        out = decode_step(cache, *(t[step].to(device) for t in (queries, keys, values)))
        expected = attend_reference(keys[: step + 1], values[: step + 1], queries[step])
        torch.testing.assert_close(out.cpu(), expected)
    assert cache.size() == STEPS
print(f"eager: {STEPS} steps match the reference on {devices}; size() = {cache.size()}")

twin = copy.deepcopy(cache)  # through def_pickle
twin_keys, cache_keys = (dict(c.__obj_flatten__())["keys"] for c in (twin, cache))
assert twin.size() == cache.size() and twin_keys.data_ptr() == cache_keys.data_ptr()
print(f"a copy has size() = {twin.size()} and shares the original's tensors")

# %%
# Each call changed the object: ``size()`` counts every appended row, and a
# copy made through ``def_pickle`` keeps the count but not its own tensors.
#
# Compiling without a fake class
# ------------------------------
#
# ``torch.compile`` and ``torch.export`` trace with fake tensors, which have
# shapes but no data. A real object cannot take part in that, so before
# tracing starts, every argument of a class that defines
# ``__obj_flatten__`` is swapped for a fake one. PyTorch cannot invent a
# fake ``KVCache``; without one, compiling fails before a single operator
# runs:


def decode_two_steps(cache, queries, keys, values):
    first = decode_step(cache, queries[0], keys[0], values[0])
    second = decode_step(cache, queries[1], keys[1], values[1])
    return torch.stack([first, second])


untouched = KVCache(CAPACITY, DIM, "cpu")
try:
    torch.compile(decode_two_steps, backend="aot_eager", fullgraph=True)(
        untouched, queries, keys, values
    )
except torch._dynamo.exc.InternalTorchDynamoError as err:
    cpp_needs_fake_class = True
    message = str(err).splitlines()[0]
    print(f"{type(err).__name__}: {message[:160]}...")
    assert "haven't registered a fake class" in message
else:
    raise AssertionError("expected compiling without a fake class to fail")
assert untouched.size() == 0
torch._dynamo.reset()

# %%
# The message names the missing piece and the function that registers it.
# The real object was not touched.
#
# The fake class
# --------------
#
# A fake class stands in for the C++ class while tracing. Its
# ``__obj_unflatten__`` receives what ``__obj_flatten__`` returned, with each
# tensor already replaced by a fake one, and builds the stand-in. The fake
# kernels then receive that stand-in in place of the object. Ours never read
# it: an appended row changes no output shape, and attention returns the
# query's shape.
#
# The decorator is ``register_fake_class``. No public ``torch.library``
# spelling exists in this release, only the private module
# ``torch._library``; the lookup below takes the public one first if a
# later release adds it, and says which one it used.

register_fake_class = getattr(torch.library, "register_fake_class", None)
print(f"torch.library.register_fake_class exists: {register_fake_class is not None}")
if register_fake_class is None:
    register_fake_class = torch._library.register_fake_class  # private module


@register_fake_class("objects_ops::KVCache")
class FakeKVCache:
    def __init__(self, keys, values):
        self.keys = keys
        self.values = values

    @classmethod
    def __obj_unflatten__(cls, flattened):
        return cls(**dict(flattened))


@torch.library.register_fake("objects_ops::cache_append")
def _(cache, key, value):
    return None


@torch.library.register_fake("objects_ops::cache_attend")
def _(cache, query):
    return torch.empty_like(query)


# %%
# The first compile with it runs, but PyTorch compares the fake class with
# the C++ one and logs a warning for each method the fake one lacks. The
# page collects these warnings instead of printing them:

with logged_warnings("torch._library.fake_class_registry") as warnings_logged:
    torch.compile(decode_two_steps, backend="aot_eager", fullgraph=True)(
        KVCache(CAPACITY, DIM, "cpu"), queries, keys, values
    )
print(f"methods the fake class lacks: {sorted(missing_methods(warnings_logged))}")
assert "size" in missing_methods(warnings_logged)
torch._dynamo.reset()

# %%
# Before PyTorch 2.10 the list also holds ``__setstate__``: the check
# misspelled the name it meant to skip. Every other method needs a fake.
# Ours cannot answer ``size()`` truthfully, since it never sees the length,
# so it refuses: compiled code must not call it.


def fake_size(self):
    raise NotImplementedError(
        "size() needs the real object; call it outside compiled code"
    )


FakeKVCache.size = fake_size

# %%
# Compiling and checking the object's state
# -----------------------------------------
#
# Now the two-step function compiles into one graph. We call it three times
# on a fresh cache and compare, after every call, both the outputs and the
# object's size with the same calls in eager mode, counting how often
# Dynamo traces. Only the misspelled ``__setstate__`` can still be reported.

from torch._dynamo.testing import CompileCounterWithBackend  # a testing helper
from torch._export.serde.serialize import SerializeError  # private module


def compare_compiled_with_eager(device):
    torch._dynamo.reset()
    counter = CompileCounterWithBackend("aot_eager")
    compiled = torch.compile(decode_two_steps, backend=counter, fullgraph=True)
    eager_cache = KVCache(CAPACITY, DIM, device)
    compiled_cache = KVCache(CAPACITY, DIM, device)
    for call in range(3):
        window = slice(2 * call, 2 * call + 2)
        inputs = [t[window].to(device) for t in (queries, keys, values)]
        expected = decode_two_steps(eager_cache, *inputs)
        torch.testing.assert_close(compiled(compiled_cache, *inputs), expected)
        assert compiled_cache.size() == eager_cache.size() == 2 * call + 2
    return counter.frame_count, compiled_cache


compiled_caches = {}
with logged_warnings("torch._library.fake_class_registry") as warnings_logged:
    for device in devices:
        traces, compiled_caches[device] = compare_compiled_with_eager(device)
        size = compiled_caches[device].size()
        print(f"{device}: 3 calls match eager, size() = {size}, {traces} trace")
        assert traces == 1
assert missing_methods(warnings_logged) == (
    {"__setstate__"} if RELEASE < (2, 10) else set()
)

# %%
# One trace served all three calls although the cache grew: the fake object
# holds only the two tensors, whose shapes never change. Dynamo guards on
# everything ``__obj_flatten__`` returns, as it guards on the compiled
# function's own arguments: a tensor of another shape, or any other value
# that changes (an ``int`` such as the length, had we listed it), means a
# new trace. So list only what stays fixed for the object's life. A cache
# of another capacity shows the guard at work, and Inductor, the default
# backend, gives the same results as the ``aot_eager`` backend used so far:

torch._dynamo.reset()
counter = CompileCounterWithBackend("aot_eager")
compiled = torch.compile(decode_two_steps, backend=counter, fullgraph=True)
compiled(KVCache(CAPACITY, DIM, "cpu"), queries, keys, values)
try:
    compiled(KVCache(2 * CAPACITY, DIM, "cpu"), queries, keys, values)
except NotImplementedError as err:  # PyTorch 2.7 and 2.8
    print(f"capacity {2 * CAPACITY}: {type(err).__name__}: {err}")
    assert RELEASE < (2, 9) and "'__getitem__' is not implemented" in str(err)
else:
    print(f"capacity {2 * CAPACITY}: traces so far {counter.frame_count}")
    assert RELEASE >= (2, 9) and counter.frame_count == 2

torch._dynamo.reset()
inductor_cache, eager_cache = (
    KVCache(CAPACITY, DIM, "cpu"),
    KVCache(CAPACITY, DIM, "cpu"),
)
torch.testing.assert_close(
    torch.compile(decode_two_steps, fullgraph=True)(
        inductor_cache, queries, keys, values
    ),
    decode_two_steps(eager_cache, queries, keys, values),
)
assert inductor_cache.size() == eager_cache.size() == 2
print(f"Inductor: matches eager, size() = {inductor_cache.size()}")

# %%
# From PyTorch 2.9 the new capacity caused a second trace; on 2.7 and 2.8
# the changed guard raises ``NotImplementedError`` instead, so keep one
# capacity per compiled function there.
#
# CUDA graphs (``torch.compile(mode="reduce-overhead")``) are another
# matter. A graph replay repeats only the GPU work recorded once;
# ``cache_append`` advances ``length`` on the CPU, which a replay would not
# repeat. Keep operators that change host state out of captured regions:
# :ref:`sphx_glr_tutorials_strides_and_runtime.py` shows the
# ``cudagraph_unsafe`` tag that does so.
#
# The state lives in the object, not in the graph. Reading the keys back
# from the CPU cache shows the six rows the compiled calls appended, and the
# attention weights of each step over them:

filled_keys = dict(compiled_caches["cpu"].__obj_flatten__())["keys"]
torch.testing.assert_close(filled_keys[:6], keys[:6])
assert not filled_keys[6:].any()
weights = torch.full((6, CAPACITY), float("nan"))
for step in range(6):
    scores = filled_keys[: step + 1] @ queries[step] / math.sqrt(DIM)
    weights[step, : step + 1] = torch.softmax(scores, dim=0)

fig, ax = plt.subplots(figsize=(6.4, 2.8), layout="constrained")
image = ax.imshow(weights, cmap="viridis", vmin=0, vmax=1, aspect="auto")
for boundary in (1.5, 3.5):
    ax.axhline(boundary, color="white", linewidth=2)
ax.set_yticks(range(6), [f"call {s // 2 + 1}, step {s % 2 + 1}" for s in range(6)])
ax.set_xlabel("cache row (blank: not yet filled)")
ax.set_title("Each compiled call attends over rows earlier calls left in the object")
fig.colorbar(image, ax=ax, label="attention weight")
plt.show()

# %%
# Each call of the compiled function saw every row its predecessors had
# appended: the object carried the state from one call to the next, and the
# rows beyond the sixth stayed empty.
#
# Calls on an object stay in order
# --------------------------------
#
# Nothing in the graph's data flow says that ``cache_attend`` must run after
# ``cache_append``: the append returns nothing. PyTorch treats an operator
# that takes a C++ class (other than a few of its own) as having a side
# effect, and threads an
# *effect token* through those calls: each call takes the token the previous
# one returned. ``torch.export`` shows it. The exported program first keeps
# the operators as they are; decomposing it to the core ATen set rewrites
# each call as ``with_effects``. (We spell out ``strict=False``, the default
# only from PyTorch 2.8 on.)


class Decoder(torch.nn.Module):
    def forward(self, cache, queries, keys, values):
        return decode_two_steps(cache, queries, keys, values)


exported = torch.export.export(
    Decoder(), (KVCache(CAPACITY, DIM, "cpu"), queries, keys, values), strict=False
)
strict_default = inspect.signature(torch.export.export).parameters["strict"].default
assert (strict_default is False) == (RELEASE >= (2, 8))
fresh, reference_cache = KVCache(CAPACITY, DIM, "cpu"), KVCache(CAPACITY, DIM, "cpu")
torch.testing.assert_close(
    exported.module()(fresh, queries, keys, values),
    decode_two_steps(reference_cache, queries, keys, values),
)
assert fresh.size() == reference_cache.size() == 2

decomposed = exported.run_decompositions()
effect_calls = [
    n for n in decomposed.graph.nodes if n.target is torch.ops.higher_order.with_effects
]
for node in effect_calls:
    print(node.format_node())
assert [n.args[1] for n in effect_calls] == [cache_append, cache_attend] * 2
for previous, node in itertools.pairwise(effect_calls):
    token_in = node.args[0]
    assert token_in.target is operator.getitem and token_in.args[0] is previous

# %%
# The four calls form a chain: each ``with_effects`` takes as its first
# argument the token that the previous one returned, so no compiler may
# drop or reorder them. The exported program also ran on a fresh cache and
# left it with two rows, as eager mode did.
#
# :ref:`sphx_glr_tutorials_custom_op_side_effects.py` shows what happens to
# an operator whose side effect PyTorch cannot see, and how to declare it.
#
# Saving an exported program
# --------------------------
#
# An object held by the module, rather than passed in, becomes a constant
# of the exported program, marked ``CUSTOM_OBJ`` in its signature.
# ``torch.export.save`` writes it through ``def_pickle``, and
# ``torch.export.load`` gives the loaded program an object of its own, in
# the state it had at export time:


class DecoderWithCache(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.cache = KVCache(CAPACITY, DIM, "cpu")

    def forward(self, query, key, value):
        return decode_step(self.cache, query, key, value)


def save_and_load(program):
    buffer = io.BytesIO()
    torch.export.save(program, buffer)
    buffer.seek(0)
    with logged_warnings("torch._export.serde.serialize") as load_warnings:
        loaded = torch.export.load(buffer)
    return loaded, load_warnings


first_step = (queries[0], keys[0], values[0])
with_cache = torch.export.export(DecoderWithCache(), first_step, strict=False)
print([spec.kind.name for spec in with_cache.graph_signature.input_specs])
assert with_cache.graph_signature.input_specs[0].kind.name == "CUSTOM_OBJ"
loaded, load_warnings = save_and_load(with_cache)
cpp_saved = True
torch.testing.assert_close(
    loaded.module()(*first_step), attend_reference(keys[:1], values[:1], queries[0])
)
print(f"loaded constant: size() = {loaded.constants['cache'].size()}")
assert loaded.constants["cache"].size() == 1 and not load_warnings
assert with_cache.constants["cache"].size() == 0

# The program exported earlier takes the cache as an input instead.
reloaded, load_warnings = save_and_load(exported)
fresh, reference_cache = KVCache(CAPACITY, DIM, "cpu"), KVCache(CAPACITY, DIM, "cpu")
torch.testing.assert_close(
    reloaded.module()(fresh, queries, keys, values),
    decode_two_steps(reference_cache, queries, keys, values),
)
retried = any("Fallback to weights_only=False" in m for m in load_warnings)
print(f"input case: loaded and ran; weights_only fallback logged: {retried}")
assert retried == (RELEASE >= (2, 10))

# %%
# The loaded program appended to its own copy of the cache; the exported
# one still holds an empty cache. A program that takes the object as an
# input also saves and loads, but its saved example inputs hold a
# ``torch.ScriptObject``, which ``torch.load`` refuses with
# ``weights_only=True``. From PyTorch 2.10, ``torch.export.load`` then
# tries again with ``weights_only=False`` and logs a long warning
# about it: harmless for a file you made, a reason for care with one you did
# not (unpickling can run code).

# %%
# A Python object instead of a C++ class
# --------------------------------------
#
# Writing C++ for a cache that Python code owns is a lot of ceremony. Since
# PyTorch 2.10 a custom operator can take a plain Python object, through
# *opaque objects* in ``torch._library.opaque_object``. That module is
# private, and its API has changed twice since:
#
# * 2.10: ``register_opaque_type(cls, typ="reference")``, for any class.
# * 2.11: the class must derive from ``OpaqueBase``; new keyword arguments
#   such as ``hoist``.
# * 2.14: the function is renamed ``register_custom_class``, the base class
#   ``CustomClassBase``, and the ``typ`` values ``"reference"`` (mutable)
#   and ``"value"`` (constant) become ``"symbolic"`` and ``"constant"``.
#
# Code that compares version numbers breaks on such changes, pre-releases
# included. Test for the feature instead: a name with ``hasattr``, a
# keyword with ``inspect.signature``. The cell below does that, prints which
# branch ran, and checks each row of the list above against this release.

HAS_OPAQUE_OBJECTS = (
    importlib.util.find_spec("torch._library.opaque_object") is not None
)
assert HAS_OPAQUE_OBJECTS == (RELEASE >= (2, 10))
if HAS_OPAQUE_OBJECTS:
    from torch._library import opaque_object  # private: changes between releases

    register_class = getattr(opaque_object, "register_custom_class", None)
    mutable_kind, constant_kind = "symbolic", "constant"
    if register_class is None:
        register_class = opaque_object.register_opaque_type
        mutable_kind, constant_kind = "reference", "value"
    opaque_base = getattr(opaque_object, "CustomClassBase", None)
    opaque_base = opaque_base or getattr(opaque_object, "OpaqueBase", object)
    takes_hoist = "hoist" in inspect.signature(register_class).parameters
    print(
        f"opaque-object branch: {register_class.__name__}(typ={mutable_kind!r}), "
        f"base class {opaque_base.__name__}, hoist= accepted: {takes_hoist}"
    )
    assert (register_class.__name__ == "register_custom_class") == (RELEASE >= (2, 14))
    assert (opaque_base is object) == (RELEASE < (2, 11))
    assert takes_hoist == (RELEASE >= (2, 11))
else:
    print("opaque-object branch: skipped, torch._library.opaque_object does not exist")

# %%
# The same cache in Python: a class registered as a mutable opaque type, and
# two operators whose type hints name it. The schema shows the class as
# ``PyObject``. Fake kernels need no fake class: tracing passes the object
# through untouched, and the kernels must not read it.

if HAS_OPAQUE_OBJECTS:

    class PyKVCache(opaque_base):
        def __init__(self, capacity, dim, device):
            self.keys = torch.zeros(capacity, dim, device=device)
            self.values = torch.zeros(capacity, dim, device=device)
            self.length = 0

    register_class(PyKVCache, typ=mutable_kind)

    @torch.library.custom_op("objects_py::cache_append", mutates_args=())
    def py_cache_append(
        cache: PyKVCache, key: torch.Tensor, value: torch.Tensor
    ) -> None:
        if cache.length == cache.keys.shape[0]:
            raise ValueError("cache_append: the cache is full")
        cache.keys[cache.length] = key
        cache.values[cache.length] = value
        cache.length += 1

    @torch.library.custom_op("objects_py::cache_attend", mutates_args=())
    def py_cache_attend(cache: PyKVCache, query: torch.Tensor) -> torch.Tensor:
        filled = slice(0, cache.length)
        return attend_reference(cache.keys[filled], cache.values[filled], query)

    py_cache_append.register_fake(lambda cache, key, value: None)
    py_cache_attend.register_fake(lambda cache, query: torch.empty_like(query))
    print(py_cache_append._opoverload._schema)

# %%
# Compile one decoding step with these operators, and look at the cache:


def py_decode_step(cache, query, key, value):
    py_cache_append(cache, key, value)
    return py_cache_attend(cache, query)


py_append_survived = None
if HAS_OPAQUE_OBJECTS:
    torch._dynamo.reset()
    py_cache = PyKVCache(CAPACITY, DIM, "cpu")
    out = torch.compile(py_decode_step, backend="aot_eager", fullgraph=True)(
        py_cache, *first_step
    )
    print(f"after one compiled step: length = {py_cache.length}, output = {out}")
    py_append_survived = py_cache.length == 1
    assert not py_append_survived and not out.any()

# %%
# The append never ran, and attention read an empty cache. Unlike an
# operator on a C++ class, an operator on a Python object has no side effect
# as far as PyTorch knows, and an operator that returns nothing and mutates
# no declared argument is dead code to the compiler. Declare the effect on
# both operators with ``register_effect``, which
# :ref:`sphx_glr_tutorials_custom_op_side_effects.py` explains; it exists on
# every release that has opaque objects.

if HAS_OPAQUE_OBJECTS:
    for py_op in (py_cache_append, py_cache_attend):
        py_op.register_effect(torch.library.EffectType.ORDERED)
    torch._dynamo.reset()
    counter = CompileCounterWithBackend("aot_eager")
    compiled_py_step = torch.compile(py_decode_step, backend=counter, fullgraph=True)
    for device in devices:
        eager_cache, compiled_cache = (
            PyKVCache(CAPACITY, DIM, device) for _ in range(2)
        )
        for step in range(3):
            inputs = [t[step].to(device) for t in (queries, keys, values)]
            expected = py_decode_step(eager_cache, *inputs)
            torch.testing.assert_close(
                compiled_py_step(compiled_cache, *inputs), expected
            )
        assert compiled_cache.length == eager_cache.length == 3
    print(f"declared: steps match eager on {devices}; {counter.frame_count} trace(s)")
    assert counter.frame_count == len(devices)

    torch._dynamo.reset()
    inductor_cache, eager_cache = (PyKVCache(CAPACITY, DIM, "cpu") for _ in range(2))
    torch.testing.assert_close(
        torch.compile(py_decode_step, fullgraph=True)(inductor_cache, *first_step),
        py_decode_step(eager_cache, *first_step),
    )
    assert inductor_cache.length == eager_cache.length == 1
    print("Inductor: matches eager")

# %%
# Now every step matches eager mode, under Inductor too. The object must
# come from outside the compiled function, as an argument or a global; one
# created inside would be frozen into the graph as a constant, and PyTorch
# refuses it (pytorch/pytorch#176044):

if HAS_OPAQUE_OBJECTS:
    torch._dynamo.reset()
    global_cache = PyKVCache(CAPACITY, DIM, "cpu")

    def decode_with_global_cache(query, key, value):
        return py_decode_step(global_cache, query, key, value)

    torch.compile(decode_with_global_cache, backend="aot_eager", fullgraph=True)(
        *first_step
    )
    print(f"global cache: length = {global_cache.length}")
    assert global_cache.length == 1

    def decode_with_own_cache(query, key, value):
        return py_decode_step(PyKVCache(CAPACITY, DIM, "cpu"), query, key, value)

    try:
        torch.compile(decode_with_own_cache, backend="aot_eager", fullgraph=True)(
            *first_step
        )
    except torch._dynamo.exc.Unsupported as err:
        print(f"{type(err).__name__}: {str(err).splitlines()[0]}")
    else:
        raise AssertionError(
            "expected an object created inside the graph to be refused"
        )

# %%
# Exporting and saving
# --------------------
#
# From PyTorch 2.11, a program that takes the Python cache exports, and its
# graph keeps the two operators in order. Saving it is another matter:
# ``torch.export.save`` does not know how to write a Python object.

py_saved = None
if HAS_OPAQUE_OBJECTS:

    class PyDecoder(torch.nn.Module):
        def forward(self, cache, query, key, value):
            return py_decode_step(cache, query, key, value)

    try:
        py_exported = torch.export.export(
            PyDecoder(), (PyKVCache(CAPACITY, DIM, "cpu"), *first_step), strict=False
        )
    except AssertionError:  # PyTorch 2.10, inside export's constant lifting
        py_exported = None
        print("export: AssertionError on this release")
    assert (py_exported is None) == (RELEASE < (2, 11))
    if py_exported is not None:
        fresh_py_cache = PyKVCache(CAPACITY, DIM, "cpu")
        torch.testing.assert_close(
            py_exported.module()(fresh_py_cache, *first_step),
            attend_reference(keys[:1], values[:1], queries[0]),
        )
        assert fresh_py_cache.length == 1
        try:
            torch.export.save(py_exported, io.BytesIO())
        except SerializeError as err:
            py_saved = False
            print(
                f"export: ran; save: {type(err).__name__}: {str(err).splitlines()[0]}"
            )
        else:
            py_saved = True
        assert py_saved is False

# %%
# The exported program ran on a fresh cache; saving it raised
# ``SerializeError``. A program meant to be saved, or run without Python,
# needs the C++ class.
#
# More registration options
# -------------------------
#
# ``register_class`` has grown keyword arguments since 2.10. ``typ`` also
# accepts a constant kind, for immutable values such as a configuration:
# compiled code guards on their equality, so registration refuses a class
# without its own ``__eq__`` (and asks for ``__hash__`` and ``__fx_repr__``
# too). From 2.11, ``guard_fn`` returns the values of a mutable object that
# compiled code depends on, so that a change means a new trace, and
# ``members`` names the attributes or methods tracing may use:
# ``MemberType.USE_REAL`` reads them from the real object while compiling.
# That is the answer when a fake kernel needs, say, a count stored in the
# object: fake kernels receive a stand-in that has only the listed members.

if HAS_OPAQUE_OBJECTS:
    parameters = inspect.signature(register_class).parameters
    keywords = [k for k in ("hoist", "guard_fn", "members") if k in parameters]
    print(f"{register_class.__name__} keywords besides typ: {keywords}")
    assert (keywords == ["hoist", "guard_fn", "members"]) == (RELEASE >= (2, 11))

    class Setting(opaque_base):  # no __eq__ of its own
        pass

    try:
        register_class(Setting, typ=constant_kind)
    except TypeError as err:
        assert "expected to have a non-default `__eq__`" in str(err)
        print(
            f"typ={constant_kind!r} without __eq__: {type(err).__name__}, as expected"
        )
    else:
        raise AssertionError("expected a constant type without __eq__ to be refused")

# %%
# A class ``Tiling`` whose fake kernel needs its ``repeats`` for the
# output's shape, and that also holds a ``note`` it does not list:

if HAS_OPAQUE_OBJECTS and "members" in keywords:

    class Tiling(opaque_base):
        def __init__(self, repeats, note):
            self.repeats, self.note = repeats, note

    register_class(
        Tiling,
        typ=mutable_kind,
        members={"repeats": opaque_object.MemberType.USE_REAL},
        guard_fn=lambda tiling: [tiling.repeats],
    )

    @torch.library.custom_op("objects_py::tile", mutates_args=())
    def tile(tiling: Tiling, x: torch.Tensor) -> torch.Tensor:
        return x.repeat(tiling.repeats)

    fake_saw_note = []

    @tile.register_fake
    def _(tiling, x):
        fake_saw_note.append(hasattr(tiling, "note"))
        return x.new_empty(x.shape[0] * tiling.repeats)

    def tile_query(tiling, query):
        return tile(tiling, query)

    torch._dynamo.reset()
    counter = CompileCounterWithBackend("aot_eager")
    compiled_tile = torch.compile(tile_query, backend=counter, fullgraph=True)
    for repeats in (2, 2, 3):
        tiled = compiled_tile(Tiling(repeats, "not listed"), queries[0])
        torch.testing.assert_close(tiled, queries[0].repeat(repeats))
    print(f"traces for repeats 2, 2, 3: {counter.frame_count}; ", end="")
    print(f"fake kernel could read note: {any(fake_saw_note)}")
    assert counter.frame_count == 2 and fake_saw_note and not any(fake_saw_note)

# %%
# The fake kernel read ``repeats`` but not ``note``, and a new ``repeats``
# meant a new trace, because ``guard_fn`` lists it.
#
# Which one to use
# ----------------
#
# This run's findings, side by side:


def yes_no(flag):
    return "-" if flag is None else ("yes" if flag else "no")


public_api = [
    hasattr(torch.library, n) for n in ("register_fake_class", "register_custom_class")
]
summary = [
    (
        "public Python API",
        yes_no(public_api[0]),
        yes_no(public_api[1] if HAS_OPAQUE_OBJECTS else None),
    ),
    (
        "fake class needed",
        yes_no(cpp_needs_fake_class),
        yes_no(False if HAS_OPAQUE_OBJECTS else None),
    ),
    (
        "calls ordered by default",
        yes_no(len(effect_calls) == 4),
        yes_no(py_append_survived),
    ),
    ("saved by torch.export.save", yes_no(cpp_saved), yes_no(py_saved)),
    ("kernel written in", "C++", "Python" if HAS_OPAQUE_OBJECTS else "-"),
]
print(f"{'':<28}{'C++ class':<12}Python opaque object (PyTorch 2.10+)")
for name, cpp_column, python_column in summary:
    print(f"{name:<28}{cpp_column:<12}{python_column}")

# %%
# The C++ side is public (``TORCH_LIBRARY``'s ``m.class_``,
# ``torch::CustomClassHolder``, ``torch.classes``); the Python registration
# of its fake class is private, and so is the whole opaque-object API.
# Choose the C++ class when the kernel is C++ anyway, when the exported
# program must be saved or run without Python, or when you need releases
# before 2.10. Choose an opaque object when the state is Python's, and test
# on every release you support, since the API keeps changing.
#
# Conclusion
# ----------
#
# An operator can take a stateful object as long as tracing has something to
# put in its place: a fake class built from ``__obj_flatten__`` for a C++
# class, or nothing at all for a registered opaque Python object. Create the
# object outside the compiled region, compare the object's state as well as
# the outputs with eager mode, and make sure every call that touches it is
# ordered: automatically for C++ classes, with ``register_effect`` for
# Python objects.
#
# Related pages:
#
# * :ref:`sphx_glr_tutorials_custom_op_side_effects.py` for effects and
#   ``register_effect``
# * :ref:`sphx_glr_tutorials_cpp_custom_ops.py` for building C++ operators
# * :ref:`sphx_glr_tutorials_custom_ops_in_export.py` for saving and loading
#   exported programs
