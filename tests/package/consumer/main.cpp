// A program outside the Ferry tree: packs a vector through the installed library.
#include <ferry/ferry.h>

#include <cstdio>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Datatype t;
  MPI_Type_vector(4, 1, 2, MPI_INT, &t);
  MPI_Type_commit(&t);
  int in[8] = {0, 1, 2, 3, 4, 5, 6, 7}, out[4] = {0, 0, 0, 0}, pos = 0;
  int rc = ferry_type_commit(t);
  if (rc == MPI_SUCCESS) rc = ferry_pack(in, 1, t, out, sizeof out, &pos);
  bool ok = rc == MPI_SUCCESS && pos == 16 && out[0] == 0 && out[1] == 2 && out[2] == 4 &&
            out[3] == 6;
  std::printf("consumer: %s\n", ok ? "packed through the installed Ferry" : ferry_error_string());
  ferry_type_free(t);
  MPI_Type_free(&t);
  MPI_Finalize();
  return ok ? 0 : 1;
}
