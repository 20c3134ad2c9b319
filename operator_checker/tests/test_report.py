"""The report: its text, its JSON and Markdown forms."""

import pytest
from operator_checker.fixes import see_for
from operator_checker.options import OUTCOMES
from operator_checker.report import JSON_FORMAT, Report, Row, as_json, as_markdown


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
    from operator_checker.options import left_out

    assert {"eager", "gradients"}.isdisjoint(left_out(["vmap"], False, {}))
    assert "compiled" in left_out(["vmap"], False, {})
