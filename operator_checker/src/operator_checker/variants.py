"""Variants
--------
From each sample the checker derives variants: the sample as given
(``contiguous``, in its own dtype, whatever it is: float8, integer and
complex included), in column-major order (``permuted``), as every other
element of a wider buffer (``strided``), one element into its storage
(``offset``), with every row the first one (``expanded``: stride 0, other
values in the memory behind the view), and with a size of zero (``empty``);
in each other dtype of ``dtypes``; with gradients, in its own precision and
in float64; on every device. Layouts are tried in the sample's precision
without gradients, precisions in row-major order. A ``dtype`` or ``device``
argument equal to the sample's follows the variant (an accumulation dtype,
say), and tensors of another dtype keep theirs. An argument the operator
writes keeps its row-major layout and never requires grad.

Indices keep their values
-------------------------
``permuted``, ``strided`` and ``offset`` keep every value, so whatever
fails on them is the operator's. ``expanded`` and ``empty`` change values
or sizes, and an integer tensor usually describes the other arguments:
offsets that rise and end at the number of rows, lengths that sum to it,
indices below it, a permutation. A kernel that does not check them (most
CPU kernels) reads out of bounds when they no longer fit. So the checker
never changes the values of an argument that holds indices: every integer
or bool tensor, unless ``indices=`` names the arguments that do (a float
tensor of box indices, say, or none). ``expanded`` leaves those arguments
as they are, and no size changes (``empty``, and the larger sizes of
``recompiles``) while the sample holds one: the checker cannot tell which
sizes they describe, so the row says so; give a sample of those sizes
instead.

Sizes that move together
------------------------
Without indices, the ``empty`` variant and the recompilation check change
sizes, and real operators tie sizes together: four box coordinates, five
columns per region of interest, channels divisible by a pool size. The
checker changes a size only where the eager kernel accepts the change,
trying first the sizes equal to it, which Dynamo's duck sizing treats as one
size anyway. Values are tiled along a grown dimension.

To empty, it tries the tensors from the last to the first: an operator's
first tensor is often the data that later ones index (the images that
boxes point into), and a kernel that does not check its indices may read
out of bounds on an emptied first tensor instead of refusing it.
"""

import dataclasses
import itertools

import torch
from torch import Tensor

from operator_checker.errors import cause, quiet
from operator_checker.options import DTYPE_NAMES, LAYOUT_NAMES
from operator_checker.report import Row
from operator_checker.samples import Sample, is_tensor
from operator_checker.steps import Crashed

LAYOUTS = LAYOUT_NAMES
# The layouts that keep every value: what fails on them is the operator's.
VALUE_KEEPING = ("contiguous", "permuted", "strided", "offset")
DTYPES = tuple(getattr(torch, name) for name in DTYPE_NAMES)
# The dtypes autograd, random draws and tolerances work in; a float8 sample
# is checked as given, its gradients in float64.
COMPUTING = (
    torch.float16,
    torch.bfloat16,
    torch.float32,
    torch.float64,
    torch.complex64,
    torch.complex128,
)


def holds_indices(t):
    """Whether a tensor holds indices by default: integers and bools."""
    return not (t.is_floating_point() or t.is_complex())


def index_arguments(sample, indices=None):
    """The names of the arguments that hold indices: ``indices`` if declared
    (a float tensor of box indices, say, or none), else every argument with
    an integer or bool tensor."""
    if indices is not None:
        return frozenset(indices)
    return frozenset(n for t, n in zip(*sample.named_tensors(), strict=True)
                     if holds_indices(t))  # fmt: skip


def computable(t):
    """``t`` in a dtype that comparisons and arithmetic accept: float8 and the
    other storage-only dtypes widened to float32 (exact), the rest as is."""
    if t.is_floating_point() and t.dtype not in COMPUTING:
        return t.to(torch.float32)
    return t


