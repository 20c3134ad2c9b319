"""The Triton page's kernels, run in Triton's interpreter on CPU tensors.

Without a GPU the page runs its Triton kernels in Triton's interpreter, but
only on the few sizes and dtypes its story needs. These tests run the page
itself in a fresh process with no visible GPU (``runpy``, so the page is a
black box), then take the page's own launchers and kernels and

* run them on more sizes, every dtype and every autotuning config, against a
  float64 PyTorch reference computed here;
* compile the same kernel functions for a GPU target, which needs no GPU, so
  that code the interpreter accepts but Triton's compiler rejects is caught
  too.

Nothing here copies a kernel: plant a bug in the page's kernel and these
tests fail.
"""

import json
import sys

import pytest

from tests.support.helpers import REPO, run

pytest.importorskip("triton", reason="the page's kernels need Triton")

PAGE = REPO / "advanced" / "triton_custom_ops.py"

# Runs in the child process: argv[1] is the page, argv[2] says whether to
# import Triton before the page does, as a gallery worker may have done.
RUNNER = r"""
import inspect
import json
import runpy
import sys

import torch
import torch.nn.functional as F

if sys.argv[2] == "import-triton-first":
    import triton  # noqa: F401

page = runpy.run_path(sys.argv[1], run_name="__main__")
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from triton.runtime.interpreter import InterpretedFunction
from triton.runtime.jit import JITFunction

forward = page["launch_silu_mul"]
backward = page["launch_silu_mul_backward"]
autotuner = page["silu_mul_kernel"]
backward_kernel = page["silu_mul_backward_kernel"]
triton = page["triton"]


def reference(gate, up, grad_out):
    # float64 autograd, independent of the page's own reference
    gate = gate.double().requires_grad_()
    up = up.double().requires_grad_()
    out = F.silu(gate) * up
    grads = torch.autograd.grad(out, (gate, up), grad_out.double())
    return out.detach(), grads


failures, cases = [], 0


def check(label, actual, expected):
    global cases
    cases += 1
    try:
        torch.testing.assert_close(actual, expected.to(actual.dtype))
    except AssertionError as err:
        failures.append(f"{label}: {str(err).strip().splitlines()[0]}")


torch.manual_seed(0)
sizes = [0, 1, 127, 128, 129, 1000, 1024, 1025, 4099]
dtypes = [torch.float32, torch.float16, torch.bfloat16, torch.float64]
for dtype in dtypes:
    for n in sizes:
        gate, up, grad_out = torch.randn(3, n, dtype=dtype).unbind(0)
        out, (grad_gate, grad_up) = reference(gate, up, grad_out)
        label = f"{dtype} n={n}"
        check(f"forward {label}", forward(gate, up), out)
        actual_gate, actual_up = backward(grad_out, gate, up)
        check(f"backward d/dgate {label}", actual_gate, grad_gate)
        check(f"backward d/dup {label}", actual_up, grad_up)

# The autotuner runs one config per key; force each one on a ragged size.
gate, up, grad_out = torch.randn(3, 3001).unbind(0)
out, _ = reference(gate, up, grad_out)
for config in autotuner.configs:
    result = torch.empty_like(gate)
    grid = (triton.cdiv(gate.numel(), config.kwargs["BLOCK_SIZE"]),)
    autotuner.fn[grid](gate, up, result, gate.numel(), **config.all_kwargs())
    check(f"forward with config {config.kwargs}", result, out)

# The same Python functions, compiled for an H100-class GPU (sm_90).
compiled, compile_errors = [], []
for kernel, pointer_args in ((autotuner.fn, 3), (backward_kernel, 5)):
    function = kernel.fn
    names = list(inspect.signature(function).parameters)
    for element in ("fp32", "fp16", "bf16", "fp64"):
        signature = {name: f"*{element}" for name in names[:pointer_args]}
        signature.update(n_elements="i32", BLOCK_SIZE="constexpr")
        source = ASTSource(JITFunction(function), signature, {"BLOCK_SIZE": 256})
        try:
            binary = triton.compile(source, target=GPUTarget("cuda", 90, 32))
            assert binary.asm["cubin"]
            compiled.append(f"{function.__name__} {element}")
        except Exception as err:
            message = str(err).strip().splitlines()
            compile_errors.append(
                f"{function.__name__} {element}: {type(err).__name__}: "
                f"{message[0] if message else ''}"
            )

print("RESULT " + json.dumps({
    "cases": cases,
    "failures": failures,
    "configs": len(autotuner.configs),
    "interpreted": [
        isinstance(autotuner.fn, InterpretedFunction),
        isinstance(backward_kernel, InterpretedFunction),
    ],
    "kernels_run_on": page["KERNELS_RUN_ON"],
    "compiled": compiled,
    "compile_errors": compile_errors,
}))
"""


def run_page_in_interpreter(folder, how, interpret):
    runner = folder / "runner.py"
    runner.write_text(RUNNER)
    # No visible GPU, so the page takes its interpreter path even on a GPU
    # machine; TRITON_INTERPRET as the scenario says.
    env = {"CUDA_VISIBLE_DEVICES": "", "TRITON_INTERPRET": interpret}
    command = [sys.executable, "-X", "faulthandler", str(runner), str(PAGE), how]
    process = run(command, cwd=folder, env=env, timeout=900)
    assert process.returncode == 0, (
        f"the page or the kernel checks failed:\n{process.stderr[-4000:]}"
    )
    lines = [line for line in process.stdout.splitlines() if line.startswith("RESULT ")]
    return process.stdout, json.loads(lines[-1].removeprefix("RESULT "))


@pytest.fixture(scope="module")
def interpreted_page(tmp_path_factory):
    """The page run with TRITON_INTERPRET=1 set before Python starts."""
    folder = tmp_path_factory.mktemp("interpreted-page")
    return run_page_in_interpreter(folder, "as-is", interpret="1")


def test_triton_kernels_match_pytorch_in_the_interpreter(interpreted_page):
    stdout, result = interpreted_page
    assert result["kernels_run_on"] == "interpreter"
    assert "the kernels run in its interpreter, on CPU" in stdout
    assert result["interpreted"] == [True, True]
    # every size x dtype, three outputs each, then one forward per config
    assert result["cases"] == 9 * 4 * 3 + result["configs"]
    assert result["failures"] == []


def test_triton_kernels_compile_for_a_gpu_target(interpreted_page):
    _, result = interpreted_page
    assert result["compile_errors"] == []
    assert len(result["compiled"]) == 2 * 4


def test_triton_kernels_run_in_a_process_that_imported_triton_first(tmp_path):
    # A gallery worker may have imported Triton for another page before this
    # page sets TRITON_INTERPRET; the page's kernels must still be interpreted.
    stdout, result = run_page_in_interpreter(
        tmp_path, "import-triton-first", interpret="0"
    )
    assert result["kernels_run_on"] == "interpreter"
    assert "tl.sigmoid is one too: False (triton imported before this page: True)" in (
        stdout
    )
    assert result["interpreted"] == [True, True]
    assert result["failures"] == []
