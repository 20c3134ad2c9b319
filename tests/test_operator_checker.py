"""The checker that ``check_your_operator.py`` publishes, on other people's code.

* Field test: ``check_operator`` on torchvision's six C++ operators, with
  samples recorded from torchvision's own Python functions, as a new user
  would try it. Each verdict is asserted against the ground truth of
  ``../shared/reviews/check-operator-field-test.md``, established there with
  probes of each operator: no crash, no false alarm, and the true findings
  reported (``nms`` fails compiled and exported below two kept boxes; no
  double backward and no forward-mode derivative for ``deform_conv2d`` and the
  four region-of-interest operators; their boxes silently get no gradient).
  The module is made from the page's current source, as the build makes it,
  and runs in a process of its own, so that a crash in an operator's kernel
  is a failed test, not a lost worker.
* The download: the module a built page links is the page's code, in both
  editions, and in a fresh environment holding only torch it imports and
  checks an operator.

Cost: the field test about 40 s of CPU; the fresh environment a few seconds
(uv links torch from its cache) and one check of two operators, about 20 s.
"""

import json
import re
import sys
import textwrap

import envs
import pytest

from conf import page_modules
from pagelib import page_module
from tests.helpers import REPO, pinned_torch, run

PAGE = REPO / "advanced" / "check_your_operator.py"
SECTION = page_modules[PAGE.name]["section"]


def page_module_code():
    """The module's code as the page's source gives it, docstring aside."""
    return page_module.module_body(PAGE.read_text(), SECTION)


FIELD_TEST = """
import json
import sys

import torch
import torchvision
from operator_checker import capture_samples, check_operator

tv = torch.ops.torchvision
OPS = [tv.nms, tv.roi_align, tv.roi_pool, tv.ps_roi_align, tv.ps_roi_pool,
       tv.deform_conv2d]
torch.manual_seed(0)
boxes = torch.tensor([[0.0, 0, 10, 10], [1, 1, 11, 11], [20, 20, 30, 30], [0, 0, 5, 5]])
images, pooled_images = torch.rand(2, 3, 8, 8), torch.rand(2, 8, 8, 8)
per_image = [torch.tensor([[0.0, 0, 4, 4], [1, 1, 6, 5]]),
             torch.tensor([[2.0, 2, 7, 7]])]
with capture_samples(*OPS) as samples:
    torchvision.ops.nms(boxes, torch.tensor([0.9, 0.8, 0.7, 0.6]), iou_threshold=0.5)
    torchvision.ops.roi_align(images, per_image, output_size=2, sampling_ratio=2)
    torchvision.ops.roi_pool(images, per_image, output_size=2)
    torchvision.ops.ps_roi_align(pooled_images, per_image, output_size=2)
    torchvision.ops.ps_roi_pool(pooled_images, per_image, output_size=2)
    x = torch.rand(1, 6, 5, 4)
    weight, bias = torch.randn(2, 3, 3, 2), torch.randn(2)
    offset, mask = torch.randn(1, 36, 2, 3), torch.rand(1, 18, 2, 3)
    torchvision.ops.deform_conv2d(x, offset, weight, bias, stride=(2, 1),
                                  padding=(1, 0), dilation=(2, 1), mask=mask)
verdicts = {}
for op in OPS:
    assert len(samples[op]) == 1, (op, samples[op])
    report = check_operator(op, samples[op], devices=["cpu"])
    print(report, file=sys.stderr)
    verdicts[report.operator] = [
        {"check": r.check, "variant": r.variant, "outcome": r.outcome,
         "detail": r.detail, "see": r.see}
        for r in report.rows
    ]
print(json.dumps(verdicts))
"""

ROI_OPERATORS = ["roi_align", "roi_pool", "ps_roi_align", "ps_roi_pool"]


@pytest.fixture(scope="module")
def field_verdicts(tmp_path_factory):
    folder = tmp_path_factory.mktemp("field-test")
    (folder / "operator_checker.py").write_text(page_module_code())
    (folder / "field_test.py").write_text(FIELD_TEST)
    process = run([sys.executable, "field_test.py"], cwd=folder, timeout=1200)
    assert process.returncode == 0, process.stderr[-6000:]
    rows = json.loads(process.stdout.strip().splitlines()[-1])
    return {name.removeprefix("torchvision::"): found for name, found in rows.items()}


def outcomes(rows, outcome):
    return [row for row in rows if row["outcome"] == outcome]


def test_no_operator_crashes_the_checker_and_every_one_gets_rows(field_verdicts):
    assert sorted(field_verdicts) == sorted(["nms", "deform_conv2d", *ROI_OPERATORS]), (
        field_verdicts.keys()
    )
    for name, rows in field_verdicts.items():
        checked = {row["check"] for row in rows}
        assert {"test_faketensor", "compiled", "export + load", "vmap"} <= checked, name


def test_nms_fails_compiled_and_exported_below_two_kept_boxes_and_nothing_else(
    field_verdicts,
):
    failed = outcomes(field_verdicts["nms"], "failed")
    assert {row["check"] for row in failed} == {
        "compiled",
        "compiled dynamic",
        "export + load",
        "export decomposed",
    }
    for row in failed:
        assert re.search(r"u\d+ >= 2", row["detail"]), row
        # The variants that keep fewer than two boxes: none, or one box repeated.
        assert row["variant"].split()[1] in {"empty(dets,scores)", "expanded"}, row
        # The fix: the sharp-edges entry on create_unbacked_symint's minimum.
        assert row["see"].startswith("Sharp Edges:"), row
        assert row["see"].endswith("> create_unbacked_symint assumes at least two"), row