def identical(a, b):
    """Whether two tensors hold the same values, NaN equal to NaN, in any dtype."""
    a, b = computable(a.detach()), computable(b.detach())
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.is_floating_point() or a.is_complex():
        return bool(((a == b) | (a.isnan() & b.isnan())).all())
    return torch.equal(a, b)


def relayout(t, layout):
    """A copy of ``t`` with the same values, laid out as ``layout`` says."""
    t = t.detach()
    if layout == "permuted" and sum(size > 1 for size in t.shape) >= 2:
        reverse = list(range(t.dim()))[::-1]
        return t.permute(reverse).contiguous().permute(reverse)
    if layout == "strided" and t.numel() > 1:
        wide = t.new_zeros(*t.shape[:-1], 2 * t.shape[-1])
        wide[..., ::2] = t
        return wide[..., ::2]
    if layout == "expanded" and t.dim() and t.shape[0] > 1:
        memory = t.new_zeros(t.shape)  # behind the view: zeros, not the rows
        memory[:1] = t[:1]
        return memory[:1].expand(t.shape)
    if layout == "offset" and t.numel():
        storage = t.new_zeros(t.numel() + 1)
        storage[1:] = t.reshape(-1)
        return storage[1:].view(t.shape)
    return t.clone(memory_format=torch.contiguous_format)


def changes(t, layout):
    """Whether ``layout`` gives ``t`` other strides or a storage offset."""
    other = relayout(t, layout)
    return other.stride() != t.contiguous().stride() or other.storage_offset() > 0


def first_row_everywhere(value, keep=False):
    """The values an expanded view holds: every row equal to the first. A
    tensor the operator writes, or that holds indices, keeps its own
    (``keep``)."""
    if not isinstance(value, Tensor) or keep or not value.dim():
        return value
    return value[:1].expand(value.shape).contiguous()


def dtype_name(dtype):
    return str(dtype).removeprefix("torch.") if dtype else "integers"


@dataclasses.dataclass
class Variant:
    name: str
    index: int  # of the sample
    base: Sample  # on the variant's device and in its dtype, row-major
    layout: str  # contiguous, permuted, strided, expanded, offset or empty
    dtype: torch.dtype  # of its floating-point tensors (None: there are none)
    device: str
    grad: bool
    differentiable: frozenset  # argument names that may require grad
    written: frozenset  # argument names the operator writes
    given: bool  # the sample as given: contiguous, its own dtype and device
    indices: frozenset = frozenset()  # argument names that hold indices

    @property
    def key(self):
        """The variant as a step of an isolated run (see ``core.Steps``)."""
        kind = self.name.split()[1]  # the layout, or empty(the emptied names)
        return ("variant", self.index, kind, dtype_name(self.dtype), self.device,
                self.grad)  # fmt: skip

    def args(self, layout=None, grad=None):
        """Fresh arguments in this variant's layout, or in ``layout``. What the
        operator writes stays row-major, and indices are never expanded."""
        layout, grad = layout or self.layout, self.grad if grad is None else grad
        kept = self.written | (self.indices if layout == "expanded" else frozenset())

        def make(value, name):
            if not is_tensor(value):
                return value
            copy = relayout(value, "contiguous" if name in kept else layout)
            wants = (
                grad
                and name in self.differentiable
                and copy.is_floating_point()
                and copy.dtype in COMPUTING
            )
            return copy.requires_grad_(wants)

        return self.base.map(make)


def convert(sample, device, dtype):
    """The sample on ``device``; the tensors and dtype arguments of its first
    floating-point dtype in ``dtype``. Tensors of another dtype (a scale in
    float32 beside float8 data, integer indices) keep theirs: they are part
    of the operator's contract."""
    tensors = sample.tensors()
    floats = [t.dtype for t in tensors if t.is_floating_point()]
    own_dtype = floats[0] if floats else None
    converted = {own_dtype}
    own_device = tensors[0].device if tensors else None

    def moved(value, name):
        if is_tensor(value):
            follows = dtype is not None and value.dtype in converted
            return value.detach().to(device, dtype if follows else value.dtype)
        if isinstance(value, torch.dtype) and dtype and value in converted:
            return dtype
        if isinstance(value, torch.device) and value == own_device:
            return torch.device(device)
        return value

    return sample.map(moved)


