"""The engine's tables: which checks a variant gets (``plan``), and what a
check's result becomes as a row (``verdict``)."""

import pytest
import torch
from operator_checker.checks import CheckerCannot, Failed, Outcome, Refused, Run
from operator_checker.core import plan, rank, verdict
from operator_checker.options import GRADIENT_CHECKS, OPCHECK_TESTS
from operator_checker.variants import Variant


def variant(layout="contiguous", dtype=torch.float32, grad=False, given=False):
    name = f"#0 {layout} {str(dtype).removeprefix('torch.')}{' grad' * grad} cpu"
    return Variant(name, 0, None, layout, dtype, "cpu", grad, frozenset({"x"}),
                   frozenset(), given)  # fmt: skip


@pytest.mark.parametrize(
    ("kind", "gradients", "wanted", "unwanted"),
    [
        (dict(given=True), False, {"vmap", "recompiles", "compiled-dynamic",
                                   "export-load"}, {"layout"}),
        (dict(layout="strided"), False, {"layout", "compiled", "export-load"},
         {"vmap", "recompiles", "compiled-dynamic"}),
        (dict(dtype=torch.float64, grad=True), True, set(GRADIENT_CHECKS),
         {"export-load", "export-decomposed"}),
        (dict(layout="empty"), False, {"compiled-dynamic"}, {"layout"}),
    ],
)  # fmt: skip
def test_plan_gives_each_variant_the_checks_that_say_something(
    kind, gradients, wanted, unwanted
):
    checks = plan(variant(**kind), gradients)
    assert set(OPCHECK_TESTS) <= set(checks)
    assert wanted <= set(checks) and not unwanted & set(checks), checks


RUN = Run(torch.ops.aten.relu.default, exact=True, nondet_tol=0.0)


@pytest.mark.parametrize(
    ("result", "outcome", "said"),
    [
        (None, "passed", ""),
        ("a note", "passed", "a note"),
        (Outcome("limitation", "by design"), "limitation", "by design"),
        (AssertionError("values differ"), "failed", "AssertionError: values differ"),
        (Failed("the vmap rule raises: X"), "failed", "the vmap rule raises: X"),
        (Refused("index out of range"), "not applicable", "the kernel refuses a "
                                                          "perturbed input"),
        (CheckerCannot("cannot compare float8"), "not applicable",
         "the checker cannot run this check here"),
    ],
)  # fmt: skip
def test_verdict_turns_a_result_into_a_row(result, outcome, said):
    row = verdict(RUN, variant(given=True), "compiled", result, {})
    assert row.outcome == outcome and row.detail.startswith(said), row
    assert row.at == {"sample": 0, "layout": "contiguous", "dtype": "float32",
                      "device": "cpu", "grad": False}  # fmt: skip
    if outcome == "failed":
        assert row.see  # a failure always names where its fix is taught


def test_a_declared_limitation_turns_a_failure_into_one_that_quotes_it():
    row = verdict(RUN, variant(), "compiled", AssertionError("boom"),
                  {"compiled": "known"})  # fmt: skip
    assert row.outcome == "limitation"
    assert row.detail == "declared: known (AssertionError: boom)"


def test_the_most_telling_variants_rank_first():
    ranks = [rank(variant(given=True)), rank(variant("strided")),
             rank(variant(dtype=torch.float64, grad=True)),
             rank(variant(dtype=torch.float16)), rank(variant("expanded")),
             rank(variant("empty"))]  # fmt: skip
    assert ranks == sorted(ranks) == [0, 1, 2, 3, 4, 5]
