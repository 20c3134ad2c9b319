"""The course's checker on two more libraries it did not write, as a user
runs it: operators that take offsets, lengths, CSR segments and
permutations (FBGEMM's CPU operators, ``fbgemm-gpu-cpu``), and float8
quantization operators (``torchao``).

Each library gets a fresh environment holding torch, the library and the
checker's wheel (FBGEMM's CPU wheel is built against PyTorch 2.14 and does
not load beside 2.15). There a script writes a small sample of each
operator, and probes the ground truth without the checker: the reference
result of each operator the checker must pass, and each bug and limitation
it must report, shown directly (a strided input that gives other numbers, a
second derivative that comes back None, a compiled gradient that differs).
Then ``python -m operator_checker`` checks them in child processes, and each
verdict is asserted against the probes: no false alarm, no crash, no miss.

What the probes found, and the checker must say:

* correct, so passed: ``asynchronous_complete_cumsum``,
  ``jagged_2d_to_dense``, ``batched_dense_vec_jagged_2d_mul``,
  ``offsets_range``, ``invert_permute``; their offsets and lengths keep
  their values, and no size changes around them (not applicable rows);
* bugs: ``segment_sum_csr`` and ``pack_segments`` give other numbers on a
  strided input (they read memory as if it were row-major), and
  ``segment_sum_csr`` on an expanded one, so they fail there and only there;
* limitations: no double backward (the backward operators registered no
  backward; PyTorch's deprecated autograd fallback gives None), no
  forward-mode AD, ``segment_sum_csr``'s values get no gradient;
* torchao's float8 operators are checked as given, in float8, and nothing
  the checker cannot do itself is blamed on them: what fails is what opcheck
  says of their missing autograd registration (and, for the dequantization,
  the compiled gradient that the deprecated fallback cannot give).
"""

import json
import sys
import textwrap

import pytest

from pagelib import checker
from tests.support.helpers import (
    CHECKER_FIELD_TEST,
    REPO,
    fresh_python,
    pinned_torch,
    run,
)

# With the torchvision field test: one worker, while the other surveys the site.
pytestmark = pytest.mark.xdist_group(CHECKER_FIELD_TEST)

FBGEMM = ["torch==2.14.1", "fbgemm-gpu-cpu==1.9.0"]
TORCHAO = "torchao==0.18.0"
CORRECT_FBGEMM = [
    "asynchronous_complete_cumsum",
    "jagged_2d_to_dense",
    "batched_dense_vec_jagged_2d_mul",
    "offsets_range",
    "invert_permute",
]
STRIDED_BUGS = ["segment_sum_csr", "pack_segments"]

