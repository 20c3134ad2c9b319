"""
Operators With Side Effects
===========================

After this page you will be able to write an operator whose job is a side
effect, such as logging a statistic, writing a file or sending a message, and
keep every call of it, in order, when ``torch.compile`` or ``torch.export``
runs your code. You will watch the calls disappear without a declaration,
declare the effect, and check what the log received, not only what the graph
says.

.. grid:: 2

    .. grid-item-card:: :octicon:`mortar-board;1em;` What you will learn
       :class-card: card-prerequisites

       * Why the compiler, and export's decomposition, delete an operator
         that returns nothing
       * How ``register_effect(EffectType.ORDERED)`` keeps every call, in
         order, with and without gradients, and what an effect token is
       * How to declare an effect on an operator not made with ``custom_op``
       * Why a warm compile cache can hide a new declaration, and how to
         clear it

    .. grid-item-card:: :octicon:`list-unordered;1em;` Prerequisites
       :class-card: card-prerequisites

       * PyTorch 2.10 or later
       * :ref:`sphx_glr_tutorials_python_custom_ops.py`

.. admonition:: Checklist
   :class: checklist

   #. Give the side effect an operator of its own: ``custom_op`` with
      ``mutates_args=()``, returning ``None``, with a fake kernel that
      returns ``None``.
   #. Declare it right after defining it, before anything compiles:
      ``op.register_effect(torch.library.EffectType.ORDERED)``. The
      declaration does nothing for an operator that mutates an argument.
   #. Test the effect itself under ``torch.compile``, with and without
      gradients, and after ``run_decompositions()`` of an export: what the
      log or file received, and in which order, against eager mode.
   #. For an operator not made with ``custom_op`` (``Library.define``, C++),
      use the private ``torch.library._register_effectful_op``.
   #. After adding a declaration to code that has compiled before, delete
      the compile cache folder once (``TORCHINDUCTOR_CACHE_DIR``);
      ``TORCHINDUCTOR_AUTOGRAD_CACHE=0`` does not clear it.
   #. Keep operators with host-side effects out of CUDA graphs
      (``mode="reduce-overhead"``): a replay skips them.
"""

# %%
# Setting up
# ----------
#
# The operators on this page record values from CPU tensors. On a machine
# with a CUDA GPU, one cell also records a CUDA graph.

import sys

import torch

if tuple(int(part) for part in torch.__version__.split(".")[:2]) < (2, 10):
    sys.exit(f"This page needs PyTorch 2.10 or later; this is {torch.__version__}.")

import itertools
import operator
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import matplotlib.pyplot as plt
from torch.library import EffectType

torch.manual_seed(0)
devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
hardware = torch.cuda.get_device_name() if torch.cuda.is_available() else "no CUDA"
print(f"PyTorch {torch.__version__}; devices exercised: {devices} ({hardware})")

# %%
# An operator that only has an effect
# -----------------------------------
#
# A model that reports statistics of its activations while it runs, for a
# dashboard or to catch a divergence early, needs an operator that looks at a
# tensor and writes somewhere. ``record`` appends a tag and the tensor's mean
# and largest magnitude to ``journal``, a Python list standing in for a log,
# and returns nothing. As a custom operator it keeps ``.item()`` and the
# list out of the traced code, which
# :ref:`sphx_glr_tutorials_python_custom_ops.py` shows breaking the graph.

journal = []


@torch.library.custom_op("effects_ops::record", mutates_args=())
def record(x: torch.Tensor, tag: str) -> None:
    journal.append((tag, round(x.mean().item(), 4), round(x.abs().max().item(), 4)))


@record.register_fake
def _(x, tag):
    return None


layer = torch.nn.Linear(6, 6)


def monitored_forward(x):
    record(x, "input")
    hidden = torch.relu(layer(x))
    record(hidden, "hidden")
    out = layer(hidden).tanh()
    record(out, "output")
    return out


def run_and_read_journal(function, x):
    """Call ``function`` and return the output and what ``journal`` received."""
    journal.clear()
    with torch.no_grad():
        out = function(x)
    return out, list(journal)


sample = torch.randn(4, 6)
expected_out, expected_journal = run_and_read_journal(monitored_forward, sample)
for entry in expected_journal:
    print(entry)
assert [tag for tag, *_ in expected_journal] == ["input", "hidden", "output"]

# %%
# In eager mode every call runs where the code says: three entries, in order.
#
# Compiling without a declaration
# -------------------------------
#
# Now compile the same function, with ``aot_eager`` (PyTorch's tracing
# without code generation) and with the default Inductor backend:

journals = {"eager": expected_journal}
for backend in ("aot_eager", "inductor"):
    torch.compiler.reset()
    compiled = torch.compile(monitored_forward, backend=backend, fullgraph=True)
    out, journals[f"{backend}, undeclared"] = run_and_read_journal(compiled, sample)
    torch.testing.assert_close(out, expected_out)
    received = journals[f"{backend}, undeclared"]
    print(f"{backend}: output matches eager; the journal received {received}")
    assert received == []

# %%
# The outputs are right and ``journal`` is empty. Nothing failed and nothing
# warned: the three calls were deleted. ``torch.export`` behaves differently
# at each of its two steps. ``torch.export.export`` keeps every call, and the
# exported program, run as a module, fills ``journal``. Its
# ``run_decompositions()``, which lowers the program to the core ATen
# operators and which AOTInductor and other lowerings run, deletes them
# (:ref:`edge-decompositions-drop-call`):


class MonitoredModel(torch.nn.Module):
    def forward(self, x):
        return monitored_forward(x)


def record_calls(program):
    return [n for n in program.graph.nodes if "record" in str(n.target)]


exported = torch.export.export(MonitoredModel(), (sample,))
decomposed = exported.run_decompositions()
for label, program in [("exported", exported), ("decomposed", decomposed)]:
    _, received = run_and_read_journal(program.module(), sample)
    journals[f"{label}, undeclared"] = received
    calls = len(record_calls(program))
    print(f"{label}: {calls} record calls in the graph, {len(received)} entries")
assert len(record_calls(exported)) == 3
assert journals["exported, undeclared"] == expected_journal
assert record_calls(decomposed) == [] and journals["decomposed, undeclared"] == []

# %%
# A test that only exports would pass, and the program a deployment
# compiles would have lost every call. The schema says why:

schema = torch.ops.effects_ops.record.default._schema
print(schema)
assert schema.returns == [] and not schema.is_mutable

# %%
# The operator returns nothing (``-> ()``) and mutates none of its arguments
# (no ``Tensor(a!)``). To the compiler, a call like that computes nothing
# that anyone reads, so it is dead code and goes. An operator with an effect
# that the schema cannot express must say so.
#
# Declaring the effect
# --------------------
#
# ``register_effect`` (a method of the object ``custom_op`` returns) takes
# a ``torch.library.EffectType``. ``ORDERED``, its only member, means: keep
# every call, and keep all such calls in program order. Both exist from
# PyTorch 2.10, this page's floor, and both are undocumented: ``EffectType``
# imports from ``torch.library`` but is not in its ``__all__``, and the
# method has no docstring. (Releases 2.7 to 2.9 have a private route,
# ``torch._higher_order_ops.effects._register_effectful_op``, but their
# Inductor deletes the calls all the same.) Declare the effect before the
# first compile, next to the definition.

print(f"EffectType members: {[member.name for member in EffectType]}")
print(f"'EffectType' in torch.library.__all__: {'EffectType' in torch.library.__all__}")
assert [member.name for member in EffectType] == ["ORDERED"]
assert "EffectType" not in torch.library.__all__
assert record.register_effect.__doc__ is None
record.register_effect(EffectType.ORDERED)

torch.compiler.reset()
compiled = torch.compile(monitored_forward, backend="aot_eager", fullgraph=True)
for _call in range(2):
    out, journals["aot_eager, declared"] = run_and_read_journal(compiled, sample)
    torch.testing.assert_close(out, expected_out)
    assert journals["aot_eager, declared"] == expected_journal
print(f"aot_eager, declared: the journal got {len(expected_journal)} entries per call")

# %%
# Each compiled call now leaves the same three entries as eager mode, with
# the same values, in the same order.
#
# The declaration is for operators whose schema shows no effect at all. On
# an operator that mutates an argument, ``register_effect`` is accepted and
# then ignored, without a word: such an operator gets no token (below), so
# nothing orders it against the declared ones. ``record_peak`` writes the
# largest magnitude into ``peak``; exported and decomposed, only ``record``
# is wrapped in the ``with_effects`` call that carries a token:


@torch.library.custom_op("effects_ops::record_peak", mutates_args=("peak",))
def record_peak(x: torch.Tensor, peak: torch.Tensor) -> None:
    peak.copy_(x.abs().max())


@record_peak.register_fake
def _(x, peak):
    return None


record_peak.register_effect(EffectType.ORDERED)  # accepted, and ignored


class PeakThenRecord(torch.nn.Module):
    def forward(self, x, peak):
        record_peak(x, peak)
        record(x, "input")
        return x + 1


