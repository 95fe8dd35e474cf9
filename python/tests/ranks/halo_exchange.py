"""ferry.halo exchanges checked against a global array, on every rank, for many cases in one launch.

    mpiexec -n N python halo_exchange.py [--lib numpy|dlpack|cupy|torch|torch-cpu] [--quick]

Each case: a global shape (prime extents too), widths (uniform, per side, the 26-direction
override), periodicity, fields of different dtypes and layouts (C, Fortran, strided and padded
views), one or two subdomains per rank, a method. Every rank fills its arrays' interiors from
global arrays every rank computes alike (seeded) and their halos with a sentinel, exchanges, and
compares each whole array (and the memory around views) with what it must hold: the global
value, wrapped on periodic axes, wherever a neighbour exists and the width reaches, the sentinel
elsewhere. plan.verify() runs on every case too, and swap(), start()/test()/finish(),
interior()/exterior() and stats() on some. Rank 0 prints "halo_exchange: correct on N ranks (LIB,
K cases)"; the exit status is 1 on any difference.
"""
import argparse
import os
import sys

import numpy as np
from mpi4py import MPI

import ferry.halo as fh
from halo_arrays import Lib

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
ap = argparse.ArgumentParser()
ap.add_argument("--lib", default="numpy")
ap.add_argument("--quick", action="store_true")
args = ap.parse_args()
seed = int(os.environ.get("FERRY_TEST_SEED", "2026"))
local = comm.Split_type(MPI.COMM_TYPE_SHARED, key=rank)
lib = Lib(args.lib, device=0)
if lib.gpu:
    count = lib.xp.cuda.runtime.getDeviceCount() if args.lib == "cupy" else lib.torch.cuda.device_count()
    lib = Lib(args.lib, device=local.Get_rank() % count)
if rank == 0:
    print("halo_exchange: seed %d, %d ranks, %s arrays" % (seed, size, args.lib), flush=True)
failures = []
SENTINEL = {"float64": -7.5, "int32": -7, "float32": -3.25, "complex128": -1 - 1j, "uint8": 255}


def check(what, ok):
    if not bool(ok):
        failures.append(what)
        print("rank %d: WRONG: %s" % (rank, what), flush=True)


def global_array(shape, dtype, f):
    rng = np.random.default_rng(seed * 1000 + f)
    if np.dtype(dtype).kind == "f":
        return rng.standard_normal(shape).astype(dtype)
    if np.dtype(dtype).kind == "c":
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)
    return rng.integers(0, 120, size=shape).astype(dtype)


def expected(G, sub, w, origin, shape, periodic, fill):
    """What an array of `shape` holding subdomain `sub` with `origin` must hold after an exchange."""
    n = G.shape
    loc = [np.arange(shape[a]) - origin[a] for a in range(3)]
    comp = [np.where(l < 0, -1, np.where(l >= sub.extent[a], 1, 0)) for a, l in enumerate(loc)]
    depth = [np.where(l < 0, -l, l - sub.extent[a] + 1) for a, l in enumerate(loc)]
    glob = [sub.offset[a] + loc[a] for a in range(3)]
    exists = [((g >= 0) & (g < n[a])) | bool(periodic[a]) for a, g in enumerate(glob)]
    C = np.meshgrid(*comp, indexing="ij")
    D = np.meshgrid(*depth, indexing="ij")
    E = np.meshgrid(*exists, indexing="ij")
    take = (C[0] == 0) & (C[1] == 0) & (C[2] == 0)
    for d in fh.DIRECTIONS:
        if not w.sends(d):
            continue
        m = (C[0] == d[0]) & (C[1] == d[1]) & (C[2] == d[2])
        for a in range(3):
            if d[a]:
                m &= D[a] <= w.thickness(d, a)
        take |= m
    take &= E[0] & E[1] & E[2]
    out = np.full(shape, fill, dtype=G.dtype)
    out[take] = G[np.ix_(*[g % n[a] for a, g in enumerate(glob)])][take]
    return out