FBGEMM_RECORD = """
import json
import warnings

import torch
import fbgemm_gpu  # registers torch.ops.fbgemm
from operator_checker import save_samples

fb = torch.ops.fbgemm
torch.manual_seed(0)
lengths = torch.tensor([2, 0, 3, 1])
offsets = torch.tensor([0, 2, 2, 5, 6])
values = torch.randn(6, 3)
samples = {
    "fbgemm::asynchronous_complete_cumsum": [(lengths,)],
    "fbgemm::jagged_2d_to_dense": [(values, offsets, 3)],
    "fbgemm::batched_dense_vec_jagged_2d_mul": [(torch.randn(4, 3), values, offsets)],
    "fbgemm::offsets_range": [(offsets, 6)],
    "fbgemm::invert_permute": [(torch.tensor([2, 0, 3, 1]),)],
    "fbgemm::segment_sum_csr": [(2, torch.tensor([0, 2, 3, 6]), torch.randn(12))],
    "fbgemm::pack_segments": [(values, lengths, 3)],
}
save_samples("samples.pt", samples)


def strided(t):  # every other element of a buffer twice as wide: same values
    wide = t.new_zeros(*t.shape[:-1], 2 * t.shape[-1])
    wide[..., ::2] = t
    return wide[..., ::2]


def padded(rows, starts, longest):
    out = torch.zeros(len(starts) - 1, longest, *rows.shape[1:])
    for i, (a, b) in enumerate(zip(starts[:-1], starts[1:])):
        out[i, : b - a] = rows[a:b]
    return out


truth = {}
s = offsets.tolist()
truth["correct"] = {
    "asynchronous_complete_cumsum": torch.equal(
        fb.asynchronous_complete_cumsum(lengths), torch.tensor([0, 2, 2, 5, 6])
    ),
    "jagged_2d_to_dense": torch.equal(
        fb.jagged_2d_to_dense(values, offsets, 3), padded(values, s, 3)
    ),
    "offsets_range": fb.offsets_range(offsets, 6).tolist() == [0, 1, 0, 1, 2, 0],
    "invert_permute": fb.invert_permute(torch.tensor([2, 0, 3, 1])).tolist()
    == [1, 3, 0, 2],
}
v = samples["fbgemm::batched_dense_vec_jagged_2d_mul"][0][0]
expected = torch.stack(
    [v[i] @ padded(values, s, 3)[i] for i in range(4)]
)  # each row of v times its padded segment
truth["correct"]["batched_dense_vec_jagged_2d_mul"] = torch.allclose(
    fb.batched_dense_vec_jagged_2d_mul(v, values, offsets), expected, atol=1e-6
)
# The bugs: the same values, laid out with a stride, give other numbers.
csr, csr_values = samples["fbgemm::segment_sum_csr"][0][1:]
truth["strided_differs"] = {
    "segment_sum_csr": not torch.equal(
        fb.segment_sum_csr(2, csr, strided(csr_values)),
        fb.segment_sum_csr(2, csr, csr_values),
    ),
    "pack_segments": not torch.equal(
        fb.pack_segments(values, strided(lengths), 3),
        fb.pack_segments(values, lengths, 3),
    ),
}
# A view whose rows are all the first (stride 0) against its row-major copy.
expanded_values = values[:1].expand(values.shape)
expanded_csr_values = csr_values[:1].expand(csr_values.shape)
truth["expanded_differs"] = {
    "segment_sum_csr": not torch.equal(
        fb.segment_sum_csr(2, csr, expanded_csr_values),
        fb.segment_sum_csr(2, csr, expanded_csr_values.contiguous()),
    ),
    "pack_segments": not torch.equal(
        fb.pack_segments(expanded_values, lengths, 3),
        fb.pack_segments(expanded_values.contiguous(), lengths, 3),
    ),
}
# The limitations: no double backward, no forward-mode AD.
x = values.clone().requires_grad_()
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    y = fb.jagged_2d_to_dense(x, offsets, 3)
    incoming = torch.randn_like(y, requires_grad=True)
    (g,) = torch.autograd.grad(y, x, incoming, create_graph=True)
    second = torch.autograd.grad(g.sum(), incoming, allow_unused=True)[0]
truth["second_derivative"] = None if second is None else second.abs().sum().item()
truth["fallback_warned"] = any("autograd kernel was not registered" in str(w.message)
                               for w in caught)
try:
    with torch.autograd.forward_ad.dual_level():
        dual = torch.autograd.forward_ad.make_dual(values, torch.ones_like(values))
        fb.jagged_2d_to_dense(dual, offsets, 3)
    truth["forward_ad"] = "ran"
except RuntimeError as error:
    truth["forward_ad"] = str(error).splitlines()[0]
x = torch.randn(12, requires_grad=True)
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    out = fb.segment_sum_csr(2, csr, x)
    (grad,) = torch.autograd.grad(out.sum(), x, allow_unused=True)
truth["segment_sum_csr_values_grad"] = None if grad is None else "a gradient"
print(json.dumps(truth))
"""

