"""Verdicts that cannot pass a bug, nor blame a correct operator.

Each test checks an operator of ``checker_operators`` in this process, with
``only=`` the checks it is about: a real bug that used to pass (a broken
double backward, a broken vmap rule, a fake kernel of the wrong size that
exported "fine"), a correct operator that used to be blamed (offsets made
inconsistent by the ``empty`` variant, an integer output before a float one
in ``gradcheck``, float8 inputs that the checker's own steps could not
handle), and the checker's own ordering and wording.
"""

import torch
from checker_operators import (
    dequantize8,
    padded_segments,
    quantize8,
    scale,
    silu_breaks_twice,
    silu_once,
    silu_out_backward,
    sorted_with_order,
    unwritten_when_strided,
    wrong_fake,
    wrong_strides,
    wrong_vmap,
)

from operator_checker import check_operator

CPU = dict(devices=["cpu"])


def rows(report, check, outcome=None):
    return [
        row
        for row in report.rows
        if row.check == check and outcome in (None, row.outcome)
    ]


def sample():
    return torch.randn(3, 4, generator=torch.Generator().manual_seed(0))


# -- 1. Verdicts that cannot pass a bug ---------------------------------------


def test_a_double_backward_that_raises_is_a_failure_not_a_limitation():
    report = check_operator(
        silu_breaks_twice, [(sample(),)], only=["gradgradcheck"], **CPU
    )
    (row,) = rows(report, "gradgradcheck")
    assert row.outcome == "failed", row
    assert "modified by an inplace operation" in row.detail
    assert row.see.startswith("Training and Other Registrations > Training with")
    assert not report.passed


def test_a_backward_outside_autograd_is_no_double_backward_by_design():
    report = check_operator(silu_once, [(sample(),)], only=["gradgradcheck"], **CPU)
    (row,) = rows(report, "gradgradcheck")
    assert row.outcome == "limitation", row
    assert row.detail.startswith("no double backward: the backward's result")
    assert report.passed


def test_a_backward_with_an_out_argument_has_no_double_backward_by_design():
    report = check_operator(
        silu_out_backward, [(sample(),)], only=["gradgradcheck"], **CPU
    )
    (row,) = rows(report, "gradgradcheck")
    assert row.outcome == "limitation", row
    assert "support automatic differentiation" in row.detail


def test_a_broken_vmap_rule_the_author_registered_is_a_failure():
    report = check_operator(wrong_vmap, [(sample(), 2.0)], only=["vmap"], **CPU)
    (row,) = rows(report, "vmap")
    assert row.outcome == "failed", row
    assert "the registered vmap rule raises" in row.detail
    assert "Batching with register_vmap" in row.see


def test_without_a_rule_vmap_falls_back_to_a_loop_and_passes():
    report = check_operator(scale, [(sample(), 2.0)], only=["vmap"], **CPU)
    (row,) = rows(report, "vmap")
    assert row.outcome == "passed" and "no batching rule" in row.detail


def test_export_compares_the_sizes_and_strides_the_program_records():
    report = check_operator(
        wrong_fake, [(sample(), 2.0)], only=["export-load"], dtypes=[], **CPU
    )
    failed = rows(report, "export-load", "failed")
    assert failed and all(
        "the exported program says output 0 has size [2, 4], the kernel returns "
        "[3, 4]" in row.detail
        for row in failed
        if "contiguous" in row.variant
    ), failed
    assert failed[0].see.endswith("> Output sizes computed from input sizes")
    strides = check_operator(
        wrong_strides, [(sample(),)], only=["export-load"], dtypes=[], **CPU
    )
    (permuted,) = rows(strides, "export-load", "failed")
    assert "permuted" in permuted.variant
    assert "has strides [1, 3], the kernel returns [4, 1]" in permuted.detail
    assert permuted.see.endswith("> Fake kernel with the wrong strides")


def test_zero_forward_tangents_say_what_they_mean_to_a_user():
    report = check_operator(scale, [(sample(), 2.0)], only=["forward-ad"], **CPU)
    (row,) = rows(report, "forward-ad")
    assert row.outcome == "limitation"
    assert "return zero tangents, silently" in row.detail
    assert row.see.endswith("> Forward-mode AD returns no tangent")


# -- 2. Derived inputs that respect the operator's contract --------------------


OFFSETS_SAMPLE = (torch.randn(6, 2), torch.tensor([0, 2, 2, 5, 6]))