@pytest.mark.parametrize("name", ROI_OPERATORS)
def test_a_region_of_interest_operator_passes_with_its_three_limitations(
    field_verdicts, name
):
    rows = field_verdicts[name]
    assert not outcomes(rows, "failed"), outcomes(rows, "failed")
    limitations = {row["check"]: row["detail"] for row in outcomes(rows, "limitation")}
    assert set(limitations) == {"gradients", "gradgradcheck", "forward AD"}
    assert limitations["gradients"].startswith("rois gets no gradient")
    assert "double backwards" in limitations["gradgradcheck"]
    # The image gets its gradient, and it is right: the batch-index column of
    # the boxes was never perturbed (no false alarm from gradcheck).
    (gradcheck,) = [row for row in rows if row["check"] == "gradcheck"]
    assert gradcheck["outcome"] == "passed", gradcheck


def test_deform_conv2d_passes_with_no_double_backward_and_no_forward_mode(
    field_verdicts,
):
    rows = field_verdicts["deform_conv2d"]
    assert not outcomes(rows, "failed"), outcomes(rows, "failed")
    limitations = {row["check"] for row in outcomes(rows, "limitation")}
    assert limitations == {"gradgradcheck", "forward AD"}
    (gradcheck,) = [row for row in rows if row["check"] == "gradcheck"]
    assert gradcheck["outcome"] == "passed"


def test_what_does_not_apply_says_why_and_no_size_change_is_a_false_alarm(
    field_verdicts,
):
    for name, rows in field_verdicts.items():
        for row in outcomes(rows, "not applicable"):
            assert row["detail"], (name, row)
        recompiles = [row for row in rows if row["check"] == "recompiles"]
        assert len(recompiles) == 1 and recompiles[0]["outcome"] != "failed", (
            name,
            recompiles,
        )


# -- The download ------------------------------------------------------------


def linked_module(page):
    (href,) = set(
        re.findall(
            r'href="([^"]*_downloads/[^"]*/operator_checker\.py)"', page.read_text()
        )
    )
    return page.parent / href


@pytest.mark.parametrize("edition", ["", "zh_CN"])
def test_the_page_links_the_module_made_of_its_own_code(site, edition):
    page = site.html / edition / "tutorials" / "check_your_operator.html"
    module = linked_module(page).read_text()
    docstring, code = module.split('\n"""\n\n', 1)
    assert code == page_module_code()
    assert (
        'the section "The checker" of the page "Check Your Own Operator"' in docstring
    )


FRESH_CHECK = """
import importlib.util
import json

import torch
from torch import Tensor
from operator_checker import Sample, check_operator

assert importlib.util.find_spec("numpy") is None, "this environment has NumPy"


@torch.library.custom_op("fresh::scale", mutates_args=())
def scale(x: Tensor, factor: float) -> Tensor:
    return x * factor


scale.register_fake(lambda x, factor: torch.empty_like(x))
scale.register_autograd(
    lambda ctx, grad: (grad * ctx.factor, None),
    setup_context=lambda ctx, inputs, output: setattr(ctx, "factor", inputs[1]),
)


@torch.library.custom_op("fresh::scale_row_major_fake", mutates_args=())
def scale_row_major_fake(x: Tensor, factor: float) -> Tensor:
    return x * factor


scale_row_major_fake.register_fake(lambda x, factor: x.new_empty(x.shape))


@torch.library.custom_op("fresh::scale_contiguous_only", mutates_args=())
def scale_contiguous_only(x: Tensor, factor: float) -> Tensor:
    if not x.is_contiguous():
        raise ValueError("x must be contiguous")
    return x * factor


scale_contiguous_only.register_fake(lambda x, factor: torch.empty_like(x))

sample = Sample(torch.randn(3, 4), factor=2.0)
good = check_operator(scale, [sample])
bad = check_operator(scale_row_major_fake, [sample])
strict = check_operator(scale_contiguous_only, [sample])
print(good)
print(json.dumps({
    "good": [good.passed, sorted({r.check for r in good.limitations})],
    "bad": [bad.passed, sorted({(r.check, r.variant.split()[1]) for r in bad.failed})],
    "strict": [strict.passed, sorted({
        r.variant.split()[1] for r in strict.limitations if r.check == "eager"
    })],
}))
"""


def test_the_downloaded_module_checks_an_operator_where_only_torch_is_installed(
    site, uv, tmp_path
):
    venv = tmp_path / "only-torch"
    made = run([str(uv), "venv", "--quiet", "--python", envs.base_python(), str(venv)])
    assert made.returncode == 0, made.stderr
    python = venv / "bin" / "python"
    install = [str(uv), "pip", "install", "--quiet", "--python", str(python)]
    constraints = ["-c", str(REPO / "constraints.txt")]
    installed = run(install + constraints + [f"torch=={pinned_torch()}"], timeout=900)
    assert installed.returncode == 0, installed.stderr[-3000:]
    folder = tmp_path / "tests"
    folder.mkdir()
    page = site.page("check_your_operator")
    (folder / "operator_checker.py").write_text(linked_module(page).read_text())
    (folder / "check_mine.py").write_text(textwrap.dedent(FRESH_CHECK))
    process = run([str(python), "check_mine.py"], cwd=folder, timeout=900)
    assert process.returncode == 0, process.stdout[-2000:] + process.stderr[-4000:]
    found = json.loads(process.stdout.strip().splitlines()[-1])
    assert found["good"] == [True, ["forward AD"]], process.stdout
    assert found["bad"][0] is False
    assert {check for check, _ in found["bad"][1]} >= {"test_faketensor", "compiled"}
    assert {layout for _, layout in found["bad"][1]} == {"permuted"}
    # A clear refusal of a layout is a limitation of the operator, not a bug.
    assert found["strict"] == [True, ["expanded", "permuted", "strided"]], found
