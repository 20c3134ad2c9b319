"""The report: its JSON and Markdown forms, the links it makes, and the
course sections that its fixes name."""

import ast
import re
from pathlib import Path

import pytest
from operator_checker.report import (
    FIXES,
    JSON_FORMAT,
    OUTCOMES,
    PAGES,
    Report,
    Row,
    as_json,
    as_markdown,
    see_for,
)

COURSE = Path(__file__).resolve().parents[2] / "advanced"


def example_reports():
    broken = Report("mylib::crop", variants=3)
    broken.rows = [
        Row("gradcheck", "#0 contiguous float64 grad cpu", "failed",
            "GradcheckError: Jacobian mismatch for output 0",
            see_for("gradcheck", "Jacobian mismatch")),
        Row("vmap", "#0 contiguous float32 cpu", "limitation",
            "vmap fails: the kernel | refuses batches", see_for("vmap", "")),
        Row("export-load", "#0 contiguous float32 cpu", "passed"),
        Row("layout", "#0 empty cpu", "not applicable", "no empty variant"),
        Row("compiled", "declared", "skipped", "compiled: too slow"),
    ]  # fmt: skip
    correct = Report("mylib::scale", variants=1)
    correct.rows = [Row("test_schema", "#0 contiguous float32 cpu", "passed")]
    return [broken, correct]


def test_json_rows_carry_exactly_the_documented_fields(valid_report):
    written = as_json(
        example_reports(),
        [("mylib::gone", "no operator")],
        seconds=1,
        operator_checker="1.1.0",
        command=["operator-checker"],
        interrupted=False,
    )
    valid_report(written)
    assert written["format"] == JSON_FORMAT == "operator_checker.report/2"
    assert written["seconds"] == 1
    assert [r["operator"] for r in written["rows"]] == ["mylib::crop"] * 5 + [
        "mylib::scale"
    ]
    for row in written["rows"]:
        assert set(row) == {
            "operator", "check", "variant", "at", "outcome", "detail", "fix", "seconds"
        }  # fmt: skip
        assert row["outcome"] in OUTCOMES
    assert written["rows"][0]["fix"] == "Custom Python Operators > gradcheck catches it"
    verdicts = {
        o["operator"]: (o["passed"], o["failed_rows"]) for o in written["operators"]
    }
    assert verdicts == {"mylib::crop": (False, 1), "mylib::scale": (True, 0)}
    assert written["not_checked"] == [{"target": "mylib::gone", "error": "no operator"}]


def test_markdown_lists_the_failures_and_the_limitations():
    text = as_markdown(example_reports(), [("mylib::gone", "no operator")])
    failed = text.split("### Failed")[1].split("###")[0]
    limitations = text.split("### Limitations")[1].split("###")[0]
    assert "| `mylib::crop` | **failed** | 1 | 1 | 1 | 1 | 3 |" in text
    assert "| `mylib::scale` | passed | 0 | 0 | 0 | 0 | 1 |" in text
    assert "GradcheckError: Jacobian mismatch for output 0" in failed
    assert "the kernel \\| refuses batches" in limitations  # the | is escaped
    assert "export-load" not in text and "no empty variant" not in text
    assert "- `mylib::gone`: no operator" in text.split("### Not checked")[1]


def test_under_site_url_a_fix_carries_the_address_of_its_section(monkeypatch):
    assert "https://" not in see_for("vmap", "")
    monkeypatch.setenv("SITE_URL", "https://example.org/custom-ops/")
    assert see_for("vmap", "") == (
        "Training and Other Registrations > Batching with register_vmap "
        "(https://example.org/custom-ops/tutorials/custom_op_registrations.html"
        "#batching-with-register-vmap)"
    )


def course_sections():
    """{page title: (file stem, {section titles})}, inline literals as plain text."""
    found = {}
    for page in sorted(COURSE.glob("*.py")):
        lines = page.read_text().splitlines()
        title = ast.get_docstring(ast.parse(page.read_text())).splitlines()[0]
        sections = {
            lines[i - 1][2:].replace("``", "").strip()
            for i in range(1, len(lines))
            if re.match(r"^# ([-~])\1{2,}\s*$", lines[i])
            and lines[i - 1].startswith("# ")
        }
        found[title] = (page.stem, sections)
    return found


