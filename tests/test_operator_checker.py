"""The course's checker, ``operator_checker``, as a user installs and runs it.

* Field test: in a fresh environment holding only torch and torchvision, the
  checker's wheel (built from this checkout, as ``make wheel`` builds it) is
  installed with pip's rules; samples are recorded with ``capture_samples``
  around torchvision's own Python functions and saved with ``save_samples``;
  then ``python -m operator_checker`` checks torchvision's six C++ operators,
  each in a child process. Each verdict is asserted against the ground truth
  of ``../shared/reviews/check-operator-field-test.md``, established there
  with probes of each operator: no crash, no false alarm, and the true
  findings (``nms`` fails compiled and exported below two kept boxes, so its
  command exits 1; no double backward and no forward-mode derivative for
  ``deform_conv2d`` and the four region-of-interest operators, whose boxes
  silently get no gradient: limitations, so their command exits 0).
* A crash: a C++ operator of our own, built with ``load_inline`` as the C++
  pages build theirs, whose kernel reads far past the end of a strided input.
  The command reports the signal on that variant as a failed row and goes on
  with the other checks in a fresh child.
* The site serves the wheel in both editions, made of this checkout's
  package, and the page links it.

Cost: the environment a few seconds (uv links torch from its cache) and the
six operators about a minute; the C++ operator compiles once per machine
(``TORCH_EXTENSIONS_DIR``), about 45 s, and its check takes seconds.
"""

import json
import re
import sys
import textwrap
import zipfile

import envs
import pytest
from operator_checker.report import JSON_FORMAT

from pagelib import checker
from tests.support.helpers import (
    CHECKER_FIELD_TEST,
    MATRIX,
    REPO,
    fresh_python,
    pinned_torch,
    release_python,
    run,
)

# One worker makes the field test's environment and runs the command on
# torchvision once (about a minute of CPU); its tests all read that run.
pytestmark = pytest.mark.xdist_group(CHECKER_FIELD_TEST)

TORCHVISION = next(
    line.split("==")[1]
    for line in (REPO / "requirements.txt").read_text().splitlines()
    if line.startswith("torchvision==")
)
ROI_OPERATORS = ["roi_align", "roi_pool", "ps_roi_align", "ps_roi_pool"]
OTHERS = ["deform_conv2d", *ROI_OPERATORS]

RECORD = """
import torch
import torchvision
from operator_checker import capture_samples, save_samples

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
assert all(len(found) == 1 for found in samples.values()), samples
save_samples("samples.pt", samples)
"""


@pytest.fixture(scope="module")
def user_python(tmp_path_factory, uv):
    """A fresh environment with torch, torchvision and the checker's wheel."""
    folder = tmp_path_factory.mktemp("checker-user")
    wheel = checker.build_wheel(sys.executable, folder / "dist")
    constraints = ["-c", str(REPO / "constraints.txt")]
    packages = [f"torch=={pinned_torch()}", f"torchvision=={TORCHVISION}", wheel]
    python = fresh_python(uv, folder / "venv", constraints + packages, timeout=900)
    listed = run([str(uv), "pip", "list", "--python", str(python)])
    names = {line.split()[0].lower() for line in listed.stdout.splitlines()[2:]}
    # torch, torchvision, the checker and what they depend on; nothing the
    # site adds (pytest, matplotlib).
    assert "operator-checker" in names and not {"pytest", "matplotlib"} & names
    return python


@pytest.fixture(scope="module")
def field(user_python, tmp_path_factory):
    """The command on torchvision's operators: nms alone, then the other five."""
    folder = tmp_path_factory.mktemp("field-test")
    (folder / "record.py").write_text(RECORD)
    recorded = run([str(user_python), "record.py"], cwd=folder, timeout=600)
    assert recorded.returncode == 0, recorded.stderr[-4000:]
    command = [str(user_python), "-m", "operator_checker"]
    options = ["--import", "torchvision", "--samples", "samples.pt", "--device", "cpu"]
    runs = {}
    for name, targets in (("nms", ["nms"]), ("others", OTHERS)):
        named = [f"torchvision::{target}" for target in targets]
        report = folder / f"{name}.json"
        process = run(
            command + named + options + ["--json", str(report)],
            cwd=folder,
            timeout=1800,
        )
        found = json.loads(report.read_text()) if report.is_file() else None
        runs[name] = (process, found)
    return runs