peak_program = torch.export.export(PeakThenRecord(), (sample, torch.zeros(())))
wrapped = [
    str(node.args[1])
    for node in peak_program.run_decompositions().graph.nodes
    if node.target is torch.ops.higher_order.with_effects
]
print(f"operators called through with_effects: {wrapped}")
assert wrapped == ["effects_ops.record.default"]

# %%
# How the order is kept: effect tokens
# ------------------------------------
#
# The declaration changes how the call is traced. Each effectful call takes a
# *token*, a placeholder value, and returns a new one, which the next
# effectful call takes. That data dependency is what keeps every call, and in
# order. ``torch.export`` shows the tokens once the program is decomposed to
# the core ATen operators:

exported = torch.export.export(MonitoredModel(), (sample,))
_, journals["exported, declared"] = run_and_read_journal(exported.module(), sample)
assert journals["exported, declared"] == expected_journal
decomposed = exported.run_decompositions()
effect_calls = [
    n for n in decomposed.graph.nodes if n.target is torch.ops.higher_order.with_effects
]
for node in effect_calls:
    print(node.format_node())
assert len(effect_calls) == 3 and effect_calls[0].args[0].op == "placeholder"
for previous, node in itertools.pairwise(effect_calls):
    token = node.args[0]
    assert token.target is operator.getitem and token.args[0] is previous
program_outputs = next(n for n in decomposed.graph.nodes if n.op == "output").args[0]
assert program_outputs[0].args[0] is effect_calls[-1]

# %%
# The first ``with_effects`` takes the token that enters the program as an
# input; each later one takes the token its predecessor returned, and the
# last token leaves the program as an extra output. The exported program,
# run as a module, filled the journal as eager mode did.
#
# Inductor, and a cache that remembers
# ------------------------------------
#
# Run the declared operator under Inductor, as above:

torch.compiler.reset()
compiled = torch.compile(monitored_forward, fullgraph=True)
out, journals["inductor, declared, warm cache"] = run_and_read_journal(compiled, sample)
torch.testing.assert_close(out, expected_out)
received = journals["inductor, declared, warm cache"]
print(f"inductor after declaring: the journal received {received}")

# %%
# Inductor and AOTAutograd cache compiled programs, on disk as well as in
# memory (``torch.compiler.reset()`` clears only the latter). The key of the
# AOTAutograd cache is computed from the graph Dynamo captured, and that
# graph is the same with or without the declaration. So when the AOTAutograd
# cache is on, this compile found the program compiled earlier without the
# declaration, and used it: ``journal`` stayed empty. That is a PyTorch
# bug, not a rule of the cache (:ref:`edge-autograd-cache-effects` tracks
# it release by release).

import torch._functorch.config as functorch_config  # private: the cache switch
import torch._inductor.config as inductor_config

aot_cache_on = (
    functorch_config.enable_autograd_cache
    and inductor_config.fx_graph_cache
    and not inductor_config.force_disable_caches
)
print(f"AOTAutograd cache on: {aot_cache_on}")
assert (journals["inductor, declared, warm cache"] == []) == aot_cache_on

# %%
# In a real project the stale program sits in the cache folder
# (``TORCHINDUCTOR_CACHE_DIR``) that your earlier runs filled, and every new
# process loads it from there (:ref:`edge-autograd-cache-effects` shows that
# in fresh processes). Turning the cache off for one run with
# ``TORCHINDUCTOR_AUTOGRAD_CACHE=0`` does not clear it: that run neither
# reads nor writes the cache, so the next ordinary run loads the stale
# program again. The variable sets the switch read above when torch starts:

read_switch = "import torch._functorch.config as c; print(c.enable_autograd_cache)"
switch = subprocess.run(
    [sys.executable, "-c", read_switch],
    env={**os.environ, "TORCHINDUCTOR_AUTOGRAD_CACHE": "0"},
    capture_output=True,
    text=True,
    check=True,
).stdout.split()[-1]
print(f"with TORCHINDUCTOR_AUTOGRAD_CACHE=0, enable_autograd_cache is {switch}")
assert switch == "False"

# %%
# Four compiles of a small function show the rest, with the caches on as
# they are by default, in a cache folder of their own that starts empty.
# ``torch.compiler.reset()`` before each one makes this process look in the
# folder, as a new process would. The second compile has the switch off, as
# the variable would have it:

notes = []


@torch.library.custom_op("effects_ops::note", mutates_args=())
def note(x: torch.Tensor, tag: str) -> None:
    notes.append(tag)


@note.register_fake
def _(x, tag):
    return None


def step(x):
    note(x, "before")
    y = x @ x
    note(y, "after")
    return y


