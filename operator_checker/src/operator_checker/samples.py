"""Samples
-------
A sample is the arguments of one call: a tuple of positional arguments, or
``Sample(*args, **kwargs)`` for keyword-only ones. ``overload_for`` binds it
to the operator's schema, once, into a copy whose tensors carry their
arguments' names (the schema comes from private attributes of torch, which
``operator_checker._torch`` reads). An ``OpOverloadPacket``
(``torch.ops.ns.name``) runs the first overload whose schema the sample
fits, whatever the overloads are called.

Recording samples
-----------------
Instead of writing samples, record them from calls your tests or your model
already make. ``capture_samples`` is a ``TorchFunctionMode``, the public
hook that sees every call of a ``torch.ops`` operator made from Python: it
keeps a row-major copy of the arguments of the first ``limit`` calls of
distinct shapes of each operator, and lets every call through.
"""

import contextlib

import torch
from torch import Tensor
from torch.overrides import TorchFunctionMode

from operator_checker import _torch

_torch.require_floor()


class Sample:
    """The arguments of one call of the operator, positional and by keyword."""

    def __init__(self, *args, **kwargs):
        self.args, self.kwargs = args, kwargs
        self.names = [f"argument {i}" for i in range(len(args))]  # until bound

    def __repr__(self):
        def shown(value):
            if isinstance(value, Tensor):
                return f"{str(value.dtype).removeprefix('torch.')}{list(value.shape)}"
            if isinstance(value, (list, tuple)):
                return "[" + ", ".join(map(shown, value)) + "]"
            return repr(value)

        parts = [shown(a) for a in self.args]
        parts += [f"{k}={shown(v)}" for k, v in self.kwargs.items()]
        return f"Sample({', '.join(parts)})"

    def map(self, fn):
        """A new sample with ``fn(value, argument name)`` applied to every
        value, inside lists too."""

        def walk(value, name):
            if isinstance(value, (list, tuple)):
                return type(value)(walk(item, name) for item in value)
            return fn(value, name)

        mapped = Sample(
            *(
                walk(value, name)
                for value, name in zip(self.args, self.names, strict=True)
            ),
            **{key: walk(value, key) for key, value in self.kwargs.items()},
        )
        mapped.names = self.names
        return mapped

    def tensors(self):
        return self.named_tensors()[0]

    def named_tensors(self):
        found, names = [], []
        for value, name in self._leaves():
            if is_tensor(value):
                found.append(value)
                names.append(name)
        return found, names

    def _leaves(self):
        leaves = []
        self.map(lambda value, name: leaves.append((value, name)))
        return leaves

    def with_tensors(self, tensors):
        replacements = iter(tensors)
        return self.map(lambda v, n: next(replacements) if is_tensor(v) else v)


class Slot:
    """Where a tensor goes in a call's arguments (see ``Run.caller``)."""

    def __init__(self, index):
        self.index = index


def is_tensor(value):
    return isinstance(value, (Tensor, Slot))


def as_sample(sample):
    return sample if isinstance(sample, Sample) else Sample(*sample)


def bind(schema, sample):
    """The names of the sample's positional arguments, or ``TypeError``."""
    positional = [a for a in schema.arguments if not a.kwarg_only]
    if len(sample.args) > len(positional):
        raise TypeError(f"{len(sample.args)} positional arguments for {schema}")
    given = {a.name: value for a, value in zip(positional, sample.args, strict=False)}
    for key, value in sample.kwargs.items():
        if key in given or key not in {a.name for a in schema.arguments}:
            raise TypeError(f"no keyword argument {key!r} in {schema}")
        given[key] = value
    for argument in schema.arguments:
        if argument.name not in given and not argument.has_default_value():
            raise TypeError(f"argument {argument.name!r} missing for {schema}")
        if argument.name in given:
            kind = getattr(argument, "real_type", argument.type)
            wrong = misfit(kind, given[argument.name])
            if wrong:
                raise TypeError(
                    f"argument {argument.name!r} of {schema.name} is {kind}, but "
                    f"the sample gives {wrong}"
                )
    return [a.name for a in positional[: len(sample.args)]]


def misfit(kind, value):
    """What is wrong with ``value`` for a schema type (``torch.Type``), in a
    few words, or None when it fits (or when the type is one this does not
    know: the kernel judges those)."""
    name = type(kind).__name__
    if name == "OptionalType":
        return None if value is None else misfit(kind.getElementType(), value)
    if name == "ListType":
        if not isinstance(value, (list, tuple)):
            return type(value).__name__
        wrong = [misfit(kind.getElementType(), item) for item in value]
        return next((f"a list holding {w}" for w in wrong if w), None)
    if value is None:
        return "None"
    expected = {
        "TensorType": (Tensor, Slot),
        "FloatType": (float, int),
        "IntType": (int,),
        "SymIntType": (int,),
        "BoolType": (bool,),
        "StringType": (str,),
        "NumberType": (int, float, complex, bool),
        "DeviceObjType": (torch.device, str, int),
    }.get(name)
    expected = {
        "ScalarType": (torch.dtype,),
        "Layout": (torch.layout,),
        "MemoryFormat": (torch.memory_format,),
    }.get(str(kind), expected)
    if name in ("IntType", "SymIntType", "FloatType") and isinstance(value, bool):
        return "a bool"
    if expected is None or isinstance(value, expected):
        return None
    return f"{type(value).__name__} {value!r}"[:60]