def rows_of(found, name):
    return [row for row in found["rows"] if row["operator"] == f"torchvision::{name}"]


def outcomes(rows, outcome):
    return [row for row in rows if row["outcome"] == outcome]


def test_nms_exits_1_on_compiled_and_exported_below_two_kept_boxes_alone(field):
    process, found = field["nms"]
    assert process.returncode == 1, process.stdout[-3000:] + process.stderr[-3000:]
    assert found["operators"][0]["passed"] is False
    failed = outcomes(rows_of(found, "nms"), "failed")
    assert {row["check"] for row in failed} == {
        "compiled",
        "compiled-dynamic",
        "export-load",
        "export-decomposed",
    }
    for row in failed:
        assert re.search(r"u\d+ >= 2", row["detail"]), row
        # The variants that keep fewer than two boxes: none, or one box repeated.
        assert row["variant"].split()[1] in {"empty(dets,scores)", "expanded"}, row
        # The fix: the sharp-edges entry on create_unbacked_symint's minimum.
        assert row["fix"].startswith("Sharp Edges:"), row
        assert row["fix"].endswith("> create_unbacked_symint assumes at least two")
    assert "1 operator checked, " in process.stdout


def test_the_other_five_exit_0_with_their_limitations_listed(field):
    process, found = field["others"]
    assert process.returncode == 0, process.stdout[-3000:] + process.stderr[-3000:]
    assert [op["operator"] for op in found["operators"]] == [
        f"torchvision::{name}" for name in OTHERS
    ]
    assert all(op["passed"] for op in found["operators"]), found["operators"]
    assert not found["not_checked"]
    # The report printed lists the limitations, with their remedies.
    assert process.stdout.count("gradgradcheck: limitation") == len(OTHERS)
    assert "rois gets no gradient" in process.stdout


def test_every_row_has_the_json_fields_and_every_check_ran(field):
    for _process, found in field.values():
        assert found["format"] == JSON_FORMAT
        for row in found["rows"]:
            assert set(row) == {
                "operator",
                "check",
                "variant",
                "at",
                "outcome",
                "detail",
                "fix",
                "seconds",
            }
            assert row["outcome"] in {
                "failed",
                "limitation",
                "not applicable",
                "skipped",
                "passed",
            }
        for op in found["operators"]:
            rows = [r for r in found["rows"] if r["operator"] == op["operator"]]
            checked = {row["check"] for row in rows}
            assert {"test_faketensor", "compiled", "export-load", "vmap"} <= checked


@pytest.mark.parametrize("name", ROI_OPERATORS)
def test_a_region_of_interest_operator_passes_with_its_three_limitations(field, name):
    rows = rows_of(field["others"][1], name)
    assert not outcomes(rows, "failed"), outcomes(rows, "failed")
    limitations = {row["check"]: row["detail"] for row in outcomes(rows, "limitation")}
    assert set(limitations) == {"gradients", "gradgradcheck", "forward-ad"}
    assert limitations["gradients"].startswith("rois gets no gradient")
    assert "double backwards" in limitations["gradgradcheck"]
    # The image gets its gradient, and it is right: the batch-index column of
    # the boxes was never perturbed (no false alarm from gradcheck).
    (gradcheck,) = [row for row in rows if row["check"] == "gradcheck"]
    assert gradcheck["outcome"] == "passed", gradcheck


def test_deform_conv2d_passes_with_no_double_backward_and_no_forward_mode(field):
    rows = rows_of(field["others"][1], "deform_conv2d")
    assert not outcomes(rows, "failed"), outcomes(rows, "failed")
    assert {row["check"] for row in outcomes(rows, "limitation")} == {
        "gradgradcheck",
        "forward-ad",
    }
    (gradcheck,) = [row for row in rows if row["check"] == "gradcheck"]
    assert gradcheck["outcome"] == "passed"


