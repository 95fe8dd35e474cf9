"""Array libraries for the ferry.halo rank scripts: allocation in several layouts, copies to and
from NumPy, synchronization, with one interface for NumPy, a DLPack-only wrapper of NumPy, CuPy and
PyTorch (CPU or CUDA)."""
import numpy as np


class DLPackOnly:
    """A NumPy array seen only through __dlpack__ (as a library without the array interfaces would
    hand it over)."""

    def __init__(self, a):
        self._a = a

    def __dlpack__(self, stream=None):
        return self._a.__dlpack__()

    def __dlpack_device__(self):
        return self._a.__dlpack_device__()


class Lib:
    """name: numpy, dlpack, cupy, torch (CUDA), torch-cpu."""

    def __init__(self, name, device=0):
        self.name, self.device = name, device
        self.gpu = name in ("cupy", "torch")
        if name == "cupy":
            import cupy
            self.xp = cupy
            cupy.cuda.Device(device).use()
        elif name.startswith("torch"):
            import torch
            self.torch = torch
            self.dev = torch.device("cuda", device) if name == "torch" else torch.device("cpu")
            if name == "torch":
                torch.cuda.set_device(device)

    def alloc(self, shape, dtype, fill, layout="C"):
        """(array handed to ferry.halo, base array holding it). layout: C, F, strided (every other
        point of a larger array along two axes, with an offset), padded (rows longer than needed)."""
        big = {"C": shape, "F": shape, "strided": (shape[0] + 1, 2 * shape[1], 2 * shape[2] + 3),
               "padded": (shape[0] + 2, shape[1] + 1, shape[2] + 5)}[layout]
        order = "F" if layout == "F" else "C"
        if self.name in ("numpy", "dlpack"):
            base = np.full(big, fill, dtype=dtype, order=order)
        elif self.name == "cupy":
            base = self.xp.full(big, fill, dtype=dtype, order=order)
        else:
            t = self.torch
            tdt = getattr(t, np.dtype(dtype).name)
            if layout == "F":
                base = t.full(big[::-1], fill, dtype=tdt, device=self.dev).permute(2, 1, 0)
            else:
                base = t.full(big, fill, dtype=tdt, device=self.dev)
        if layout == "strided":
            view = base[1:, ::2, 3::2]
        elif layout == "padded":
            view = base[1:1 + shape[0], :shape[1], 2:2 + shape[2]]
        else:
            view = base
        assert tuple(view.shape) == tuple(shape), (view.shape, shape)
        return (DLPackOnly(view) if self.name == "dlpack" else view), base

    def host(self, a):
        """A NumPy copy of a (library array or base)."""
        self.sync()
        if isinstance(a, DLPackOnly):
            a = a._a
        if self.name == "cupy":
            return self.xp.asnumpy(a)
        if self.name.startswith("torch"):
            return a.cpu().numpy()
        return np.array(a)

    def put(self, a, index, values):
        """a[index] = values (a NumPy array)."""
        if isinstance(a, DLPackOnly):
            a = a._a
        if self.name == "cupy":
            a[index] = self.xp.asarray(values)
        elif self.name.startswith("torch"):
            a[index] = self.torch.from_numpy(np.ascontiguousarray(values)).to(self.dev)
        else:
            a[index] = values
        self.sync()

    def sync(self):
        if self.name == "cupy":
            self.xp.cuda.get_current_stream().synchronize()
        elif self.name == "torch":
            self.torch.cuda.synchronize()