def test_every_fix_names_a_section_of_the_course_and_the_file_of_its_page():
    sections = course_sections()
    assert len(sections) > 10, f"no pages of the course in {COURSE}"
    for _check, pattern, page, section in FIXES:
        if page is None:  # no section teaches it (PyTorch's own bug)
            assert section is None and see_for("compiled", pattern.lstrip("^")) == ""
            continue
        assert page in sections, f"FIXES names no page of the course: {page!r}"
        assert section in sections[page][1], f"{page!r} has no section {section!r}"
        assert PAGES.get(page) == sections[page][0], f"PAGES[{page!r}]"


def test_the_first_matching_fix_wins_and_every_failure_gets_one():
    assert see_for("compiled", "RuntimeError: wrong strides") == (
        "Troubleshooting Custom Operators > Fake kernel with the wrong strides"
    )
    assert see_for("test_faketensor", "something new").startswith(
        "Troubleshooting Custom Operators > Which check catches which mistake"
    )


def test_a_fake_kernel_of_the_wrong_shape_is_sent_to_what_opcheck_compares():
    # "MetadataMismatchError" holds "meta", which once sent it to the section
    # on a missing fake kernel.
    detail = "MetadataMismatchError: mismatched tensor metadata for output[0]: shape"
    assert see_for("test_faketensor", detail) == (
        "Troubleshooting Custom Operators > The two detectors"
    )
    assert see_for("compiled", "no fake impl registered for crashing::row_sums") == (
        "Troubleshooting Custom Operators > No fake kernel under torch.compile"
    )


@pytest.mark.parametrize("outcome", OUTCOMES)
def test_printing_a_report_shows_each_outcome(outcome):
    shown = Report("mylib::op", variants=1)
    shown.rows = [Row("vmap", "#0 contiguous float32 cpu", outcome, "said so")]
    text = str(shown)
    assert text.splitlines()[0].startswith("mylib::op: 1 variant, ")
    assert f"vmap: {outcome}, #0 contiguous float32 cpu" in text
    assert ("1 row failed" in text) == (outcome == "failed")


def test_declared_skips_print_one_line_per_reason_naming_each():
    shown = Report("mylib::op", variants=2)
    shown.rows = [
        Row("eager", "declared", "skipped", "float16: --skip"),
        Row("eager", "declared", "skipped", "float64: --skip"),
        Row("compiled", "declared", "skipped", "compiled: left out by only="),
        Row("vmap", "declared", "skipped", "vmap: left out by only="),
        Row("vmap", "#0 contiguous float32 cpu", "passed"),
    ]
    lines = str(shown).splitlines()
    assert "  skipped (--skip): float16, float64" in lines
    assert "  skipped (left out by only=): compiled, vmap" in lines
    assert not any("and 1 more" in line for line in lines)


def test_only_never_leaves_out_what_the_calls_themselves_find():
    from operator_checker.report import left_out

    assert {"eager", "gradients"}.isdisjoint(left_out(["vmap"], False, {}))
    assert "compiled" in left_out(["vmap"], False, {})


def test_a_missing_double_backward_is_sent_to_a_backward_autograd_can_differentiate():
    # A backward in NumPy leaves autograd; one in C++ (torchvision's) was never
    # in it: the C++ page's backward calls operators that have their own.
    numpy = (
        "no double backward: RuntimeError: Can't call numpy() on Tensor that "
        "requires grad"
    )
    assert see_for("gradgradcheck", numpy) == (
        "Troubleshooting Custom Operators > A backward written in NumPy"
    )
    native = (
        "no double backward: RuntimeError: double backwards on roi_align not supported"
    )
    assert see_for("gradgradcheck", native) == (
        "C++ Custom Operators > A backward formula, registered from Python"
    )