def test_what_does_not_apply_says_why_and_no_size_change_is_a_false_alarm(field):
    for _process, found in field.values():
        for op in found["operators"]:
            rows = [r for r in found["rows"] if r["operator"] == op["operator"]]
            for row in outcomes(rows, "not applicable"):
                assert row["detail"], row
            recompiles = [row for row in rows if row["check"] == "recompiles"]
            assert len(recompiles) == 1, recompiles
            assert recompiles[0]["outcome"] != "failed", recompiles


# -- A crash ------------------------------------------------------------------

CRASHING_OPERATOR = r'''
import torch
from torch.utils.cpp_extension import load_inline

SOURCE = r"""
#include <torch/library.h>
#include <ATen/ATen.h>

// The sum of each row of a 2-D float tensor. Row-major input takes the fast
// path; any other layout the general one, which swaps the two strides: along
// a row it steps by the row stride, far past the end of a strided input.
at::Tensor row_sums(const at::Tensor& x) {
  TORCH_CHECK(x.dim() == 2 && x.scalar_type() == at::kFloat, "2-D float32 only");
  auto out = at::zeros({x.size(0)}, x.options());
  const float* data = x.data_ptr<float>();
  float* sums = out.data_ptr<float>();
  int64_t rows = x.size(0), cols = x.size(1);
  if (x.is_contiguous()) {
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) sums[r] += data[r * cols + c];
  } else {
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c)
        sums[r] += data[r * x.stride(1) + c * x.stride(0)];
  }
  return out;
}

TORCH_LIBRARY(crashing, m) { m.def("row_sums(Tensor x) -> Tensor"); }
TORCH_LIBRARY_IMPL(crashing, CPU, m) { m.impl("row_sums", &row_sums); }
"""

load_inline("checker_crashing_row_sums", SOURCE, is_python_module=False)


@torch.library.register_fake("crashing::row_sums")
def _(x):
    return x.new_empty(x.shape[:1])


def samples():
    return {"crashing::row_sums": [(torch.randn(2, 4096),)]}
'''


def test_an_operator_that_segfaults_on_one_variant_is_a_failed_row_and_the_run_goes_on(
    tmp_path,
):
    (tmp_path / "crashing.py").write_text(textwrap.dedent(CRASHING_OPERATOR))
    report = tmp_path / "report.json"
    process = run(
        [sys.executable, "-m", "operator_checker", "crashing::row_sums"]
        + ["--import", "crashing.py", "--samples", "crashing.py:samples"]
        + ["--only", "layout", "--only", "test_faketensor", "--json", str(report)],
        cwd=tmp_path,
        timeout=900,
    )
    assert process.returncode == 1, process.stdout[-3000:] + process.stderr[-3000:]
    rows = json.loads(report.read_text())["rows"]
    crashed = [row for row in rows if "crashed the process" in row["detail"]]
    assert [(row["check"], row["variant"], row["outcome"]) for row in crashed] == [
        ("eager", "#0 strided float32 cpu", "failed")
    ], crashed
    assert crashed[0]["detail"].startswith(
        "crashed the process: SIGSEGV on #0 strided float32 cpu"
    )
    # The checks went on in a fresh child: the other layouts were compared
    # with their row-major copies (the swapped strides give wrong sums on the
    # permuted and expanded ones; an offset view is row-major and passes).
    layout = {
        row["variant"].split()[1]: row["outcome"]
        for row in rows
        if row["check"] == "layout"
    }
    assert layout == {"permuted": "failed", "expanded": "failed", "offset": "passed"}
    faketensor = [row for row in rows if row["check"] == "test_faketensor"]
    assert faketensor and all(row["outcome"] == "passed" for row in faketensor)
    assert "crashed the process: SIGSEGV" in process.stdout


# -- Installed as users install it --------------------------------------------