def resized(sample, sizes):
    """``sample`` with the sizes ``{(tensor, dim): new size}``."""
    tensors = sample.tensors()
    for (index, dim), size in sizes.items():
        t = tensors[index]
        rows = torch.arange(size, device=t.device) % max(t.shape[dim], 1)
        tensors[index] = t.index_select(dim, rows)
    return sample.with_tensors(tensors)


def subsets(slots, limit=12):
    """``slots``, then with one slot left out, then two, at most ``limit``."""
    found = [list(slots)]
    for count in range(1, len(slots)):
        for left_out in itertools.combinations(range(len(slots)), count):
            found.append([s for i, s in enumerate(slots) if i not in left_out])
            if len(found) >= limit:
                return found
    return found


def refusal(run, sample):
    """What the eager kernel says to ``sample``: None if it runs."""
    try:
        with quiet():
            run.call(sample)
    except Exception as error:
        return cause(error)
    return None


def fixed_by_indices(sample, indices):
    """Why no size of ``sample`` may change, or None: it holds indices."""
    names = sorted({n for n in sample.named_tensors()[1] if n in indices})
    if not names:
        return None
    one = len(names) == 1
    return (
        f"{', '.join(names)} {'holds' if one else 'hold'} indices, offsets or "
        "lengths, which a new size must keep consistent with the other "
        "arguments, and the checker cannot tell how: give a sample of that size "
        f"(or declare indices= if {'it does' if one else 'they do'} not)"
    )


def empty_sizes(run, sample, indices=frozenset()):
    """The sizes to set to zero for the ``empty`` variant, or why there is none."""
    fixed = fixed_by_indices(sample, indices)
    if fixed is not None:
        return fixed
    shapes = [t.shape for t in sample.tensors()]
    slots = [(i, d) for i, shape in enumerate(shapes) for d in range(len(shape))]
    order = sorted(slots, key=lambda slot: (slot[1] != 0, -slot[0], slot[1]))
    first_refusal, tries = None, 0
    for slot in order:
        size = shapes[slot[0]][slot[1]]
        if size == 0:
            return "the sample is empty already"
        equal = [s for s in slots if s != slot and shapes[s[0]][s[1]] == size]
        for others in subsets(equal, limit=6):
            sizes = dict.fromkeys([slot, *others], 0)
            said = refusal(run, resized(sample, sizes))
            if said is None:
                return sizes
            first_refusal, tries = first_refusal or said, tries + 1
            if tries >= 40:
                return f"the kernel refuses every empty size tried: {first_refusal}"
    return f"the kernel refuses every empty size tried: {first_refusal}"


def grown_samples(run, sample, indices=frozenset()):
    """Three samples with larger sizes that the eager kernel accepts, for one
    dynamic compilation to serve; or why there are none. No grown size may
    equal a size that stays, or Dynamo would have tied them."""
    fixed = fixed_by_indices(sample, indices)
    if fixed is not None:
        return fixed
    shapes = [t.shape for t in sample.tensors()]
    by_size = {}
    for i, shape in enumerate(shapes):
        for d, size in enumerate(shape):
            if size >= 2:  # Dynamo specializes sizes 0 and 1
                by_size.setdefault(size, []).append((i, d))
    grow = []
    for _, slots in sorted(by_size.items()):
        for chosen in subsets(slots):
            sizes = {(i, d): shapes[i][d] + 1 for i, d in grow + chosen}
            if refusal(run, resized(sample, sizes)) is None:
                grow += chosen
                break
    if not grow:
        return "the kernel accepts no larger size"
    fixed = {s for i, shape in enumerate(shapes) for d, s in enumerate(shape)}
    fixed -= {shapes[i][d] for i, d in grow}
    samples = []
    for extra in range(1, 12):
        sizes = {(i, d): shapes[i][d] + extra for i, d in grow}
        if set(sizes.values()) & fixed:
            continue
        grown = resized(sample, sizes)
        if refusal(run, grown) is None:
            samples.append(grown)
        if len(samples) == 3:
            return samples
    return "the kernel accepts fewer than three larger sizes"


