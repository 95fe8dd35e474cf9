/* A plain MPI program that knows nothing of Ferry: run under LD_PRELOAD=libferry-mpi.so, it must
 * behave exactly as without it (the test also checks that the interposer announced itself). */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size, ok = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Datatype col;
  MPI_Type_vector(4, 1, 3, MPI_DOUBLE, &col);
  MPI_Type_commit(&col);
  double a[12], b[4] = {0, 0, 0, 0};
  for (int i = 0; i < 12; ++i) a[i] = rank * 100 + i;
  int next = (rank + 1) % size, prev = (rank + size - 1) % size;
  MPI_Sendrecv(a, 1, col, next, 1, b, 4, MPI_DOUBLE, prev, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  for (int i = 0; i < 4; ++i) ok &= b[i] == prev * 100 + 3 * i;
  MPI_Type_free(&col);
  int all = 0;
  MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
  if (rank == 0) printf(all ? "mpi_plain: correct\n" : "mpi_plain: WRONG\n");
  MPI_Finalize();
  return all ? 0 : 1;
}