SCALE = """
import torch


@torch.library.custom_op("installed::scale", mutates_args=())
def scale(x: torch.Tensor, factor: float) -> torch.Tensor:
    return x * factor


scale.register_fake(lambda x, factor: torch.empty_like(x))
scale.register_autograd(
    lambda ctx, grad: (grad * ctx.factor, None),
    setup_context=lambda ctx, inputs, output: setattr(ctx, "factor", inputs[1]),
)


def samples():
    return [(torch.randn(3, 4), 2.0)]
"""


def check_scale(python, folder, *options):
    (folder / "scale_op.py").write_text(textwrap.dedent(SCALE))
    return run(
        [str(python), "-m", "operator_checker", "installed::scale"]
        + ["--import", "scale_op", "--samples", "scale_op:samples", "--device", "cpu"]
        + list(options),
        cwd=folder,
        timeout=900,
    )


def test_pip_install_of_the_folder_works_where_only_torch_is_installed(uv, tmp_path):
    venv = tmp_path / "only-torch"
    seeded = [str(uv), "venv", "--quiet", "--seed", "--python", envs.base_python()]
    made = run(seeded + [str(venv)])
    assert made.returncode == 0, made.stderr
    python = venv / "bin" / "python"
    install = [str(uv), "pip", "install", "--quiet", "--python", str(python)]
    constraints = ["-c", str(REPO / "constraints.txt")]
    installed = run(install + constraints + [f"torch=={pinned_torch()}"], timeout=900)
    assert installed.returncode == 0, installed.stderr[-3000:]
    # pip, with its own build isolation, from a copy of the folder (a build in
    # the checkout would leave setuptools' build/ there).
    folder = tmp_path / "operator_checker"
    for path in checker.files():
        target = folder / path.relative_to(checker.ROOT)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(path.read_bytes())
    pip = [
        str(python),
        "-m",
        "pip",
        "install",
        "--quiet",
        "--disable-pip-version-check",
    ]
    installed = run(pip + [str(folder)], timeout=900)
    assert installed.returncode == 0, installed.stderr[-3000:]
    version = run([str(python), "-m", "operator_checker", "--version"])
    assert version.stdout.strip() == f"operator-checker {checker.version()}"
    process = check_scale(python, tmp_path, "--quick")
    assert process.returncode == 0, process.stdout[-3000:] + process.stderr[-3000:]
    assert "installed::scale: 1 variant, passed" in process.stdout


def test_the_checker_runs_on_its_torch_floor(tmp_path):
    floor = ".".join(map(str, envs_floor()))
    release = next(
        r["torch"] for r in MATRIX["releases"] if r["torch"].startswith(floor)
    )
    process = check_scale(release_python(release), tmp_path)
    assert process.returncode == 0, process.stdout[-3000:] + process.stderr[-3000:]
    assert "installed::scale: " in process.stdout and ", passed, " in process.stdout


def envs_floor():
    """The package's PyTorch floor, as its pyproject.toml requires it."""
    import tomllib

    project = tomllib.loads((checker.ROOT / "pyproject.toml").read_text())["project"]
    (torch_requirement,) = [d for d in project["dependencies"] if d.startswith("torch")]
    return tuple(int(part) for part in torch_requirement.split(">=")[1].split("."))


# -- The wheel the site serves ------------------------------------------------


@pytest.mark.parametrize("edition", ["", "zh_CN"])
def test_the_site_serves_the_wheel_of_this_checkout_and_the_page_links_it(
    site, edition
):
    wheel = site.html / edition / checker.SERVED / checker.wheel_name()
    with zipfile.ZipFile(wheel) as archive:
        served = {
            name.removeprefix("operator_checker/"): archive.read(name)
            for name in archive.namelist()
            if name.startswith("operator_checker/")
        }
    package = checker.ROOT / "src" / "operator_checker"
    assert served == {  # the modules and the package's data (its JSON schema)
        path.relative_to(package).as_posix(): path.read_bytes()
        for path in package.rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    }
    page = (site.html / edition / "tutorials" / "check_your_operator.html").read_text()
    assert f'href="../{checker.SERVED}/{checker.wheel_name()}"' in page
