"""What ferry.halo needs to know of a user's array: address, shape, byte strides, element size and
type, and where it lives, from the protocols array libraries speak:

* PyTorch tensors (CPU or CUDA): their own accessors (data_ptr, stride, element_size), which work
  where __cuda_array_interface__ refuses (tensors that require grad);
* __cuda_array_interface__ (CuPy, Numba, PyTorch, JAX has none): v2/v3, strides or C order;
* NumPy arrays and anything with __array_interface__;
* __dlpack__ (any other library): the DLPack capsule is read, kept alive with the plan (its
  deleter runs when the capsule is collected), host (kDLCPU, kDLCUDAHost) or CUDA device memory.

The arrays are used in place: the halo library writes into them, so read-only arrays, negative or
zero strides (reversed and broadcast views) are refused; any positive strides are fine.
"""
import ctypes

from ._errors import argument_error

_DL_CPU, _DL_CUDA, _DL_CUDA_HOST, _DL_CUDA_MANAGED = 1, 2, 3, 13
_DL_KINDS = {0: "int", 1: "uint", 2: "float", 4: "bfloat", 5: "complex", 6: "bool"}


class ArrayInfo:
    """One array as the C API sees it. `lib` names the library ("numpy", "cupy", "torch", "cai",
    "dlpack"), `device` is -1 for host memory or the CUDA device ordinal (None where the protocol
    does not say), `dtype` a name comparable across libraries ("float32")."""
    __slots__ = ("ptr", "shape", "strides", "itemsize", "dtype", "device", "lib", "keep")

    def __init__(self, ptr, shape, strides, itemsize, dtype, device, lib, keep):
        self.ptr, self.shape, self.strides, self.itemsize = ptr, tuple(shape), tuple(strides), itemsize
        self.dtype, self.device, self.lib, self.keep = dtype, device, lib, keep

    @property
    def on_gpu(self):
        return self.device is None or self.device >= 0


def _c_strides(shape, itemsize):
    out, s = [], itemsize
    for n in reversed(shape):
        out.append(s)
        s *= n
    return tuple(reversed(out))


def _numpy_name(typestr):
    try:
        import numpy
        d = numpy.dtype(typestr)
        return d.name if d.fields is None else str(d.descr)
    except (ImportError, TypeError):
        return typestr


def _torch(t):
    import torch
    if t.layout != torch.strided:
        raise argument_error("a %s tensor has no strided memory to exchange halos in" % t.layout)
    if getattr(t, "is_conj", lambda: False)() or getattr(t, "is_neg", lambda: False)():
        raise argument_error("a tensor with a lazy conjugate or negation bit: call resolve_conj() / "
                             "resolve_neg() first")
    kind = t.device.type
    if kind == "cuda":
        device = t.device.index if t.device.index is not None else torch.cuda.current_device()
    elif kind == "cpu":
        device = -1
    else:
        raise argument_error("a tensor on %s: ferry.halo takes CPU or CUDA tensors" % t.device)
    es = t.element_size()
    return ArrayInfo(t.data_ptr(), t.shape, [s * es for s in t.stride()], es,
                     str(t.dtype).replace("torch.", ""), device, "torch", t)


def _cai(a, cai):
    if cai.get("mask") is not None:
        raise argument_error("a masked array (__cuda_array_interface__ with a mask)")
    ptr, readonly = cai["data"]
    if readonly:
        raise argument_error("a read-only array: the halo is written into it")
    import numpy
    itemsize = numpy.dtype(cai["typestr"]).itemsize
    strides = cai.get("strides") or _c_strides(cai["shape"], itemsize)
    device, lib = None, "cai"
    if type(a).__module__.startswith("cupy"):
        device, lib = a.device.id, "cupy"
    return ArrayInfo(ptr, cai["shape"], strides, itemsize, _numpy_name(cai["typestr"]), device, lib, a)


def _numpy(a):
    import numpy
    if isinstance(a, numpy.ndarray):
        if not a.flags.writeable:
            raise argument_error("a read-only array: the halo is written into it")
        if a.dtype.hasobject:
            raise argument_error("an array of Python objects (dtype %s)" % a.dtype)
        return ArrayInfo(a.ctypes.data, a.shape, a.strides, a.itemsize, _numpy_name(a.dtype), -1, "numpy", a)
    ai = a.__array_interface__
    data = ai.get("data")
    if not isinstance(data, tuple):
        return _numpy(numpy.asarray(a))  # a buffer object: NumPy resolves it without copying
    if data[1]:
        raise argument_error("a read-only array: the halo is written into it")
    d = numpy.dtype(ai.get("descr") if ai.get("descr") and len(ai["descr"]) > 1 else ai["typestr"])
    strides = ai.get("strides") or _c_strides(ai["shape"], d.itemsize)
    return ArrayInfo(data[0] + ai.get("offset", 0), ai["shape"], strides, d.itemsize, _numpy_name(d), -1, "numpy", a)


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