def bound(sample, names):
    """A copy of ``sample`` whose arguments carry the schema's ``names``; the
    sample itself stays as it was."""
    copy = Sample(*sample.args, **sample.kwargs)
    copy.names = names
    return copy


def overload_for(op, sample):
    """``(overload, bound sample)``: the ``OpOverload`` that ``op`` runs for
    ``sample``, and the sample bound to its schema (a copy)."""
    op = _torch.unwrapped(op)  # a custom_op's CustomOpDef
    if _torch.is_overload(op):
        return op, bound(sample, bind(_torch.schema_of(op), sample))
    if not _torch.is_packet(op):
        raise TypeError(
            f"{op!r} is not an operator: pass a custom_op, torch.ops.ns.name "
            "or one of its overloads"
        )
    reasons = []
    for name, overload in _torch.overloads_of(op):
        try:
            return overload, bound(sample, bind(_torch.schema_of(overload), sample))
        except TypeError as reason:
            reasons.append(f"{name}: {reason}")
    if len(reasons) == 1:  # one overload: its reason is the whole story
        raise TypeError(reasons[0].partition(": ")[2])
    raise TypeError(f"no overload of {op} takes {sample}: {'; '.join(reasons)}")


@contextlib.contextmanager
def capture_samples(*ops, limit=3):
    """Yield ``{op: [Sample, ...]}``, filled by the calls made inside the block."""
    by_name = {qualified_name(op): op for op in ops}
    captured = {op: [] for op in ops}

    class Recorder(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            op = by_name.get(qualified_name(func))
            if op is not None and len(captured[op]) < limit:
                sample = Sample(*args, **kwargs).map(
                    lambda v, n: (
                        v.detach().clone(memory_format=torch.contiguous_format)
                        if isinstance(v, Tensor)
                        else v
                    )
                )
                if repr(sample) not in map(repr, captured[op]):
                    captured[op].append(sample)
            return func(*args, **kwargs)

    with Recorder():
        yield captured


qualified_name = _torch.qualified_name


FORMAT = "operator_checker.samples/1"


def save_samples(path, samples):
    """Write samples to ``path`` (``torch.save``), for the command's
    ``--samples`` and for tests that replay them.

    ``samples`` is what ``capture_samples`` yields (``{op: [Sample, ...]}``),
    or ``{"ns::name": [...]}``; each sample a ``Sample`` or a tuple.
    """
    by_name = {}
    for op, op_samples in dict(samples).items():
        name = op if isinstance(op, str) else qualified_name(op)
        if name is None:
            raise TypeError(f"{op!r} is not an operator")
        by_name.setdefault(name, []).extend(
            {"args": list(s.args), "kwargs": dict(s.kwargs)}
            for s in map(as_sample, op_samples)
        )
    torch.save({"format": FORMAT, "samples": by_name}, path)


def load_samples(path):
    """``{"ns::name": [Sample, ...]}`` from a file ``save_samples`` wrote; a
    ``ValueError`` naming the file for any other."""
    try:
        data = torch.load(path, weights_only=True)
    except FileNotFoundError:
        raise
    except Exception as error:
        first = (str(error).strip().splitlines() or [type(error).__name__])[0]
        raise ValueError(
            f"{path} is not a samples file written by operator_checker.save_samples "
            f"(torch.load: {first[:120]})"
        ) from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ValueError(f"{path} was not written by operator_checker.save_samples")
    return {
        name: [Sample(*s["args"], **s["kwargs"]) for s in found]
        for name, found in data["samples"].items()
    }


def as_samples(found):
    """``{key: [Sample, ...]}`` from what a samples function returned: a dict
    of operators (or their names) to lists of samples, or one list (key
    ``""``: for whichever operator is checked). ``TypeError`` says what it
    got instead."""
    expected = "expected {operator: [samples]} or a list of tuples"
    if isinstance(found, dict):
        by_name = {}
        for op, op_samples in found.items():
            name = op if isinstance(op, str) else qualified_name(op)
            if name is None:
                raise TypeError(f"returned a dict keyed by {op!r}; {expected}")
            by_name[name] = checked_list(op_samples, expected)
        return by_name
    return {"": checked_list(found, expected)}


def checked_list(found, expected):
    if not isinstance(found, (list, tuple)):
        raise TypeError(f"returned {type(found).__name__}; {expected}")
    for item in found:
        if not isinstance(item, (Sample, tuple, list)):
            raise TypeError(
                f"returned a list holding {type(item).__name__}; {expected}"
            )
    return [as_sample(tuple(item) if isinstance(item, list) else item)
            for item in found]  # fmt: skip


def samples_for(found, names, where, key=None):
    """The samples of an operator in ``found`` (``{key: [samples]}``): the
    entry ``key``, else the entry of one of its ``names``, else a lone entry
    that names no operator (a list of samples, or what
    ``check_operator(..., isolate=True)`` saved). An entry keyed to another
    operator is never used for this one: ``ValueError`` names both."""
    if key is None:
        key = next((name for name in names if name in found), None)
    if key is None and list(found) in ([""], ["sample"]):
        key = next(iter(found))
    if key is None or key not in found:
        held = ", ".join(k for k in found if k) or "none"
        wanted = key or next(iter(names))
        raise ValueError(f"{where} holds no samples for {wanted}; it holds {held}")
    return found[key]
