"""ferry.halo.Plan: built once from the fields of every local subdomain, then exchanges many times."""
import ctypes as _ct

from .. import _build_info
from . import _library_axes_to_array_axes as _array_axes
from . import (Field, HaloError, VerifyResult, _agree, _argument_error, _as_widths, _capi, _check,
               _Owned, _current_stream, _describe, _ints, _lib, _register, _stream_handle)


def _per_subdomain(fields, nsub):
    """fields as a list (one per local subdomain) of lists of Field."""
    def one(x):
        return x if isinstance(x, Field) else Field(x)

    if isinstance(fields, (list, tuple)) and fields and all(isinstance(x, (list, tuple)) for x in fields):
        out = [[one(x) for x in sub] for sub in fields]
    elif isinstance(fields, (list, tuple)):
        out = [[one(x) for x in fields]]
    else:
        out = [[one(fields)]]
    if len(out) != nsub:
        raise _argument_error("fields for %d subdomain(s); this rank holds %d (give a list of fields "
                              "per subdomain)" % (len(out), nsub))
    if not out[0]:
        raise _argument_error("no fields")
    for s, fl in enumerate(out):
        if len(fl) != len(out[0]):
            raise _argument_error("subdomain %d has %d field(s), subdomain 0 has %d" % (s, len(fl), len(out[0])))
    return out


def _fill(c, info, nxt, w, origin, who, extent):
    """Checks one field against its subdomain (in the arrays' axis order, so that messages name the
    axes the user knows) and writes it into the C struct, the library's axis 0 being the last."""
    for a in range(3):
        lo, hi = w.side(a, -1), w.side(a, 1)
        if origin[a] < lo:
            raise _argument_error("%s: origin %d along axis %d leaves no room for the halo of width %d "
                                  "before the interior" % (who, origin[a], a, lo))
        need = origin[a] + extent[a] + hi
        if info.shape[a] < need:
            raise _argument_error("%s: along axis %d the interior (%d points) and its halo (%d before, %d "
                                  "after) need %d points from index 0; the array has %d (shape %s)"
                                  % (who, a, extent[a], lo, hi, need, info.shape[a], info.shape))
    if nxt is not None and (nxt.shape != info.shape or nxt.strides != info.strides or
                            nxt.dtype != info.dtype or nxt.device != info.device):
        raise _argument_error("%s: the swap array (next) differs from the array in shape, strides, "
                              "dtype or device" % who)
    _lib.ferry_halo_field_init(_ct.byref(c))
    c.data = info.ptr
    c.data_next = nxt.ptr if nxt is not None else None
    c.elem_bytes = info.itemsize
    for x in range(3):
        a = 2 - x
        c.alloc[x], c.origin[x], c.strides[x] = info.shape[a], origin[a], info.strides[a]
        c.minus[x], c.plus[x] = w.minus[a], w.plus[a]
    for d, width in w.overrides().items():
        c.dir_width[(d[2] + 1) + 3 * (d[1] + 1) + 9 * (d[0] + 1)] = width


_exchange, _exchange_on = _lib.ferry_halo_exchange, _lib.ferry_halo_exchange_on


