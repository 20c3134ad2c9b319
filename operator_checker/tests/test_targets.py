"""targets.resolve: an operator by any of the names the command takes, and
one clear line when the name finds none."""

import checker_operators
import pytest
import torch
from operator_checker.targets import TargetError, resolve


@pytest.mark.parametrize(
    "target", ["oc_test::scale", "torch.ops.oc_test.scale", "oc_test.scale"]
)
def test_a_name_gives_the_operator_packet(target):
    assert resolve(target) is torch.ops.oc_test.scale


def test_a_name_with_an_overload_gives_that_overload():
    assert resolve("oc_test::scale.default") is torch.ops.oc_test.scale.default
    assert resolve("aten::add.Tensor") is torch.ops.aten.add.Tensor


def test_module_colon_attribute_gives_the_custom_op_object():
    assert resolve("checker_operators:scale") is checker_operators.scale


def test_a_py_file_colon_attribute_gives_the_custom_op_it_defines(tmp_path):
    module = tmp_path / "file_ops.py"
    module.write_text(
        "import torch\n"
        "@torch.library.custom_op('oc_file::double', mutates_args=())\n"
        "def double(x: torch.Tensor) -> torch.Tensor:\n"
        "    return 2 * x\n"
    )
    found = resolve(f"{module}:double")
    assert found._qualname == "oc_file::double"
    assert resolve(f"{module}:double") is found  # the file ran once


def test_imports_come_first(tmp_path):
    module = tmp_path / "registers_late.py"
    module.write_text(
        "import torch\n"
        "@torch.library.custom_op('oc_late::negate', mutates_args=())\n"
        "def negate(x: torch.Tensor) -> torch.Tensor:\n"
        "    return -x\n"
    )
    found = resolve("oc_late::negate", imports=[str(module)])
    assert found is torch.ops.oc_late.negate


@pytest.mark.parametrize(
    ("target", "imports", "message"),
    [
        ("not an operator", (), r"^'not an operator' names no operator: write"),
        ("oc_test::nothing", (), r"^no operator oc_test::nothing \(is the library"),
        ("oc_test::scale.nothing", (), r"^oc_test::scale has no overload 'nothing'"),
        ("checker_operators:OPERATORS_FILE", (), r"is a str, not an operator"),
        ("checker_operators:nothing", (), r"checker_operators has no attribute"),
        ("oc_test::scale", ["no_such_module_here"], r"^--import no_such_module_here "
         r"failed: ModuleNotFoundError: No module named 'no_such_module_here'$"),
        ("oc_test::scale", ["missing.py"], r"^--import missing.py: no such file$"),
        ("oc_test::scale", ["libmissing.so"], r"^--import libmissing.so: no such"),
    ],
)  # fmt: skip
def test_a_target_that_finds_no_operator_says_why_in_one_line(target, imports, message):
    with pytest.raises(TargetError, match=message) as raised:
        resolve(target, imports)
    assert "\n" not in str(raised.value)


def test_an_import_that_raises_is_one_line_naming_the_error(tmp_path):
    broken = tmp_path / "broken_ops.py"
    broken.write_text("import torch\nraise RuntimeError('no GPU here\\nsecond line')\n")
    with pytest.raises(TargetError) as raised:
        resolve("oc_test::scale", [str(broken)])
    assert str(raised.value) == (f"--import {broken} failed: RuntimeError: no GPU here")
