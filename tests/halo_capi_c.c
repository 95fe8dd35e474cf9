/* The halo C API from C (the header must compile as C): a periodic grid, one double field of
 * width 2 without corners, exchanged and verified; returns the bad cells, or -1 on an error. */
#include <ferry/ferry.h>
#include <ferry/halo.h>
#include <stdlib.h>

long long halo_c_smoke(MPI_Comm comm) {
  const long long global[3] = {12, 11, 10};
  ferry_halo_domain_options o;
  ferry_halo_domain_options_init(&o);
  o.periodic[0] = o.periodic[1] = o.periodic[2] = 1;
  ferry_halo_domain dom = NULL;
  if (ferry_halo_domain_create(comm, global, &o, &dom) != MPI_SUCCESS) return -1;
  long long off[3], ext[3];
  int device = 0;
  ferry_halo_domain_subdomain(dom, 0, off, ext, &device);
  double* a = calloc((size_t)((ext[0] + 4) * (ext[1] + 4) * (ext[2] + 4)), sizeof(double));
  ferry_halo_field f;
  ferry_halo_field_dense(&f, a, (long long)sizeof(double), ext, 2, FERRY_HALO_X_FASTEST);
  for (int k = 0; k < 27; k += 26) f.dir_width[k] = 0; /* two corners off */
  ferry_halo_options po;
  ferry_halo_options_init(&po);
  ferry_halo_plan plan = NULL;
  long long bad = -1;
  if (ferry_halo_plan_create(dom, 1, 1, &f, &po, &plan) == MPI_SUCCESS) {
    if (ferry_halo_exchange(plan) == MPI_SUCCESS) ferry_halo_verify(plan, &bad);
    ferry_halo_plan_free(&plan);
  }
  ferry_halo_domain_free(&dom);
  free(a);
  return bad;
}
