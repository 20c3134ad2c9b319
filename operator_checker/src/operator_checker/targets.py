"""Finding an operator by name, as the command and an isolated child do.

A target is ``ns::name`` or ``ns::name.overload`` (as the operator's schema
names it), ``torch.ops.ns.name`` with or without an overload, or
``package.module:attribute`` for a ``custom_op`` object. ``imports`` are what
registers the operator first: module names, ``.py`` files and ``.so``
libraries (``torch.ops.load_library``).
"""

import importlib
import importlib.util
import sys
from pathlib import Path

from operator_checker import _torch
from operator_checker.options import LIBRARY_SUFFIXES, OPERATOR_NAME


class TargetError(Exception):
    """A target or an import that cannot be used, said in one line."""


def load(what, option="--import"):
    """Import a module, run a ``.py`` file as one (once), or load a ``.so``
    library; the module, or None for a library. Errors name ``option``, the
    option that named ``what``."""
    import torch

    path = Path(what)
    try:
        if path.suffix in LIBRARY_SUFFIXES:
            if not path.is_file():
                raise TargetError(f"{option} {what}: no such library")
            torch.ops.load_library(str(path.resolve()))
            return None
        if path.suffix == ".py":
            if not path.is_file():
                raise TargetError(f"{option} {what}: no such file")
            name = f"operator_checker_imported_{path.stem}"
            loaded = sys.modules.get(name)
            if loaded is not None and loaded.__file__ == str(path.resolve()):
                return loaded  # a second run would register its operators again
            spec = importlib.util.spec_from_file_location(name, path.resolve())
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            spec.loader.exec_module(module)
            return module
        return importlib.import_module(what)
    except TargetError:
        raise
    except Exception as error:
        first = str(error).strip().splitlines()[0] if str(error).strip() else ""
        raise TargetError(
            f"{option} {what} failed: {type(error).__name__}: {first}"
        ) from error


def resolve(target, imports=()):
    """The operator ``target`` names, after ``imports``; ``TargetError`` if none."""
    import torch

    for what in imports:
        load(what)
    if ":" in target and "::" not in target:
        module_name, _, attribute = target.partition(":")
        found = load(module_name)
        for part in attribute.split("."):
            if not hasattr(found, part):
                raise TargetError(
                    f"{target}: {module_name} has no attribute {attribute}"
                )
            found = getattr(found, part)
        if not _torch.is_operator(found):
            raise TargetError(
                f"{target} is a {type(found).__name__}, not an operator: name a "
                "custom_op, torch.ops.ns.name or one of its overloads"
            )
        return found
    match = OPERATOR_NAME.match(target)
    if not match:
        raise TargetError(
            f"{target!r} names no operator: write ns::name, ns::name.overload, "
            "torch.ops.ns.name or package.module:attribute"
        )
    namespace, name, overload = match.groups()
    hint = (
        " (is the library that registers it imported? add --import MODULE)"
        if not imports
        else ""
    )
    try:
        packet = getattr(getattr(torch.ops, namespace), name)
    except (AttributeError, RuntimeError):
        raise TargetError(
            f"no operator {namespace}::{name}" + (near_miss(namespace, name) or hint)
        ) from None
    if overload is None:
        return packet
    if overload not in packet.overloads():
        raise TargetError(
            f"{namespace}::{name} has no overload {overload!r}; it has "
            f"{', '.join(packet.overloads())}"
        )
    return getattr(packet, overload)


def near_miss(namespace, name):
    """`` (did you mean ns::other?)`` for a registered operator whose name is
    close to ``name``, else ''."""
    import difflib

    names = sorted(_torch.operator_names(namespace))
    close = difflib.get_close_matches(name, names, n=1, cutoff=0.6)
    return f" (did you mean {namespace}::{close[0]}?)" if close else ""
