"""The package's modules import one way, down its layers, and only its torch
adapter touches PyTorch's private parts.

Each module may import only the modules of the layers below its own,
function-local imports included (the ones that keep ``import
operator_checker`` free of torch): the faces (the command, the pytest
plugin) call the front door, which calls the runner and the engine, which
call the checks, the derivation of variants, the data and the ground
modules, which import nothing of the package but each other's ground.
"""

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "operator_checker"

# From the top; a module may import those of any layer below its own, and
# those of its own layer that the row names after it.
LAYERS = [
    ["__init__", "__main__"],
    ["cli", "pytest"],
    ["config"],
    ["api"],
    ["isolation"],
    ["core"],
    ["checks"],
    ["variants"],
    ["targets", "samples"],
    ["report", "fixes", "steps"],
    ["errors", "options", "_torch"],
]
# Within a layer, what may import what (the data layer's samples finds an
# operator's samples with nothing of targets; the ground's modules are
# independent of each other, but _torch reads the package's floor).
SIDEWAYS = {("fixes", "options"), ("report", "options"), ("_torch", "__init__")}


def layer_of(module):
    return next(i for i, layer in enumerate(LAYERS) if module in layer)


def imports_of(path):
    """The package's modules that ``path`` imports, anywhere in it."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module == "operator_checker":
                found.update(alias.name for alias in node.names)
            elif node.module.startswith("operator_checker."):
                found.add(node.module.split(".")[1])
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("operator_checker."):
                    found.add(alias.name.split(".")[1])
    return found & {p.stem for p in PACKAGE.glob("*.py")} | (
        {"__init__"} if "TORCH_FLOOR" in path.read_text() else set()
    ) - {path.stem}


MODULES = sorted(p.stem for p in PACKAGE.glob("*.py"))


def test_every_module_has_a_layer():
    assert sorted(m for layer in LAYERS for m in layer) == MODULES


@pytest.mark.parametrize("module", MODULES)
def test_a_module_imports_only_from_below(module):
    mine = layer_of(module)
    for imported in imports_of(PACKAGE / f"{module}.py"):
        if imported == module:
            continue
        theirs = layer_of(imported)
        below = theirs > mine
        allowed = below or (module, imported) in SIDEWAYS or module == "__init__"
        assert allowed, f"{module} (layer {mine}) imports {imported} (layer {theirs})"


PRIVATE = re.compile(
    r"\._schema\b|\._opoverload\b|\._overloadname\b|\._qualified_op_name\b"
    r"|\._init_fn\b|\._qualname\b|torch\._C\b|torch\._ops\b|torch\._dynamo\b"
    r"|torch\._inductor\b|torch\._library\b"
)


@pytest.mark.parametrize("module", [m for m in MODULES if m != "_torch"])
def test_only_the_torch_adapter_touches_pytorchs_private_parts(module):
    code = [
        line
        for line in (PACKAGE / f"{module}.py").read_text().splitlines()
        if not line.lstrip().startswith("#")
    ]
    touched = [line.strip() for line in code if PRIVATE.search(line)]
    # Docstrings may name them; code may not (a name in backquotes is prose).
    touched = [line for line in touched if "``" not in line]
    assert not touched, f"{module} touches {touched}"
