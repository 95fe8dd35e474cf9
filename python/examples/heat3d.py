#!/usr/bin/env python3
"""A 3-D heat equation over N ranks with ferry.halo, checked bit for bit against one rank.

    ferry-run mpiexec -n 4 python python/examples/heat3d.py [--n 48 40 36] [--steps 100]
                                                            [--lib auto|numpy|cupy] [--overlap]

du/dt = alpha * laplacian(u) on a global grid (periodic along the last two axes, u = 0 outside
along the first), explicit Euler with the 7-point stencil: a star stencil, so the plan sends faces
only (Widths(1).faces_only()). The arrays are CuPy where a GPU and CuPy are present (--lib auto),
NumPy otherwise. Double buffered with Plan.swap(): the plan exchanges the array read next without
re-planning. --overlap updates the interior (Plan.interior()) between start() and finish(), then
the exterior (Plan.exterior()).

Check: rank 0 also runs the whole grid alone, with halos filled by plain slicing (no ferry), the
same arithmetic in the same order, and compares every point with the gathered N-rank result: any
difference is a wrong halo. Rank 0 prints "heat3d: correct on N ranks (...)" and the exit status
is 1 on a difference. plan.verify() checks every halo cell once before the run.
"""
import argparse
import sys
import time

from mpi4py import MPI

import ferry.halo as fh


def pick_lib(name, comm):
    if name in ("auto", "cupy"):
        try:
            import cupy
            if cupy.cuda.runtime.getDeviceCount() > 0:
                local = comm.Split_type(MPI.COMM_TYPE_SHARED, key=comm.Get_rank())
                dev = local.Get_rank() % cupy.cuda.runtime.getDeviceCount()
                local.Free()
                cupy.cuda.Device(dev).use()
                return cupy, "cupy", dev
        except Exception as e:  # noqa: BLE001  (no CuPy, no driver, no GPU: the host will do)
            if name == "cupy":
                raise SystemExit("heat3d: --lib cupy: %s" % e)
    import numpy
    return numpy, "numpy", None


def shifted(box, axis, d):
    return tuple(slice(s.start + d, s.stop + d) if a == axis else s for a, s in enumerate(box))


def update(u, v, box, r):
    """v[box] = u[box] + r * (sum of the 6 neighbours - 6 u), in one fixed order of operations."""
    c = u[box]
    acc = u[shifted(box, 0, -1)] + u[shifted(box, 0, 1)]
    acc = acc + u[shifted(box, 1, -1)]
    acc = acc + u[shifted(box, 1, 1)]
    acc = acc + u[shifted(box, 2, -1)]
    acc = acc + u[shifted(box, 2, 1)]
    v[box] = c + r * (acc - 6.0 * c)


def fill_halo_alone(u, periodic):
    """One rank's halo of the whole grid, by slicing: periodic copies or zeros, axis by axis."""
    for a in range(3):
        lo, hi, first, last = [[slice(None)] * 3 for _ in range(4)]
        lo[a], hi[a], first[a], last[a] = 0, -1, 1, -2
        if periodic[a]:
            u[tuple(lo)] = u[tuple(last)]
            u[tuple(hi)] = u[tuple(first)]
        else:
            u[tuple(lo)] = 0
            u[tuple(hi)] = 0


def initial(xp, shape):
    """A smooth bump plus a checkerboard of small values, the same on every rank."""
    z, y, x = xp.meshgrid(*[xp.arange(n, dtype=xp.float64) for n in shape], indexing="ij")
    cz, cy, cx = [n / 2.0 for n in shape]
    bump = xp.exp(-(((z - cz) / shape[0]) ** 2 + ((y - cy) / shape[1]) ** 2 + ((x - cx) / shape[2]) ** 2) * 20.0)
    return bump + 1e-3 * ((z + y + x) % 2)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    ap.add_argument("--n", type=int, nargs=3, default=[48, 40, 36], help="global grid points per axis")
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--lib", default="auto", choices=["auto", "numpy", "cupy"])
    ap.add_argument("--overlap", action="store_true", help="interior during the exchange")
    args = ap.parse_args()
    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    xp, libname, dev = pick_lib(args.lib, comm)
    shape, periodic, r = tuple(args.n), (False, True, True), 1.0 / 8.0

    dom = fh.Domain(shape, comm, periodic=periodic, devices=None if dev is None else [dev])
    sub = dom.subdomains[0]
    widths = fh.Widths(1).faces_only()
    u = xp.zeros(sub.shape(widths))
    v = xp.zeros(sub.shape(widths))
    inner = sub.interior(widths)
    u[inner] = initial(xp, shape)[sub.global_slices]
    field = fh.Field(u, widths, next=v)
    plan = fh.Plan(dom, [field])
    check = plan.verify()
    if not check.ok:
        if rank == 0:
            print("heat3d: verify() found %d bad halo cells:\n%s" % (check.bad_cells, check.first_errors))
        return 1
    if rank == 0:
        print("heat3d: %s on %d ranks, grid %s split %s, %d steps%s" % (
            libname, size, shape, dom.grid, args.steps, ", overlapped" if args.overlap else ""), flush=True)
        print(plan.describe(), end="", flush=True)

    comm.Barrier()
    t0 = time.perf_counter()
    for _ in range(args.steps):
        src, dst = field.current, field.other
        if args.overlap:
            plan.start()
            update(src, dst, plan.interior(), r)
            plan.finish()
            for box in plan.exterior():
                update(src, dst, box, r)
        else:
            plan.exchange()
            update(src, dst, inner, r)
        plan.swap()  # the plan exchanges dst next
    if libname == "cupy":
        xp.cuda.get_current_stream().synchronize()
    seconds = time.perf_counter() - t0
    mine = field.current[inner]
    mine = xp.asnumpy(mine) if libname == "cupy" else mine.copy()
    parts = comm.gather((sub.global_slices, mine), root=0)
    plan.close()
    dom.close()

    ok = True
    if rank == 0:
        alone = xp.zeros(tuple(n + 2 for n in shape))
        other = xp.zeros_like(alone)
        whole = tuple(slice(1, n + 1) for n in shape)
        alone[whole] = initial(xp, shape)
        for _ in range(args.steps):
            fill_halo_alone(alone, periodic)
            update(alone, other, whole, r)
            alone, other = other, alone
        ref = xp.asnumpy(alone[whole]) if libname == "cupy" else alone[whole]
        import numpy as np
        got = np.empty(shape)
        for sl, part in parts:
            got[sl] = part
        diff = int(np.sum(got != ref))
        ok = diff == 0
        if ok:
            print("heat3d: correct on %d ranks (%s, bit for bit against one rank; sum %.12g, %.3f ms per step)"
                  % (size, libname, float(got.sum()), 1e3 * seconds / args.steps))
        else:
            print("heat3d: WRONG: %d of %d points differ from the one-rank run (max %.3g)"
                  % (diff, got.size, float(np.max(np.abs(got - ref)))))
    return 0 if comm.bcast(ok, root=0) else 1


if __name__ == "__main__":
    sys.exit(main())