TORCHAO_RECORD = """
import json
import warnings

import torch
import torchao  # registers torch.ops.torchao
from operator_checker import save_samples

ao = torch.ops.torchao
torch.manual_seed(0)
x, scale = torch.randn(4, 8), torch.tensor([0.05])
q = ao.quantize_affine_float8_non_decomposed(x, scale, torch.float8_e4m3fn)
samples = {
    "torchao::quantize_affine_float8_non_decomposed": [(x, scale, torch.float8_e4m3fn)],
    "torchao::dequantize_affine_float8_non_decomposed": [(q, scale, torch.float32)],
}
save_samples("samples.pt", samples)
truth = {"sample_dtype": str(q.dtype)}
truth["quantized"] = torch.equal(
    q.float(), (x / scale).clamp(-448, 448).to(torch.float8_e4m3fn).float()
)
dequantize = ao.dequantize_affine_float8_non_decomposed
dequantized = dequantize(q, scale, torch.float32)
truth["dequantized"] = torch.equal(dequantized, q.float() * scale)
# No autograd kernel: outputs still require grad (PyTorch's deprecated
# fallback), so opcheck's test_autograd_registration fails, and compiled
# code gives no gradient where eager gives one.
r = x.double().requires_grad_()
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    out = dequantize(r, scale.double(), torch.float32)
    (eager,) = torch.autograd.grad(out.sum(), r)
    compiled = torch.compile(
        lambda t: dequantize(t, scale.double(), torch.float32), fullgraph=True
    )
    (from_compiled,) = torch.autograd.grad(compiled(r).sum(), r, allow_unused=True)
truth["eager_gradient"] = eager.unique().tolist()
truth["compiled_gradient"] = (
    None if from_compiled is None else from_compiled.unique().tolist()
)
print(json.dumps(truth))
"""


def library_python(uv, folder, packages):
    """A fresh environment: ``packages`` and the checker's wheel."""
    wheel = checker.build_wheel(sys.executable, folder / "dist")
    return fresh_python(uv, folder / "venv", [*packages, wheel])


def field_run(python, folder, record, targets, imports):
    (folder / "record.py").write_text(textwrap.dedent(record))
    recorded = run([str(python), "record.py"], cwd=folder, timeout=900)
    assert recorded.returncode == 0, recorded.stderr[-4000:]
    truth = json.loads(recorded.stdout.strip().splitlines()[-1])
    command = [str(python), "-m", "operator_checker", *targets, "--import", imports]
    command += ["--samples", "samples.pt", "--device", "cpu", "--json", "report.json"]
    process = run(command, cwd=folder, timeout=1800)
    assert process.returncode in (0, 1), process.stdout[-3000:] + process.stderr[-3000:]
    report = json.loads((folder / "report.json").read_text())
    return truth, process, report


@pytest.fixture(scope="module")
def fbgemm(uv, tmp_path_factory):
    folder = tmp_path_factory.mktemp("fbgemm")
    python = library_python(uv, folder, FBGEMM)
    targets = [f"fbgemm::{name}" for name in CORRECT_FBGEMM + STRIDED_BUGS]
    return field_run(python, folder, FBGEMM_RECORD, targets, "fbgemm_gpu")


@pytest.fixture(scope="module")
def torchao(uv, tmp_path_factory):
    folder = tmp_path_factory.mktemp("torchao")
    torch = f"torch=={pinned_torch()}"
    constraints = ["-c", str(REPO / "constraints.txt")]
    python = library_python(uv, folder, [*constraints, torch, TORCHAO])
    targets = [
        "torchao::quantize_affine_float8_non_decomposed",
        "torchao::dequantize_affine_float8_non_decomposed",
    ]
    return field_run(python, folder, TORCHAO_RECORD, targets, "torchao")


def rows_of(report, operator):
    return [row for row in report["rows"] if row["operator"] == operator]


def verdicts(report):
    return {op["operator"].split("::")[1]: op for op in report["operators"]}


@pytest.mark.parametrize("name", CORRECT_FBGEMM)
def test_a_correct_operator_with_offsets_or_lengths_passes(fbgemm, name):
    truth, _process, report = fbgemm
    assert truth["correct"][name], f"the probe says {name} is wrong"
    assert verdicts(report)[name]["passed"], [
        row for row in rows_of(report, f"fbgemm::{name}") if row["outcome"] == "failed"
    ]
    rows = rows_of(report, f"fbgemm::{name}")
    # Its integer tensors keep their values: no size is changed around them.
    (empty,) = [r for r in rows if r["check"] == "eager" and "empty" in r["variant"]]
    assert empty["outcome"] == "not applicable"
    assert "holds indices, offsets or lengths" in empty["detail"]
    assert not [r for r in rows if "crashed" in r["detail"]]