def _dlpack(a):
    dev_type, dev_id = a.__dlpack_device__()
    if dev_type not in (_DL_CPU, _DL_CUDA, _DL_CUDA_HOST, _DL_CUDA_MANAGED):
        raise argument_error("a DLPack array on device type %d: ferry.halo takes host or CUDA memory" % dev_type)
    capsule = a.__dlpack__()
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    # The DLManagedTensor starts with its DLTensor. The capsule stays named "dltensor" (not
    # consumed), so its destructor calls the producer's deleter once the plan lets it go.
    t = _DLTensor.from_address(get(capsule, b"dltensor"))
    if t.dtype.lanes != 1 or t.dtype.code not in _DL_KINDS:
        raise argument_error("a DLPack array of type code %d x %d lanes" % (t.dtype.code, t.dtype.lanes))
    itemsize = (t.dtype.bits * t.dtype.lanes + 7) // 8
    shape = [t.shape[i] for i in range(t.ndim)]
    strides = ([t.strides[i] * itemsize for i in range(t.ndim)] if t.strides
               else _c_strides(shape, itemsize))
    name = "bool" if t.dtype.code == 6 else "%s%d" % (_DL_KINDS[t.dtype.code], t.dtype.bits)
    device = dev_id if dev_type in (_DL_CUDA, _DL_CUDA_MANAGED) else -1
    return ArrayInfo(t.data + t.byte_offset, shape, strides, itemsize, name, device, "dlpack", (a, capsule))


def describe(a):
    """ArrayInfo of `a`, or HaloArgumentError saying why it cannot be a field."""
    mod = type(a).__module__
    if mod.startswith("torch") and hasattr(a, "data_ptr"):
        info = _torch(a)
    elif hasattr(a, "__cuda_array_interface__"):
        info = _cai(a, a.__cuda_array_interface__)
    elif hasattr(a, "__array_interface__"):
        info = _numpy(a)
    elif hasattr(a, "__dlpack__") and hasattr(a, "__dlpack_device__"):
        info = _dlpack(a)
    else:
        raise argument_error("a %s.%s is not an array ferry.halo can use (NumPy, CuPy, PyTorch, or "
                             "anything with __cuda_array_interface__, __array_interface__ or "
                             "__dlpack__)" % (mod, type(a).__name__))
    if len(info.shape) != 3:
        raise argument_error("a %d-D array of shape %s: fields are 3-D (a 2-D problem is a 3-D one of "
                             "extent 1 and width 0 along one axis)" % (len(info.shape), tuple(info.shape)))
    for k, (n, s) in enumerate(zip(info.shape, info.strides)):
        if s <= 0 and n > 1:
            raise argument_error("stride %d bytes along axis %d (a %s view): the halo library needs "
                                 "positive strides to write into the array; pass a copy or a view with "
                                 "positive strides" % (s, k, "reversed" if s < 0 else "broadcast"))
    # The stride of an axis of extent 1 is never used, and libraries leave any value there (0,
    # or the neighbour's): make it the outermost, which the library's no-overlap check accepts.
    span = max([info.itemsize] + [s * n for n, s in zip(info.shape, info.strides) if n > 1])
    info.strides = tuple(span if n == 1 else s for n, s in zip(info.shape, info.strides))
    return info


def current_stream(info):
    """A function returning the current CUDA stream (as an int) of the library that made `info`'s
    array, for ordering exchanges on it; None when the library has no notion of one (the legacy
    default stream, 0, is used then)."""
    if info.lib == "cupy":
        import cupy
        get = cupy.cuda.get_current_stream
        return lambda: get().ptr
    if info.lib == "torch":
        import torch
        get = torch.cuda.current_stream
        dev = info.device
        return lambda: get(dev).cuda_stream
    return None


def stream_handle(stream):
    """The cudaStream_t (an int) of `stream`: an int, a CuPy stream (.ptr), a PyTorch stream
    (.cuda_stream), or anything with __cuda_stream__ (the CUDA Python protocol)."""
    if stream is None:
        return 0
    if isinstance(stream, int):
        return stream
    for attr in ("ptr", "cuda_stream"):
        if hasattr(stream, attr):
            return int(getattr(stream, attr))
    if hasattr(stream, "__cuda_stream__"):
        return int(stream.__cuda_stream__()[1])
    raise TypeError("not a CUDA stream: %r (an int, a CuPy or PyTorch stream, or an object with "
                    "__cuda_stream__)" % (stream,))