def test_offsets_keep_their_values_and_no_size_changes_around_them():
    report = check_operator(padded_segments, [OFFSETS_SAMPLE], dtypes=[], **CPU)
    assert report.passed, [str(row) for row in report.failed]
    (empty,) = [row for row in rows(report, "eager") if "empty" in row.variant]
    assert empty.outcome == "not applicable"
    assert empty.detail.startswith("no empty variant: offsets holds indices")
    (grown,) = rows(report, "recompiles")
    assert grown.outcome == "not applicable" and "offsets holds indices" in grown.detail
    # The expanded variant repeats the first row of the values, never of the
    # offsets.
    expanded = [r for r in report.rows if "expanded" in r.variant]
    assert expanded and all(r.outcome != "failed" for r in expanded)


def test_declared_indices_may_say_an_integer_tensor_holds_none():
    report = check_operator(
        padded_segments,
        [OFFSETS_SAMPLE],
        only=["test_faketensor"],
        indices={},
        dtypes=[],
        **CPU,
    )
    # Declared plain data, the offsets may be emptied like any tensor.
    emptied = {row.variant for row in rows(report, "test_faketensor")}
    assert "#0 empty(offsets) float32 cpu" in emptied, emptied


def test_a_kernel_that_returns_memory_it_never_wrote_is_named_so():
    report = check_operator(
        unwritten_when_strided, [(sample(),)], only=["compiled"], dtypes=[], **CPU
    )
    failed = report.failed
    assert failed and {row.check for row in failed} == {"eager"}, failed
    assert all(
        row.detail.startswith("reads memory it never wrote: two calls on the same")
        for row in failed
    )
    # The compiled check does not blame the fake kernel for it.
    unwritten = {row.variant for row in failed}
    compiled = [row for row in rows(report, "compiled") if row.variant in unwritten]
    assert compiled and {row.outcome for row in compiled} == {"not applicable"}


def test_gradcheck_sees_only_the_outputs_gradients_flow_through():
    report = check_operator(sorted_with_order, [(sample(),)], only=["gradcheck"], **CPU)
    (row,) = rows(report, "gradcheck")
    assert row.outcome == "passed", row


def test_the_first_failed_row_is_the_most_telling():
    report = check_operator(wrong_fake, [(sample(), 2.0)], **CPU)
    first = report.failed[0]
    assert first.variant == "#0 contiguous float32 cpu" and first.rank == 0
    ranks = [row.rank for row in report.failed]
    assert ranks == sorted(ranks)
    printed = str(report).splitlines()
    first_group = next(line for line in printed[1:] if not line.startswith("      "))
    assert first_group.endswith(("failed, #0 contiguous float32 cpu and 10 more",
                                 "failed, #0 contiguous float32 cpu"))  # fmt: skip


def test_an_undeclared_write_says_why_the_argument_is_not_differentiated():
    report = check_operator(
        "oc_test::scale_in_place_undeclared",
        [(sample(), 2.0)],
        only=["gradcheck"],
        **CPU,
    )
    (row,) = rows(report, "gradcheck")
    assert row.outcome == "not applicable"
    assert row.detail.startswith("x is written by the call")


# -- 3. The checker's own failures are never the operator's --------------------


def float8_sample():
    return (sample().to(torch.float8_e4m3fn), torch.tensor([0.5]))


def test_a_float8_sample_is_checked_as_given_and_nothing_blames_the_operator():
    report = check_operator(dequantize8, [float8_sample()], **CPU)
    given = [
        row for row in report.rows if row.variant == "#0 contiguous float8_e4m3fn cpu"
    ]
    assert given, "the sample was not checked in its own dtype"
    assert report.passed, [str(row) for row in report.failed]
    # opcheck's test_schema compares float8 tensors with allclose, which has
    # no float8 kernel: its harness fails, not the operator.
    schema = rows(report, "test_schema", "not applicable")
    assert schema and all(
        row.detail.startswith("opcheck's own harness fails here") for row in schema
    )
    assert not any("crashed" in row.detail for row in report.rows)


def test_a_float8_output_is_compared_and_its_gradient_drawn_in_a_wider_dtype():
    report = check_operator(quantize8, [(sample(), torch.tensor([0.5]))], **CPU)
    assert report.passed, [str(row) for row in report.failed]
    layout = rows(report, "layout")
    assert layout and {row.outcome for row in layout} == {"passed"}


def test_the_scan_for_writes_the_checker_cannot_make_is_its_own_row(monkeypatch):
    from operator_checker import core

    def cannot(run, sample, declared):
        raise NotImplementedError("\"equal\" not implemented for 'Float8_e4m3fn'")

    monkeypatch.setattr(core, "written_by_call", cannot)
    report = check_operator(scale, [(sample(), 2.0)], only=["test_schema"], **CPU)
    (row,) = [r for r in rows(report, "eager") if r.variant == "#0 as given"]
    assert row.outcome == "not applicable"
    assert row.detail.startswith("the checker could not scan the sample")
    assert report.passed