def run_case(name, gshape, specs, periodic, subdomains=1, method=None, extras=()):
    """specs: (dtype, layout, widths) per field."""
    dom = fh.Domain(gshape, comm, periodic=periodic, subdomains=subdomains,
                    devices=[lib.device] * subdomains if lib.gpu else None)
    G = [global_array(gshape, dt, f) for f, (dt, _, _) in enumerate(specs)]
    arrays = []  # per subdomain: (array, base, widths, fill)
    for sub in dom.subdomains:
        row = []
        for f, (dt, layout, widths) in enumerate(specs):
            w = fh.Widths(widths) if isinstance(widths, int) else widths
            fill = SENTINEL[dt]
            arr, base = lib.alloc(sub.shape(w), dt, fill, layout)
            lib.put(arr, sub.interior(w), G[f][sub.global_slices])
            row.append((arr, base, w, fill))
        arrays.append(row)
    before = [[lib.host(b) for (_, b, _, _) in row] for row in arrays]
    fields = [[fh.Field(a, w, name="f%d" % f) for f, (a, _, w, _) in enumerate(row)] for row in arrays]
    plan = fh.Plan(dom, fields if subdomains > 1 else fields[0], method=method,
                   priority_stream="no_priority" not in extras, graphs="no_graphs" not in extras,
                   fused="no_graphs" not in extras)
    v = plan.verify()
    check("%s: verify %r" % (name, v), v.ok and v.cells_checked > 0)
    if "start" in extras:
        plan.start()
        for _ in range(1000):
            if plan.test():
                break
        plan.finish()
    else:
        plan.exchange()
    lib.sync()

    def compare(tag):
        for s, sub in enumerate(dom.subdomains):
            for f, (arr, base, w, fill) in enumerate(arrays[s]):
                want = expected(G[f], sub, w, w_origin(w), sub.shape(w), dom.periodic, fill)
                got = lib.host(arr)
                ok = np.array_equal(got, want)
                check("%s%s: subdomain %d field %d (%s) differs at %d points" % (
                    name, tag, s, f, specs[f][1], int(np.sum(got != want))), ok)
                # Nothing outside the view was written.
                hb = lib.host(base)
                mask = np.ones(hb.shape, bool)
                view_mask(mask, specs[f][1])
                check("%s%s: memory around field %d changed" % (name, tag, f),
                      np.array_equal(hb[mask], before[s][f][mask]))
    compare("")
    if "regions" in extras:
        for s, sub in enumerate(dom.subdomains):
            w = arrays[s][0][2]
            cover = np.zeros(sub.shape(w), int)
            cover[plan.interior(s)] += 1
            for sl in plan.exterior(s):
                cover[sl] += 1
            want = np.zeros(sub.shape(w), int)
            want[sub.interior(w)] = 1
            check("%s: interior() + exterior() tile the interior once" % name, np.array_equal(cover, want))
    if "stats" in extras:
        st = plan.stats()
        got = sum(v["bytes"] for v in st["received"].values())
        halo = 0
        for s, sub in enumerate(dom.subdomains):
            for f, (arr, base, w, fill) in enumerate(arrays[s]):
                want = expected(G[f], sub, w, w_origin(w), sub.shape(w), dom.periodic, fill)
                inner = np.zeros(want.shape, bool)
                inner[sub.interior(w)] = True
                # Halo points that receive a value (compared by position, not value).
                probe = expected(np.ones(G[f].shape, np.int8), sub, w, w_origin(w), sub.shape(w), dom.periodic, 0)
                halo += int(np.sum((probe == 1) & ~inner)) * np.dtype(specs[f][0]).itemsize
        check("%s: stats received %d bytes, the halo holds %d (%s)" % (name, got, halo, st), got == halo)
        if method:
            check("%s: forced method %s in %s" % (name, method, st), set(st["sent"]) <= {method, "local"})
    plan.close()
    dom.close()


def w_origin(w):
    return tuple(w.side(a, -1) for a in range(3))


def view_mask(mask, layout):
    """Clears the points of `mask` (the base's shape) that the view covers."""
    if layout == "strided":
        mask[1:, ::2, 3::2] = False
    elif layout == "padded":
        sh = mask.shape
        mask[1:sh[0] - 1, :sh[1] - 1, 2:sh[2] - 3] = False
    else:
        mask[...] = False