def compile_and_run():
    torch.compiler.reset()
    notes.clear()
    torch.compile(step, fullgraph=True)(torch.randn(3, 3))
    return list(notes)


cache_folder = Path(tempfile.mkdtemp(prefix="effects-cache-"))
your_folder = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(cache_folder)
try:
    with (
        inductor_config.patch(fx_graph_cache=True, force_disable_caches=False),
        functorch_config.patch(enable_autograd_cache=True),
    ):
        cache_runs = {"1. undeclared": compile_and_run()}
        note.register_effect(EffectType.ORDERED)
        with functorch_config.patch(enable_autograd_cache=False):
            cache_runs["2. declared, autograd cache off"] = compile_and_run()
        cache_runs["3. declared"] = compile_and_run()
        shutil.rmtree(cache_folder)
        cache_runs["4. declared, cache folder deleted"] = compile_and_run()
finally:  # the folder given back, and the variable as it was
    shutil.rmtree(cache_folder, ignore_errors=True)
    if your_folder is None:
        del os.environ["TORCHINDUCTOR_CACHE_DIR"]
    else:
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = your_folder
for label, received in cache_runs.items():
    print(f"{label:<40} received {received}")
assert list(cache_runs.values()) == [[], ["before", "after"], [], ["before", "after"]]

# %%
# Compile 2 bypassed the cache and kept both calls; compile 3, an ordinary
# one after it, found the program that compile 1 stored and lost them again.
# Only deleting the folder removed the stale entry (and a remote cache, if you use one,
# holds a copy too). After adding a declaration to an operator that has
# compiled before, delete the cache folder once. A declaration made next to
# the definition, before the first compile, never meets a stale entry.
#
# Training
# --------
#
# Every call so far ran under ``torch.no_grad()``, as inference does. With
# gradients on, AOTAutograd traces a forward and a backward graph, and the
# token chain runs through the forward one. Both backends keep the calls and
# compute the eager gradients:


def train_step(function, x):
    """One backward pass; what ``journal`` received and the weight's gradient."""
    journal.clear()
    layer.zero_grad()
    function(x).square().sum().backward()
    return list(journal), layer.weight.grad.clone()


_, expected_grad = train_step(monitored_forward, sample)
for backend in ("aot_eager", "inductor"):
    torch.compiler.reset()
    compiled = torch.compile(monitored_forward, backend=backend, fullgraph=True)
    journals[f"{backend}, declared, training"], grad = train_step(compiled, sample)
    torch.testing.assert_close(grad, expected_grad)
    assert journals[f"{backend}, declared, training"] == expected_journal
    print(f"{backend}, training: journal matches eager, so does the gradient")

# %%
# CUDA graphs
# -----------
#
# ``torch.compile(mode="reduce-overhead")`` records the compiled GPU work
# as a CUDA graph and then replays the recording, without running Python
# (:ref:`sphx_glr_tutorials_strides_and_runtime.py`). An operator's
# host-side work, such as ``record``'s ``.item()`` and list append or a
# file write, happens once, while the graph is recorded, and never on a
# replay. The declaration orders the calls in the compiled program; it is
# no promise that they run outside a recording. Do not compile code that
# calls such an operator with ``mode="reduce-overhead"``. On a GPU the cell
# records a CUDA graph by hand, around a declared operator that only
# appends to a list (``.item()`` cannot even run while a graph is being
# recorded), and replays it three times:

if torch.cuda.is_available():
    cuda_calls = []

    @torch.library.custom_op("effects_ops::note_call", mutates_args=())
    def note_call(x: torch.Tensor) -> None:
        cuda_calls.append(tuple(x.shape))  # host-side only: no synchronization

    @note_call.register_fake
    def _(x):
        return None

    note_call.register_effect(EffectType.ORDERED)

    def noted_double(x):
        note_call(x)
        return x * 2

    static_input = torch.randn(4, 6, device="cuda")
    side_stream = torch.cuda.Stream()  # warm up off the default stream
    side_stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side_stream):
        noted_double(static_input)
    torch.cuda.current_stream().wait_stream(side_stream)
    cuda_graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(cuda_graph):
        static_output = noted_double(static_input)
    calls_when_recorded = len(cuda_calls)
    for _replay in range(3):
        static_input.copy_(torch.randn(4, 6, device="cuda"))
        cuda_graph.replay()
        torch.testing.assert_close(static_output, static_input * 2)
    print(
        f"calls noted: {calls_when_recorded} up to the recording, "
        f"{len(cuda_calls) - calls_when_recorded} in 3 replays"
    )
    assert calls_when_recorded == 2 and len(cuda_calls) == 2
