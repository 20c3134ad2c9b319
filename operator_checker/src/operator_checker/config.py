"""The command's configuration: ``[tool.operator_checker]`` in ``pyproject.toml``.

Found as ruff and pytest find theirs: the first ``pyproject.toml`` with such
a table, from the current folder upwards (or the file ``--config`` names).
Its keys are the command's options; paths in it (``samples``, ``.py`` and
``.so`` imports, reports) are relative to its folder. A table named by an
operator holds that operator's declarations::

    [tool.operator_checker]
    targets = ["mylib::crop", "mylib::pad"]
    imports = ["mylib"]
    samples = "tests/op_samples.pt"
    quick = false

    [tool.operator_checker."mylib::crop"]
    skip = {float16 = "no half kernel"}
    nondifferentiable = {boxes = "indices"}

An unknown key is an error that names it, never a silent no-op. This module
imports no torch.
"""

import dataclasses
import difflib
from pathlib import Path

from operator_checker.options import OPERATOR_NAME

# The run's options and their types (a tuple: any of them).
OPTIONS = {
    "targets": list,
    "imports": list,
    "samples": str,
    "quick": bool,
    "only": list,
    "dtypes": list,
    "devices": list,
    "timeout": (int, float),
    "isolate": bool,
    "output_format": str,
    "json": str,
    "markdown": str,
}
# The declarations, in the table of the run or of an operator.
DECLARATIONS = {
    "skip": dict,
    "limitations": dict,
    "nondifferentiable": dict,
    "indices": dict,
    "exact": bool,
    "nondet_tol": (int, float),
}
PATHS = ("samples", "json", "markdown")


class ConfigError(Exception):
    """A configuration that cannot be used, said in one line."""


@dataclasses.dataclass
class Config:
    """What a ``[tool.operator_checker]`` table says (empty without one)."""

    path: Path | None = None  # the pyproject.toml it came from
    options: dict = dataclasses.field(default_factory=dict)
    declarations: dict = dataclasses.field(default_factory=dict)  # the run's
    operators: dict = dataclasses.field(default_factory=dict)  # name: its own

    def for_operator(self, target):
        """The declarations for ``target``: the run's, then the operator's
        table over them (found by ``ns::name``, with or without overload)."""
        merged = {k: dict(v) if isinstance(v, dict) else v
                  for k, v in self.declarations.items()}  # fmt: skip
        match = OPERATOR_NAME.match(target)
        names = [target]
        if match:
            namespace, name, overload = match.groups()
            names = [f"{namespace}::{name}"]
            if overload:
                names.append(f"{namespace}::{name}.{overload}")
        for key in names:
            for option, value in self.operators.get(key, {}).items():
                if isinstance(value, dict):
                    merged[option] = {**merged.get(option, {}), **value}
                else:
                    merged[option] = value
        return merged


def read_toml(path):
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        try:
            import tomli as tomllib
        except ModuleNotFoundError:
            raise ConfigError(
                f"{path}: reading pyproject.toml needs Python 3.11 or the tomli package"
            ) from None
    try:
        return tomllib.loads(Path(path).read_text())
    except (OSError, ValueError) as error:
        raise ConfigError(f"{path}: {error}") from None


def find(start=None):
    """The first ``pyproject.toml`` with a ``[tool.operator_checker]`` table,
    from ``start`` (the current folder) upwards; None if there is none."""
    folder = Path(start or Path.cwd()).resolve()
    for candidate in (folder, *folder.parents):
        path = candidate / "pyproject.toml"
        if path.is_file() and "operator_checker" in read_toml(path).get("tool", {}):
            return path
    return None


def load(path=None):
    """The ``Config`` of ``path``, or of the file ``find()`` finds."""
    path = Path(path) if path is not None else find()
    if path is None:
        return Config()
    if not path.is_file():
        raise ConfigError(f"--config {path}: no such file")
    table = read_toml(path).get("tool", {}).get("operator_checker")
    if table is None:
        raise ConfigError(f"{path} has no [tool.operator_checker] table")
    config = Config(path=path)
    where = f"{path}: [tool.operator_checker]"
    for key, value in table.items():
        if isinstance(value, dict) and OPERATOR_NAME.match(key) and "::" in key:
            config.operators[key] = checked(
                value, DECLARATIONS, f'{path}: [tool.operator_checker."{key}"]'
            )
        elif key in DECLARATIONS:
            config.declarations.update(checked({key: value}, DECLARATIONS, where))
        else:
            config.options.update(checked({key: value}, OPTIONS, where))
    for key in PATHS:
        if key in config.options and config.options[key] != "-":
            config.options[key] = str(resolved(path, config.options[key]))
    if "imports" in config.options:
        config.options["imports"] = [
            str(resolved(path, what)) if what.endswith((".py", ".so")) else what
            for what in config.options["imports"]
        ]
    return config


def resolved(config_path, value):
    """A path of the configuration, relative to its folder; a
    ``file.py:function`` samples source keeps its function."""
    file, colon, function = str(value).rpartition(":")
    if colon and file.endswith(".py"):
        return f"{(config_path.parent / file).resolve()}:{function}"
    if colon and not Path(value).exists():
        return value  # module:function
    return (config_path.parent / value).resolve()


def checked(table, known, where):
    """``table`` if its keys are ``known`` and of their types; else a
    ``ConfigError`` naming the key."""
    for key, value in table.items():
        if key not in known:
            close = difflib.get_close_matches(key, sorted(known), n=1)
            guess = f" (did you mean {close[0]}?)" if close else ""
            raise ConfigError(f"{where}: unknown key {key!r}{guess}")
        kinds = known[key] if isinstance(known[key], tuple) else (known[key],)
        if (
            isinstance(value, bool)
            and bool not in kinds
            or not isinstance(value, kinds)
        ):
            names = " or ".join(kind.__name__ for kind in kinds)
            raise ConfigError(
                f"{where}: {key} must be {names}, not {type(value).__name__}"
            )
        if isinstance(value, dict):
            for name, reason in value.items():
                if not isinstance(reason, str):
                    raise ConfigError(
                        f"{where}: {key}.{name} must be a reason (a string)"
                    )
    return dict(table)