class Plan(_Owned):
    """A halo exchange planned once (collective over the domain's ranks): neighbours, a method per
    neighbour pair (Ferry's measured model picks; `method` forces one: "local", "peer", "ipc",
    "staged", "pipelined", "mpi"), buffers, IPC handles, CUDA graphs.

    fields: this rank's arrays: a list of arrays or Field for one subdomain per rank, or a list of
    such lists, one per local subdomain; the same count, dtypes, widths and memory kind (all host
    or all GPU) on every subdomain of every rank. widths: of the bare arrays (an int, (minus, plus)
    per axis, or Widths). graphs: capture the GPU-only part once and replay it; fused: one pack and
    one unpack launch per GPU; priority_stream: a high-priority stream per GPU (False, with one GPU:
    the exchange runs on the caller's stream itself, the lowest latency); split_bytes: MPI messages
    above this go in parts; progress_thread: progress MPI messages between start() and finish() from
    a thread (needs MPI_THREAD_MULTIPLE).

    Errors (HaloArgumentError, raised on every rank together): arrays that are not 3-D, read-only,
    with negative or zero strides (a layout the library cannot write into), too small for interior
    plus halo, of different dtypes across subdomains or ranks, host and GPU memory mixed, a width
    larger than a neighbouring subdomain, fields that differ between ranks.
    """

    def __init__(self, domain, fields, widths=1, *, method=None, graphs=True, fused=True,
                 priority_stream=True, split_bytes=0, progress_thread=False):
        self.domain = domain
        self._h = None
        self._default_widths = widths
        subs = domain.subdomains
        err, sig = None, None
        opts = _capi.OptionsC()
        _lib.ferry_halo_options_init(_ct.byref(opts))
        try:
            dh = domain._live_handle()
            self.fields = _per_subdomain(fields, len(subs))
            nf = len(self.fields[0])
            cfields = (_capi.FieldC * (len(subs) * nf))()
            self._infos = []
            for s, fl in enumerate(self.fields):
                for f, fld in enumerate(fl):
                    name = ("'%s'" % fld.name if fld.name else "%d" % f) + (" of subdomain %d" % s if s else "")
                    try:
                        info = _describe(fld.array)
                        nxt = _describe(fld.next) if fld.next is not None else None
                        w = _as_widths(widths if fld.widths is None else fld.widths)
                        origin = (_ints(fld.origin, "origin") if fld.origin is not None
                                  else tuple(w.side(a, -1) for a in range(3)))
                    except HaloError as e:
                        raise _argument_error("field %s: %s" % (name, e.message)) from None
                    if info.on_gpu and not _build_info.cuda:
                        raise _argument_error("field %s is GPU memory, and this ferry was built without CUDA" % name)
                    if info.on_gpu and info.device is not None and 0 <= subs[s].device != info.device:
                        raise _argument_error("field %s is on GPU %d; the domain placed its subdomain on "
                                              "GPU %d (Domain(devices=...))" % (name, info.device, subs[s].device))
                    _fill(cfields[s * nf + f], info, nxt, w, origin, "field " + name, subs[s].extent)
                    self._infos.append((info, nxt))
            kinds = {i.on_gpu for i, _ in self._infos}
            if len(kinds) > 1:
                raise _argument_error("host and GPU arrays in one plan: all fields of a plan are host "
                                      "memory, or all GPU memory")
            for s in range(len(subs)):
                for f in range(nf):
                    a, b = self._infos[f][0].dtype, self._infos[s * nf + f][0].dtype
                    if a != b:
                        raise _argument_error("field %d: dtype %s on subdomain 0, %s on subdomain %d" % (f, a, b, s))
            sig = [i.dtype for i, _ in self._infos[:nf]]
            if method is not None and method != "auto" and method not in _capi.METHODS:
                raise _argument_error("method %r: one of %s, or None" % (method, ", ".join(_capi.METHODS)))
            opts.method = -1 if method in (None, "auto") else _capi.METHODS.index(method)
            opts.graphs, opts.fused = int(bool(graphs)), int(bool(fused))
            opts.priority_stream, opts.progress_thread = int(bool(priority_stream)), int(bool(progress_thread))
            opts.split_bytes = int(split_bytes)
        except HaloError as e:
            err = e.message
        except (TypeError, ValueError, OverflowError) as e:
            err = str(e)
        sigs = _agree(domain.comm, err, sig)
        # The library compares element sizes (and field counts); Python users mean dtypes.
        for f in range(len(sig) if all(len(s) == len(sig) for s in sigs) else 0):
            names = [s[f] for s in sigs]
            if len(set(names)) > 1:
                r = next(r for r, n in enumerate(names) if n != names[0])
                raise _argument_error("field %d: dtype %s on rank 0, %s on rank %d" % (f, names[0], names[r], r))
        self._gpu = self._infos[0][0].on_gpu
        self._stream = _current_stream(self._infos[0][0]) if self._gpu else None
        h = _ct.c_void_p()
        _check(_lib.ferry_halo_plan_create(dh, len(subs), nf, cfields, _ct.byref(opts),
                                           _ct.byref(h)))
        self._h = h
        _register(self)

    # -- exchanges --------------------------------------------------------------------------
    def _handle(self):
        if not self._h:
            raise _argument_error("the plan is closed")
        return self._h

    def _stream_of(self, stream):
        if stream is not None:
            return _stream_handle(stream)
        return self._stream() if self._stream is not None else 0

    def exchange(self, stream=None):
        """Fills every halo region that has a neighbour. GPU arrays: ordered on `stream` (default:
        the arrays' library's current stream), returning without waiting for the GPU; host arrays:
        returns with every halo filled."""
        h = self._h or self._handle()
        if self._gpu:
            rc = _exchange_on(h, self._stream() if stream is None and self._stream else self._stream_of(stream))
        else:
            rc = _exchange(h)
        if rc:
            _check(rc)

    def start(self, stream=None):
        """Starts the exchange after the work already on `stream` (GPU; default: the current
        stream); returns without waiting for the GPU. Host arrays: packs and posts every message.
        Compute interior() meanwhile; call finish() before reading or writing the halo or the
        exterior()."""
        _check(_lib.ferry_halo_start(self._h or self._handle(), self._stream_of(stream) if self._gpu else None))

    def finish(self, stream=None):
        """Completes the exchange: work queued on `stream` after it sees every halo filled."""
        _check(_lib.ferry_halo_finish(self._h or self._handle(), self._stream_of(stream) if self._gpu else None))

    def test(self):
        """Progresses messages between start() and finish(); True when finish() will not wait for
        the network."""
        done = _ct.c_int()
        _check(_lib.ferry_halo_test(self._handle(), _ct.byref(done)))
        return bool(done.value)

    def swap(self):
        """Flips every field to its other array (Field.next), without re-planning; every rank
        swaps alike. Field.current tells which array the plan exchanges now."""
        _check(_lib.ferry_halo_swap(self._handle()))
        for fl in self.fields:
            for f in fl:
                f._swapped = not f._swapped

    def verify(self):
        """Collective and blocking: fills every field with known values, exchanges, checks every
        halo cell (and that nothing else changed), restores the fields. Returns a VerifyResult;
        bad cells raise nothing."""
        h = self._handle()
        if self._gpu and self._stream is not None:
            _sync(self._infos[0][0])  # the user's queued work must not race with the fill
        checked, bad = _ct.c_longlong(), _ct.c_longlong()
        buf = _ct.create_string_buffer(4096)
        _check(_lib.ferry_halo_verify_report(h, _ct.byref(checked), _ct.byref(bad), buf, len(buf)))
        return VerifyResult(checked.value, bad.value, _array_axes(buf.value.decode("utf-8", "replace")))

    # -- regions and statistics --------------------------------------------------------------
    def _slices(self, lo, ext, sub, field):
        origin = self._origin(sub, field)
        return tuple(slice(origin[a] + lo[2 - a], origin[a] + lo[2 - a] + ext[2 - a]) for a in range(3))

    def _origin(self, sub, field):
        fld = self.fields[sub][field]
        if fld.origin is not None:
            return tuple(int(x) for x in fld.origin)
        w = _as_widths(self._widths_of(fld))
        return tuple(w.side(a, -1) for a in range(3))

    def _widths_of(self, fld):
        return fld.widths if fld.widths is not None else self._default_widths

    def interior(self, sub=0, field=0):
        """Slices, into the arrays of field `field` of subdomain `sub`, of the points whose stencil
        reads no halo: computable between start() and finish()."""
        lo, ext = _capi.LL3(), _capi.LL3()
        _check(_lib.ferry_halo_interior(self._handle(), int(sub), lo, ext))
        return self._slices(lo, ext, sub, field)

    def exterior(self, sub=0, field=0):
        """The rest of the interior, as a list of at most 6 disjoint slice tuples (compute them
        after finish())."""
        n, lo, ext = _ct.c_int(), (_capi.LL3 * 6)(), (_capi.LL3 * 6)()
        _check(_lib.ferry_halo_exterior(self._handle(), int(sub), _ct.byref(n), lo, ext))
        return [self._slices(lo[i], ext[i], sub, field) for i in range(n.value)]

    def stats(self):
        """Per exchange on this rank: {"sent": {method: {"messages", "bytes", "regions"}},
        "received": {...}, "neighbour_ranks", "pack_launches", "unpack_launches"}; methods that
        move nothing are left out."""
        sent, recv, counts = (_capi.LL3 * 6)(), (_capi.LL3 * 6)(), _capi.INT3()
        _check(_lib.ferry_halo_stats(self._handle(), sent, recv, counts))

        def table(t):
            return {m: dict(zip(("messages", "bytes", "regions"), t[i])) for i, m in enumerate(_capi.METHODS)
                    if any(t[i])}
        return {"sent": table(sent), "received": table(recv), "neighbour_ranks": counts[0],
                "pack_launches": counts[1], "unpack_launches": counts[2]}

    def describe(self):
        """Methods, bytes and messages per method, for people."""
        rc, s = _capi.text(_lib.ferry_halo_describe, self._handle())
        _check(rc)
        return s

    # -- lifetime ------------------------------------------------------------------------------
    _free = "ferry_halo_plan_free"

    def close(self):
        """Frees the plan (collective over the ranks of a node; an exchange in flight is finished)."""
        _Owned.close(self)


def _sync(info):
    if info.lib == "cupy":
        import cupy
        cupy.cuda.get_current_stream().synchronize()
    elif info.lib == "torch":
        import torch
        torch.cuda.current_stream(info.device).synchronize()


def plan(domain, fields, widths=1, **options):
    """Plan(domain, fields, widths, **options), as ferry::halo::plan() is spelled in C++."""
    return Plan(domain, fields, widths, **options)

