"""Each check once, on the test operators, on the CPU: a correct operator
passes it, a broken one fails it. The compiling and exporting checks are
slow (an Inductor compilation each)."""

import pytest
import torch
from checker_operators import (
    reads_row_major,
    scale,
    silu_breaks_twice,
    wrong_backward,
    wrong_fake,
)

from operator_checker import check_operator

CPU = dict(devices=["cpu"], dtypes=[])


def outcomes(op, check, sample=None):
    sample = sample or (torch.randn(3, 4, generator=torch.Generator().manual_seed(0)),
                        2.0)  # fmt: skip
    report = check_operator(op, [sample], only=[check], **CPU)
    return {row.outcome for row in report.rows if row.check == check}


@pytest.mark.parametrize(
    ("check", "broken"),
    [
        ("test_faketensor", wrong_fake),
        ("gradcheck", wrong_backward),
        ("gradgradcheck", silu_breaks_twice),
    ],
)
def test_a_check_passes_a_correct_operator_and_fails_a_broken_one(check, broken):
    assert outcomes(scale, check) == {"passed"}
    sample = (torch.randn(3, 4),) if broken is silu_breaks_twice else None
    assert "failed" in outcomes(broken, check, sample)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("check", "broken", "sample"),
    [
        ("compiled", wrong_fake, None),
        ("compiled-dynamic", wrong_fake, None),
        ("export-load", wrong_fake, None),
        ("export-decomposed", wrong_fake, None),
        ("layout", reads_row_major, (torch.randn(3, 4),)),
    ],
)
def test_a_compiling_check_passes_a_correct_operator_and_fails_a_broken_one(
    check, broken, sample
):
    assert outcomes(scale, check) <= {"passed", "limitation"}
    assert "failed" in outcomes(broken, check, sample)


@pytest.mark.slow
def test_recompiles_passes_an_operator_whose_fake_kernel_keeps_sizes_symbolic():
    assert outcomes(scale, "recompiles") == {"passed"}