def run_swap():
    dom = fh.Domain((9, 10, 11), comm, periodic=(True, False, True),
                    devices=[lib.device] if lib.gpu else None)
    sub = dom.subdomains[0]
    G0, G1 = global_array((9, 10, 11), "float64", 7), global_array((9, 10, 11), "float64", 8)
    u, _ = lib.alloc(sub.shape(1), "float64", -7.5)
    v, _ = lib.alloc(sub.shape(1), "float64", -7.5)
    lib.put(u, sub.interior(1), G0[sub.global_slices])
    lib.put(v, sub.interior(1), G1[sub.global_slices])
    field = fh.Field(u, 1, next=v)
    with fh.Plan(dom, [field]) as plan:
        plan.exchange()
        plan.swap()
        check("swap: Field.current is next", field.current is v and field.other is u)
        plan.exchange()
        lib.sync()
        w = fh.Widths(1)
        check("swap: the first array", np.array_equal(lib.host(u), expected(G0, sub, w, (1, 1, 1), sub.shape(1), dom.periodic, -7.5)))
        check("swap: the second array", np.array_equal(lib.host(v), expected(G1, sub, w, (1, 1, 1), sub.shape(1), dom.periodic, -7.5)))
        plan.swap()
        check("swap back", field.current is u)
    dom.close()


W = fh.Widths
cases = [
    ("prime 13x7x11, width 1, periodic", (13, 7, 11), [("float64", "C", 1)], True, 1, None, ("stats", "regions")),
    ("prime 5x17x3, width 1, not periodic", (5, 17, 3), [("float64", "C", 1)], False, 1, None, ("stats",)),
    ("two dtypes, C and Fortran order", (12, 9, 7), [("float64", "C", 1), ("int32", "F", 1)], (True, False, True), 1, None, ("stats",)),
    ("width 2 on a prime grid, mixed periodic", (11, 13, 10), [("float32", "C", 2)], (False, True, True), 1, None, ()),
    ("per-side widths", (10, 11, 12), [("float64", "C", W(minus=(1, 0, 2), plus=(2, 1, 0)))], True, 1, None, ("stats", "regions")),
    ("star stencil (faces only), width 2", (12, 12, 12), [("float64", "C", W(2).faces_only())], True, 1, None, ("stats",)),
    ("26-direction override", (10, 9, 13), [("float64", "C", W(1).set((1, 1, 0), 2).set((0, 0, -1), 0).set((-1, 1, 1), 0))], (True, True, False), 1, None, ("stats",)),
    ("no corners", (9, 9, 9), [("int32", "F", W(1).no_corners())], True, 1, None, ()),
    ("strided and padded views", (10, 7, 9), [("float64", "strided", 1), ("complex128", "padded", W(minus=(1, 2, 1), plus=(2, 1, 1)))], (True, False, True), 1, None, ("stats",)),
    ("two subdomains per rank", (14, 9, 8), [("float64", "C", 1), ("int32", "F", 1)], True, 2, None, ("regions",)),
    ("start / test / finish", (8, 11, 7), [("float64", "C", 1)], True, 1, None, ("start",)),
    ("forced staged method", (9, 8, 11), [("float64", "C", 1), ("uint8", "F", 1)], True, 1, "staged", ("stats",)),
    ("one point thin along an axis", (1, 12, 10), [("float64", "C", W(minus=(0, 1, 1), plus=(0, 1, 1)))], False, 1, None, ()),
]
if args.quick:
    cases = cases[:3] + cases[8:10]
if args.lib in ("cupy", "torch"):
    cases.append(("forced ipc method", (9, 8, 11), [("float64", "C", 1)], True, 1, "ipc" if size > 1 else "local", ("stats",)))
    cases.append(("no priority stream (the caller's stream)", (8, 8, 8), [("float32", "C", 1)], True, 1, None, ("no_priority",)))
    cases.append(("graphs off, separate launches", (9, 10, 8), [("float64", "F", 2), ("int32", "C", 1)], (True, False, True), 1, None, ("no_graphs",)))

for name, gshape, specs, periodic, nsub, method, extras in cases:
    try:
        run_case(name, gshape, specs, periodic, nsub, method, extras)
    except fh.HaloError as e:
        check("%s: raised %s" % (name, e), False)
run_swap()

bad = comm.gather(failures, root=0)
if rank == 0:
    wrong = ["rank %d: %s" % (r, f) for r, fs in enumerate(bad) for f in fs]
    print("halo_exchange: WRONG:\n  " + "\n  ".join(wrong) if wrong else
          "halo_exchange: correct on %d ranks (%s, %d cases)" % (size, args.lib, len(cases) + 1), flush=True)
sys.exit(1 if comm.allreduce(len(failures)) else 0)
