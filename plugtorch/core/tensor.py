"""The Tensor: a backend array, its backend, dtype, and autograd state.

Ops live in ``core.ops``; they are attached as methods in ``core.tensor_methods``
so this module stays about what a tensor *is*.
"""
from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any

from . import dispatch, native
from .debug import tensor_hooks_version
from .device import Device
from .grad_mode import _state as _grad_state
from .graph import AccumulateGrad, Node

if TYPE_CHECKING:  # the methods bound at import, as type checkers and IDEs see them
    from ._tensor_api import TensorMethods as _BoundMethods
else:
    _BoundMethods = object


class Tensor(_BoundMethods):
    _data: Any
    _backend: Any
    dtype: Any
    requires_grad: bool
    grad: Any
    grad_fn: Any
    _vc: list
    _accum: Any
    _retains_grad: bool
    # A view's (parent, op, operands, attrs, generation): the call that made it from the tensor
    # whose memory it shares, so an in-place op on it can give that tensor's graph its new value
    # (None: not a view). The generation is the shared version counter's second entry when the
    # view was made (0 before there is one): an in-place op with a graph on a tensor sharing the
    # memory bumps it, and a view whose generation is behind takes a graph node from its base's
    # new one before a node is built on it (ops/inplace.py). Tensors built without wrap may lack
    # the slot: outside dispatch, read it with getattr(t, "_view", None).
    _view: Any
    __slots__ = ("_data", "_backend", "dtype", "requires_grad", "grad", "grad_fn", "_vc",
                 "_accum", "_retains_grad", "_view", "__weakref__")

    # Tensor(...) as a constructor behaves like plugtorch.tensor(...); Tensor(2, 3), Tensor(5) or
    # Tensor(Size) is torch's uninitialised tensor of the default dtype (pytorch/examples'
    # gcn makes its weights so: ``nn.Parameter(torch.Tensor(n_in, n_out))``).
    def __new__(cls, data=None, *sizes, dtype=None, device=None, requires_grad=False):
        from .ops.creation import empty, tensor
        if sizes or isinstance(data, Size) or (isinstance(data, int) and not isinstance(data, bool)):
            dims = (*data, *sizes) if isinstance(data, Size) else (data, *sizes)
            if not all(isinstance(n, int) and not isinstance(n, bool) for n in dims):
                got = ", ".join(type(n).__name__ for n in dims)
                raise TypeError(f"Tensor() received an invalid combination of arguments - got ({got}); "
                                "use Tensor(*sizes) for an uninitialised tensor or Tensor(data)")
            t = empty(*dims, dtype=dtype, device=device, requires_grad=requires_grad)
        else:
            t = tensor([] if data is None else data, dtype=dtype, device=device,
                       requires_grad=requires_grad)
        if cls is not Tensor:
            t = t._as_subclass(cls)
        return t

    def _as_subclass(self, cls):
        t = object.__new__(cls)
        for slot in Tensor.__slots__[:-1]:
            setattr(t, slot, getattr(self, slot))
        return t

    # -- metadata ---------------------------------------------------------------
    @property
    def shape(self):
        return Size(self._data.shape)

    def size(self, dim=None):
        s = self._data.shape
        if dim is None:
            return Size(s)
        return s[_wrap_dim(dim, len(s), "size")]

    @property
    def ndim(self) -> int:
        return self._data.ndim

    def dim(self) -> int:
        return self._data.ndim

    def numel(self) -> int:
        n = 1
        for s in self._data.shape:
            n *= s
        return n

    nelement = numel

    def element_size(self) -> int:
        return self.dtype.itemsize

    @property
    def itemsize(self) -> int:
        return self.dtype.itemsize

    @property
    def nbytes(self) -> int:
        return self.numel() * self.dtype.itemsize

    def ndimension(self) -> int:
        return self._data.ndim

    def is_signed(self) -> bool:
        return self.dtype.is_signed

    def is_same_size(self, other) -> bool:
        return tuple(self._data.shape) == tuple(other.shape)

    def is_inference(self) -> bool:
        return False  # inference_mode is no_grad here: it makes no inference tensors

    @property
    def device(self) -> Device:
        b = self._backend
        return Device(b.name, b.device_index(self._data) if b.device_index else None)

    @property
    def backend(self) -> str:
        return self._backend.name

    # torch's device predicates, answered from what the backend declares it computes on
    # (Backend.accelerator): is_cuda is True on a CUDA backend (CuPy), never on the host.
    @property
    def is_cuda(self) -> bool:
        return self._backend.accelerator == "cuda"

    @property
    def is_xpu(self) -> bool:
        return self._backend.accelerator == "xpu"

    @property
    def is_mps(self) -> bool:
        return self._backend.accelerator == "mps"

    @property
    def is_cpu(self) -> bool:
        return self._backend.accelerator is None

    # plugtorch has no meta, sparse or quantized tensors: every tensor holds dense values
    @property
    def is_meta(self) -> bool:
        return False

    @property
    def is_sparse(self) -> bool:
        return False

    @property
    def is_quantized(self) -> bool:
        return False

    @property
    def is_leaf(self) -> bool:
        return self.grad_fn is None

    @property
    def _version(self) -> int:
        return self._vc[0]

    @property
    def data(self):
        return self.detach()

    @data.setter
    def data(self, other):
        if not isinstance(other, Tensor):
            raise TypeError(f"Tensor.data must be set to a Tensor, got {type(other).__name__}")
        self._data, self._backend, self.dtype = other._data, other._backend, other.dtype

    def is_floating_point(self) -> bool:
        return self.dtype.is_floating_point

    # -- host transfer (explicit) ------------------------------------------------
    def numpy(self, *, force: bool = False):
        if self.requires_grad and _grad_state.enabled and not force:
            raise RuntimeError(
                "Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() instead."
            )
        if self.dtype.name == "bfloat16":  # as torch: NumPy has no bfloat16 (ml_dtypes' is not NumPy's)
            raise TypeError("Got unsupported ScalarType BFloat16")
        return self._backend.primitives["to_host"](self._data)

    def item(self):
        if self.numel() != 1:
            raise RuntimeError(
                f"a Tensor with {self.numel()} elements cannot be converted to Scalar"
            )
        return self._backend.primitives["to_host"](self._data).reshape(()).item()

    def tolist(self):
        return self._backend.primitives["to_host"](self._data).tolist()

    def __bool__(self):
        if self.numel() != 1:
            raise RuntimeError(
                f"Boolean value of Tensor with more than one value is ambiguous (shape {list(self.shape)})"
            )
        return bool(self.item())

    def __float__(self):
        return float(self.item())

    def __int__(self):
        return int(self.item())

    def __index__(self):
        if self.dtype.is_floating_point or self.numel() != 1:
            raise TypeError("only integer tensors of a single element can be converted to an index")
        return int(self.item())

    def __len__(self):
        if self._data.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self._data.shape[0]

    def __iter__(self):
        if self._data.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        return (self[i] for i in range(self._data.shape[0]))

    def __hash__(self):
        return id(self)

    def __deepcopy__(self, memo):
        # copy.deepcopy(model) must copy the data, not try to pickle the backend object.
        if id(self) in memo:
            return memo[id(self)]
        if not self.is_leaf:
            raise RuntimeError("Only Tensors created explicitly by the user (graph leaves) support "
                               "the deepcopy protocol at the moment")
        from .ops.shape import clone
        t = clone(self.detach())
        t.requires_grad = self.requires_grad
        if self.grad is not None:
            t.grad = clone(self.grad.detach())
        memo[id(self)] = t
        return t

    __array_priority__ = 1000  # numpy_scalar * t defers to Tensor's operators, as with torch

    def __array__(self, dtype=None, copy=None):
        # As torch's: numpy.asarray(t) shares memory on a host-memory backend, and a tensor
        # that requires grad refuses (detach it first). copy= is NumPy 2's protocol.
        a = self.numpy()
        if dtype is not None and a.dtype != dtype:
            if copy is False:
                raise ValueError("Unable to avoid copy while creating an array as requested.")
            return a.astype(dtype)
        if copy is False and not self._backend.host_memory:
            raise ValueError(f"Unable to avoid copy: the tensor lives on the {self.backend} backend's "
                             "device memory")
        return a.copy() if copy else a

    # -- DLPack: delegated to the backend's native array, so any backend whose arrays speak it
    # (NumPy, CuPy) exchanges memory without copies; consumers call these two.
    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        if self.requires_grad:
            raise BufferError("Can't export tensors that require gradient, use tensor.detach()")
        export = getattr(self._data, "__dlpack__", None)
        if export is None:
            raise BufferError(f"the {self.backend} backend's arrays ({type(self._data).__name__}) do "
                              "not support DLPack; export t.cpu() instead")
        given = {"stream": stream, "max_version": max_version, "dl_device": dl_device, "copy": copy}
        return export(**{k: v for k, v in given.items() if v is not None})

    def __dlpack_device__(self):
        device = getattr(self._data, "__dlpack_device__", None)
        if device is None:
            raise BufferError(f"the {self.backend} backend's arrays ({type(self._data).__name__}) do "
                              "not support DLPack; export t.cpu() instead")
        return device()

    def __reduce_ex__(self, protocol):
        # Pickling (DataLoader workers, multiprocessing) carries the values through the host;
        # the autograd graph stays behind, as it cannot cross a process boundary.
        return (_rebuild, (type(self), self._backend.primitives["to_host"](self._data), self.backend,
                           bool(self.requires_grad and self.is_leaf)))

    def __repr__(self) -> str:
        from .printing import tensor_repr
        return tensor_repr(self)

    __str__ = __repr__

    def __format__(self, spec):
        if self._data.ndim == 0:
            return format(self.item(), spec)
        return repr(self)

    # -- sharing between processes (plugtorch.multiprocessing) ----------------------
    def share_memory_(self):
        """Move this tensor's data to shared memory, in place; a no-op if it is there already."""
        from ..multiprocessing.reductions import share_memory_
        return share_memory_(self)

    def is_shared(self) -> bool:
        """Whether this tensor's data is in shared memory (``share_memory_``)."""
        from ..multiprocessing.reductions import is_shared
        return is_shared(self)

    # -- autograd -----------------------------------------------------------------
    def requires_grad_(self, requires_grad: bool = True):
        if not self.is_leaf:
            if not requires_grad:
                raise RuntimeError(
                    "you can only change requires_grad flags of leaf variables. If you want to use a "
                    "computed variable in a subgraph that doesn't require differentiation use "
                    "var_no_grad = var.detach()."
                )
            return self
        if requires_grad and not (self.dtype.is_floating_point or self.dtype.is_complex):
            raise RuntimeError("only Tensors of floating point dtype can require gradients")
        self.requires_grad = bool(requires_grad)
        return self

    def detach(self):
        t = dispatch.wrap(self._data, self._backend)
        t._vc = self._vc  # a detached tensor shares storage, hence the version counter
        return t

    def detach_(self):
        self.grad_fn = None
        self.requires_grad = False
        return self

    def retain_grad(self):
        if not self.requires_grad:
            raise RuntimeError("can't retain_grad on Tensor that has requires_grad=False")
        if self.is_leaf or self._retains_grad:
            return
        self._retains_grad = True
        ref = weakref.ref(self)

        def _retain(g):
            t = ref()
            if t is not None:
                g = g.detach()
                t.grad = g.clone() if t.grad is None else t.grad + g
        self._add_hook(self.grad_fn, _retain)

    @property
    def retains_grad(self) -> bool:
        return self._retains_grad

    def register_hook(self, hook):
        """Call ``hook(grad)`` when this tensor's gradient is computed; it may return a replacement."""
        if not self.requires_grad:
            raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
        node = self.grad_fn if self.grad_fn is not None else dispatch.edge(self)
        return self._add_hook(node, hook)

    def register_post_accumulate_grad_hook(self, hook):
        """Call ``hook(tensor)`` after a backward pass has accumulated into this leaf's ``.grad``."""
        if not self.is_leaf:
            raise RuntimeError("post accumulate grad hooks cannot be registered on non-leaf tensors")
        if not self.requires_grad:
            raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
        node = dispatch.edge(self)
        if node.post_hooks is None:
            node.post_hooks = {}
        handle = RemovableHandle(node.post_hooks)
        node.post_hooks[handle.id] = hook
        tensor_hooks_version[0] += 1
        return handle

    @staticmethod
    def _add_hook(node, hook):
        if node.pre_hooks is None:
            node.pre_hooks = {}
        handle = RemovableHandle(node.pre_hooks)
        node.pre_hooks[handle.id] = hook
        tensor_hooks_version[0] += 1
        return handle

    def backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
        backward = _autograd_backward or _load_autograd_backward()
        backward(self, gradient, retain_graph=retain_graph, create_graph=create_graph, inputs=inputs)


