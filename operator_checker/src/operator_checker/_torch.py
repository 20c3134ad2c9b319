"""Every private part of PyTorch the checker touches, in one place.

An operator's schema, its overloads and the ``custom_op`` behind it are
reachable only through private attributes (``_schema``, ``_opoverload``,
``_overloadname``, ``_qualified_op_name``, ``_init_fn``); the dispatcher's
registrations only through ``torch._C``; Dynamo's and Inductor's settings
only through their private config modules. The checker supports PyTorch
2.7 up to the newest release: when one of them renames something, this file
changes, and no other. Imports torch lazily.
"""

import contextlib
import re


def _torch():
    import torch

    return torch


def require_floor():
    """``ImportError`` on a PyTorch older than the package supports."""
    from operator_checker import TORCH_FLOOR

    torch = _torch()
    if tuple(int(part) for part in torch.__version__.split(".")[:2]) < TORCH_FLOOR:
        raise ImportError(
            "operator_checker needs PyTorch {}.{} or later; this is {}".format(
                *TORCH_FLOOR, torch.__version__
            )
        )


def is_overload(op):
    return isinstance(op, _torch()._ops.OpOverload)


def is_packet(op):
    return isinstance(op, _torch()._ops.OpOverloadPacket)


def unwrapped(op):
    """The operator behind a ``custom_op``'s ``CustomOpDef``, or ``op``."""
    return getattr(op, "_opoverload", op)


def is_operator(op):
    op = unwrapped(op)
    return is_overload(op) or is_packet(op)


def schema_of(overload):
    return overload._schema


def overload_name(overload):
    return overload._overloadname


def overloads_of(packet):
    """``[(name, overload)]`` of an ``OpOverloadPacket``."""
    return [(name, getattr(packet, name)) for name in packet.overloads()]


def qualified_name(op):
    """``ns::name`` of an operator, its packet or its ``custom_op``; None for
    anything else."""
    op = unwrapped(op)
    if is_overload(op):
        return op._schema.name
    return getattr(op, "_qualified_op_name", None)


def operator_name(overload):
    """``ns::name``, with ``.overload`` unless it is the default one."""
    name = overload._schema.name
    if overload._overloadname != "default":
        name += f".{overload._overloadname}"
    return name


def target_name(op):
    """The name a child process finds ``op`` by (``ns::name.overload`` or
    ``ns::name``), or None when ``op`` is no operator."""
    op = unwrapped(op)
    if is_overload(op):
        return f"{op._schema.name}.{op._overloadname}"
    if is_packet(op):
        return op._qualified_op_name
    return None


def custom_op_function(op):
    """The function a ``custom_op`` object (a ``CustomOpDef``) was made from,
    or None for anything else."""
    return getattr(op, "_init_fn", None)


def defining_function(op):
    """The Python function a ``custom_op`` was made from, or None."""
    function = getattr(op, "_init_fn", None)
    if function is not None:
        return function
    from torch._library.custom_ops import OPDEFS

    definition = OPDEFS.get(qualified_name(op) or "")
    return definition._init_fn if definition is not None else None


def display_name(op):
    """How an operator object names itself in a message."""
    return getattr(op, "_qualname", None) or qualified_name(op) or str(op)


def registration(name):
    """``(file, line)`` where the dispatcher says ``name`` was registered
    (a C++ file of the machine that built it, say), or None."""
    dumped = _torch()._C._dispatch_dump(name)
    match = re.search(r"registered at (.+?):(\d+)", dumped)
    return (match.group(1), int(match.group(2))) if match else None


def has_kernel(name, key):
    """Whether ``name`` has a kernel at the dispatch key ``key``."""
    return _torch()._C._dispatch_has_kernel_for_dispatch_key(name, key)


def operator_names(namespace):
    """The names registered in ``namespace``, without it or their overloads."""
    prefix = f"{namespace}::"
    return {
        found.removeprefix(prefix).partition(".")[0]
        for found in _torch()._C._dispatch_get_all_op_names()
        if found.startswith(prefix)
    }


def loaded_libraries():
    """The ``.so`` libraries this process loaded with ``torch.ops.load_library``."""
    return list(_torch().ops.loaded_libraries)


@contextlib.contextmanager
def capture_dynamic_output_shapes(capture):
    """Up to PyTorch 2.9, Dynamo captures an operator whose output size depends
    on the data only with two of its settings on."""
    if not capture:
        yield
        return
    with _torch()._dynamo.config.patch(
        capture_dynamic_output_shape_ops=True, capture_scalar_outputs=True
    ):
        yield


def compiler_settings():
    """The Dynamo and Inductor settings that change the checker's verdicts."""
    torch = _torch()
    dynamo, inductor = torch._dynamo.config, torch._inductor.config
    found = {
        f"torch._dynamo.config.{name}": getattr(dynamo, name)
        for name in (
            "capture_dynamic_output_shape_ops",
            "capture_scalar_outputs",
            "assume_static_by_default",
            "automatic_dynamic_shapes",
        )
        if hasattr(dynamo, name)
    }
    found.update(
        {
            f"torch._inductor.config.{name}": getattr(inductor, name)
            for name in ("fallback_random", "freezing", "cpp_wrapper")
            if hasattr(inductor, name)
        }
    )
    return found