@pytest.mark.parametrize("name", STRIDED_BUGS)
def test_a_kernel_that_reads_strided_memory_as_row_major_fails_there_alone(
    fbgemm, name
):
    truth, _process, report = fbgemm
    assert truth["strided_differs"][name], f"the probe finds no bug in {name}"
    failed = [r for r in rows_of(report, f"fbgemm::{name}") if r["outcome"] == "failed"]
    assert failed and not verdicts(report)[name]["passed"]
    # Failures on the layouts the probes show wrong, and nowhere else.
    wrong = {"strided"} | ({"expanded"} if truth["expanded_differs"][name] else set())
    assert {r["variant"].split()[1] for r in failed} == wrong, failed
    layout = [r for r in failed if r["check"] == "layout"]
    assert layout and layout[0]["fix"].startswith("Layouts, CUDA Graphs and Streams")


def test_the_limitations_are_the_ones_the_probes_show(fbgemm):
    truth, _process, report = fbgemm
    assert truth["second_derivative"] is None and truth["fallback_warned"]
    assert "jvp is not implemented" in truth["forward_ad"]
    for name in ("jagged_2d_to_dense", "batched_dense_vec_jagged_2d_mul"):
        rows = rows_of(report, f"fbgemm::{name}")
        limits = {r["check"]: r["detail"] for r in rows if r["outcome"] == "limitation"}
        assert set(limits) == {"gradgradcheck", "forward-ad"}, limits
        assert "deprecated autograd fallback" in limits["gradgradcheck"]
        assert "jvp is not implemented" in limits["forward-ad"]
        # Its kernel refuses float64, so its gradient is checked in float32.
        (gradcheck,) = [
            r for r in rows if r["check"] == "gradcheck" and r["outcome"] == "passed"
        ]
        assert "float32" in gradcheck["variant"] and "in float32" in gradcheck["detail"]
    assert truth["segment_sum_csr_values_grad"] is None
    (no_gradient,) = [
        r
        for r in rows_of(report, "fbgemm::segment_sum_csr")
        if r["check"] == "gradients" and r["outcome"] == "limitation"
    ]
    assert no_gradient["detail"].startswith("values gets no gradient")


def test_the_command_exits_1_for_the_two_bugs_and_says_why(fbgemm):
    _truth, process, report = fbgemm
    assert process.returncode == 1
    failing = {name for name, op in verdicts(report).items() if not op["passed"]}
    assert failing == set(STRIDED_BUGS)


def test_float8_operators_are_checked_as_given_and_blamed_for_nothing_of_ours(torchao):
    truth, _process, report = torchao
    assert truth["quantized"] and truth["dequantized"]
    assert truth["sample_dtype"] == "torch.float8_e4m3fn"
    rows = report["rows"]
    dequantize = rows_of(report, "torchao::dequantize_affine_float8_non_decomposed")
    assert any(r["variant"] == "#0 contiguous float8_e4m3fn cpu" for r in dequantize)
    for row in rows:
        # What the checker's own steps once could not do, in float8.
        assert not any(
            said in row["detail"]
            for said in ("crashed", "nan_to_num", "normal_kernel", "bitwise comparison")
        ), row
    harness = [r for r in rows if "opcheck's own harness" in r["detail"]]
    assert harness and all(r["outcome"] == "not applicable" for r in harness)


def test_float8_failures_are_the_missing_autograd_registration_the_probes_show(torchao):
    truth, process, report = torchao
    assert truth["eager_gradient"] == [0.05000000074505806]  # the scale
    assert truth["compiled_gradient"] is None  # no gradient at all
    for row in report["rows"]:
        if row["outcome"] != "failed":
            continue
        assert row["check"] in ("test_autograd_registration", "compiled",
                                "compiled-dynamic"), row  # fmt: skip
        assert "grad" in row["variant"], row
        if row["check"].startswith("compiled"):
            assert "deprecated autograd fallback" in row["detail"], row
    assert process.returncode == 1