def variants_of(
    run, index, sample, devices, dtypes, written, nondifferentiable, steps, indices
):
    """The variants of one sample, and rows for those that cannot be made."""
    tensors, names = sample.named_tensors()
    floats = [t.dtype for t in tensors if t.is_floating_point()]
    own = floats[0] if floats else None  # the sample is checked as given
    differentiable = frozenset(
        n
        for n in names
        if n not in written and n not in nondifferentiable and n not in indices
    )
    own_type = tensors[0].device.type if tensors else "cpu"
    types = [torch.device(device).type for device in devices]
    home_device = devices[types.index(own_type)] if own_type in types else devices[0]
    home = ("contiguous", own, home_device, False)  # the sample as given
    made, rows = [], []

    def add(layout, dtype, device, grad, base, label=None):
        kind = " ".join([label or layout, dtype_name(dtype)] + ["grad"] * grad)
        given = (layout, dtype, device, grad) == home
        fields = (base, layout, dtype, device, grad, differentiable, written, given)
        made.append(Variant(f"#{index} {kind} {device}", index, *fields, indices))

    for device in devices:
        base = convert(sample, device, own)
        add("contiguous", own, device, False, base)
        for layout in LAYOUTS:
            values, kept = base, written
            if layout == "expanded":
                kept = written | indices
                values = base.map(lambda v, n, k=kept: first_row_everywhere(v, n in k))
            laid_out = zip(*values.named_tensors(), strict=True)
            if any(changes(t, layout) for t, n in laid_out if n not in kept):
                add(layout, own, device, False, values)
        where = f"#{index} empty {device}"
        sizes = steps.guarded(
            "eager",
            ("empty", index, device),
            lambda base=base: empty_sizes(run, base, indices),
        )
        if isinstance(sizes, dict):
            emptied = resized(base, sizes)
            label = "empty(" + ",".join(sorted({names[i] for i, _ in sizes})) + ")"
            add("empty", own, device, False, emptied, label)
        elif not isinstance(sizes, Crashed):  # a crash is a failed row already
            why = f"no empty variant: {sizes}"
            at = {"sample": index, "device": device}
            rows.append(Row("eager", where, "not applicable", why, 5, at))
        if floats:
            for dtype in (d for d in dtypes if d != own):
                add("contiguous", dtype, device, False, convert(sample, device, dtype))
            # Gradients in float64, where finite differences are precise; then
            # in the sample's own precision (float8 has no gradients), where
            # float32 stands in for a kernel that refuses float64.
            if own != torch.float64:
                grad64 = convert(sample, device, torch.float64)
                add("contiguous", torch.float64, device, True, grad64)
            if own in COMPUTING:
                add("contiguous", own, device, True, base)
            if own in COMPUTING and any(changes(t, "permuted") for t in base.tensors()):
                add("permuted", own, device, True, base)
            if own in COMPUTING and isinstance(sizes, dict):
                add("empty", own, device, True, emptied, label)
    return made, rows


def written_by_call(run, sample, declared):
    """The arguments a call writes: those the schema declares, and those it
    writes without declaring them (which ``test_schema`` reports)."""
    copies = sample.map(lambda v, n: v.detach().clone() if is_tensor(v) else v)
    written = set(declared)
    if refusal(run, copies) is None:
        before, names = sample.named_tensors()
        for after, old, name in zip(copies.tensors(), before, names, strict=True):
            if not identical(after, old):
                written.add(name)
    return frozenset(written)
