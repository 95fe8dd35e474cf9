"""Prints, from each rank, whether the interposer is active and the LD_PRELOAD it runs with."""
import os

import ferry
from mpi4py import MPI

print("rank %d: loaded=%s LD_PRELOAD=%s FERRY_TEST_MARK=%s" % (
    MPI.COMM_WORLD.Get_rank(), ferry.loaded(), os.environ.get("LD_PRELOAD"),
    os.environ.get("FERRY_TEST_MARK")), flush=True)