# autograd.functional.backward, imported on the first backward (autograd imports this module); an
# import statement in Tensor.backward would run the import machinery's lookups every pass (~1 us)
_autograd_backward: Any = None


def _load_autograd_backward():
    global _autograd_backward
    from ..autograd.functional import backward
    _autograd_backward = backward
    return backward


class Size(tuple):
    """torch.Size: a tuple of ints with a torch-like repr."""

    def __repr__(self) -> str:
        return f"plugtorch.Size({list(self)})"

    def numel(self) -> int:
        n = 1
        for s in self:
            n *= s
        return n


class RemovableHandle:
    _next_id = 0

    def __init__(self, hooks: dict):
        self._hooks = hooks
        RemovableHandle._next_id += 1
        self.id = RemovableHandle._next_id

    def remove(self) -> None:
        self._hooks.pop(self.id, None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


def _rebuild(cls, array, backend: str, requires_grad: bool):
    from .device import get_backend
    b = get_backend(backend)
    t = dispatch.wrap(b.primitives["from_host"](array, None), b)
    if cls is not Tensor:
        t = t._as_subclass(cls)
    return t.requires_grad_(True) if requires_grad else t


def _wrap_dim(dim: int, ndim: int, op: str = "") -> int:
    n = max(ndim, 1)
    if not -n <= dim < n:
        raise IndexError(
            f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], but got {dim})"
        )
    return dim + n if dim < 0 else dim


CLASS_BODY = frozenset(vars(Tensor))  # what the class itself defines; the rest is bound at import
dispatch.Tensor = Tensor
if native.ext is not None:  # _native.c makes Tensors and Nodes: the fields it sets must be all of them
    native.check_slots(Tensor, native.ext.TENSOR_FIELDS)
    native.check_slots(Node, native.ext.NODE_FIELDS)
    native.ext.configure_types(Node, AccumulateGrad, Tensor)
