"""Variants
--------
From each sample the checker derives variants: the sample row-major
(``contiguous``), in column-major order (``permuted``), as every other
element of a wider buffer (``strided``), with every row the first one
(``expanded``: stride 0, other values in the memory behind the view), one
element into its storage (``offset``), and with a size of zero (``empty``);
in each dtype of ``dtypes``; with gradients, in its own precision and in
float64; on every device. Layouts
are tried in the sample's precision without gradients, precisions in
row-major order. A ``dtype`` or ``device`` argument equal to the sample's
follows the variant (an accumulation dtype, say), and tensors of another
dtype (integer indices) keep theirs. An argument the operator writes keeps
its row-major layout and never requires grad.

Sizes that move together
------------------------
The ``empty`` variant and the recompilation check change sizes, and real
operators tie sizes together: four box coordinates, five columns per region
of interest, channels divisible by a pool size. The checker changes a size
only where the eager kernel accepts the change, trying first the sizes
equal to it, which Dynamo's duck sizing treats as one size anyway. Values
are tiled along a grown dimension, so that indices stay in range.

To empty, it tries the tensors from the last to the first: an operator's
first tensor is often the data that later ones index (the images that
boxes point into), and a kernel that does not check its indices may read
out of bounds on an emptied first tensor instead of refusing it.
"""

import dataclasses
import itertools

import torch
from torch import Tensor

from operator_checker.report import cause, quiet
from operator_checker.samples import Sample, is_tensor

LAYOUTS = ("permuted", "strided", "expanded", "offset")
DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16)


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


def first_row_everywhere(value, written=False):
    """The values an expanded view holds: every row equal to the first. A
    tensor the operator writes keeps its own."""
    if not isinstance(value, Tensor) or written or not value.dim():
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

    def args(self, layout=None, grad=None):
        """Fresh arguments in this variant's layout, or in ``layout``."""
        layout, grad = layout or self.layout, self.grad if grad is None else grad

        def make(value, name):
            if not is_tensor(value):
                return value
            copy = relayout(value, "contiguous" if name in self.written else layout)
            wants = grad and name in self.differentiable and copy.is_floating_point()
            return copy.requires_grad_(wants)

        return self.base.map(make)


def convert(sample, device, dtype):
    """The sample on ``device``; the tensors and dtype arguments of its first
    floating-point dtype in ``dtype``."""
    tensors = sample.tensors()
    floats = [t.dtype for t in tensors if t.is_floating_point()]
    own_dtype = floats[0] if floats else None
    own_device = tensors[0].device if tensors else None

    def moved(value, name):
        if is_tensor(value):
            follows = dtype is not None and value.dtype == own_dtype
            return value.detach().to(device, dtype if follows else value.dtype)
        if isinstance(value, torch.dtype) and dtype and value == own_dtype:
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


def empty_sizes(run, sample):
    """The sizes to set to zero for the ``empty`` variant, or why there is none."""
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


def grown_samples(run, sample):
    """Three samples with larger sizes that the eager kernel accepts, for one
    dynamic compilation to serve; or why there are none. No grown size may
    equal a size that stays, or Dynamo would have tied them."""
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