else:
    print("Skipped on this machine (no CUDA device): the CUDA-graph replay.")

# %%
# Operators not made with ``custom_op``
# -------------------------------------
#
# ``register_effect`` is a method of ``CustomOpDef``. An operator defined
# with ``torch.library.define`` or in C++ with ``TORCH_LIBRARY`` has no such
# object; for those, the only route is the private function
# ``torch.library._register_effectful_op``, which takes the qualified name.
# Here a second operator appends a line to a file, and notes the write in the
# journal so that we can check its order against ``record``:

log_file = Path(tempfile.mkdtemp()) / "sent.txt"
torch.library.define("effects_ops::send_line", "(Tensor x, str path) -> ()")


@torch.library.impl("effects_ops::send_line", "CompositeExplicitAutograd")
def send_line(x, path):
    with open(path, "a") as file:
        file.write(f"{x.sum().item():.4f}\n")
    journal.append(("sent", round(x.sum().item(), 4), None))


@torch.library.register_fake("effects_ops::send_line")
def _(x, path):
    return None


torch.library._register_effectful_op("effects_ops::send_line", EffectType.ORDERED)


def monitored_and_sent(x):
    out = monitored_forward(x)
    torch.ops.effects_ops.send_line(out, str(log_file))
    record(out * 2, "after send")
    return out


_, expected_mixed = run_and_read_journal(monitored_and_sent, sample)
expected_file = log_file.read_text()
log_file.unlink()
torch.compiler.reset()
compiled = torch.compile(monitored_and_sent, backend="aot_eager", fullgraph=True)
_, mixed = run_and_read_journal(compiled, sample)
print([tag for tag, *_ in mixed])
assert mixed == expected_mixed and log_file.read_text() == expected_file
shutil.rmtree(log_file.parent)

# %%
# The file received the same line, and ``journal`` shows the write between
# the third and fourth ``record`` calls, where the code calls it: all
# ``ORDERED`` operators share one chain of tokens.
#
# What the journal received
# -------------------------
#
# The figure puts the journals of this page's runs side by side: one row per
# run, one marker per entry, in the order the entries arrived.

rows = list(journals.items())
tag_colors = {"input": "#1c7ed6", "hidden": "#f59f00", "output": "#2f9e44"}
fig, ax = plt.subplots(figsize=(6.6, 0.42 * len(rows) + 1.2), layout="constrained")
for row, (_run, entries) in enumerate(rows):
    for position, (tag, *_values) in enumerate(entries):
        ax.scatter(position, row, s=220, color=tag_colors[tag], zorder=2)
    if not entries:
        ax.text(1, row, "nothing received", va="center", ha="center", color="#c92a2a")
for tag, color in tag_colors.items():
    ax.scatter([], [], s=80, color=color, label=f"tag {tag!r}")
ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=3, frameon=False)
ax.set_yticks(range(len(rows)), [name for name, _ in rows])
ax.invert_yaxis()
ax.set_xticks(range(3), ["1st entry", "2nd entry", "3rd entry"])
ax.set_xlim(-0.5, 2.5)
ax.grid(axis="x", color="0.9", zorder=1)
ax.set_title("What the journal received, run by run")
plt.show()

# %%
# Without the declaration both backends and the decomposed export delivered
# nothing, and only the undecomposed export delivered everything; with it,
# every run delivered what eager mode did, in training too, except Inductor
# while its AOTAutograd cache (when on) still held the undeclared program.
#
# Conclusion
# ----------
#
# ``torch.compile`` and export's ``run_decompositions()`` reason from the
# schema. An operator that returns nothing and mutates nothing is, to them,
# a call without a purpose, and it disappears without an error;
# ``torch.export.export`` alone keeps it. ``register_effect`` with
# ``EffectType.ORDERED`` tells them otherwise: every call stays, threaded on
# a chain of effect tokens that fixes the order, with and without
# gradients. It does nothing for an operator that mutates an argument, and
# it does not keep a call out of a CUDA graph. Declare it next to the
# definition, before anything compiles; where code compiled before the
# declaration, delete the compile cache folder, because the AOTAutograd
# cache ignores declarations. And test the effect itself.
#
# Related pages:
#
# * :ref:`sphx_glr_tutorials_custom_op_objects.py`: operators on a C++ class
#   get effect tokens automatically; those on a Python object need this
#   page's declaration
# * :ref:`sphx_glr_tutorials_mutable_custom_ops.py` when the side effect is
#   a write into a tensor argument, which the schema can express
# * :ref:`sphx_glr_tutorials_custom_ops_in_export.py` for saving and loading
#   exported programs
