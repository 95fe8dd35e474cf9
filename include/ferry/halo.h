/* ferry/halo.h — the C API of Ferry's halo exchange (ferry/halo.hpp is the C++ one; read its
 * header comment for what widths, origins and strides mean).
 *
 * Every function returns MPI_SUCCESS or an MPI error class and leaves a message for
 * ferry_error_string() (ferry/ferry.h); no exception crosses into C. Creating and freeing domains
 * and plans are collective over the domain's communicator, as are the exchanges (every rank calls
 * them the same number of times). */
#ifndef FERRY_HALO_H
#define FERRY_HALO_H

#include <mpi.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ferry_halo_domain_s* ferry_halo_domain;
typedef struct ferry_halo_plan_s* ferry_halo_plan;

enum { FERRY_HALO_X_FASTEST = 0, FERRY_HALO_Z_FASTEST = 1 };
enum { FERRY_HALO_TRIVIAL = 0, FERRY_HALO_RANDOM = 1, FERRY_HALO_NODE_AWARE = 2 };
enum {
  FERRY_HALO_AUTO = -1, /* Ferry's model picks */
  FERRY_HALO_LOCAL = 0,
  FERRY_HALO_PEER = 1,
  FERRY_HALO_IPC = 2,
  FERRY_HALO_STAGED = 3,
  FERRY_HALO_PIPELINED = 4,
  FERRY_HALO_MPI = 5
};

/* One array of one subdomain. Widths: minus[a] / plus[a] per axis side; dir_width[k] overrides
 * direction k = (x+1) + 3(y+1) + 9(z+1): -1 keeps the axis form, 0 skips it, w > 0 makes the
 * region w thick along each of its non-zero axes. */
typedef struct ferry_halo_field {
  void* data;
  void* data_next; /* NULL, or the second array for ferry_halo_swap */
  long long elem_bytes;
  long long alloc[3];
  long long origin[3];
  long long strides[3]; /* bytes */
  int minus[3];
  int plus[3];
  int dir_width[27];
} ferry_halo_field;

/* Zeroes the field and sets every dir_width to -1. */
void ferry_halo_field_init(ferry_halo_field* field);
/* A dense field of `extent` interior points with `width` on every side (all 26 directions);
 * order FERRY_HALO_X_FASTEST or FERRY_HALO_Z_FASTEST. */
int ferry_halo_field_dense(ferry_halo_field* field, void* data, long long elem_bytes,
                           const long long extent[3], int width, int order);

typedef struct ferry_halo_domain_options {
  int periodic[3];
  int subdomains;     /* on this rank (default 1) */
  const int* devices; /* NULL, or the GPU of each subdomain */
  long long grid[3];  /* 0: partition by prime factors */
  int placement;      /* FERRY_HALO_NODE_AWARE by default */
  unsigned long long seed;
} ferry_halo_domain_options;
void ferry_halo_domain_options_init(ferry_halo_domain_options* options);

int ferry_halo_domain_create(MPI_Comm comm, const long long global[3],
                             const ferry_halo_domain_options* options /* NULL: defaults */,
                             ferry_halo_domain* domain);
int ferry_halo_domain_free(ferry_halo_domain* domain);
int ferry_halo_domain_subdomains(ferry_halo_domain domain, int* count);
/* Subdomain i of this rank: global offset of its first interior point, interior extent, GPU. */
int ferry_halo_domain_subdomain(ferry_halo_domain domain, int i, long long offset[3],
                                long long extent[3], int* device);

typedef struct ferry_halo_options {
  int method; /* FERRY_HALO_AUTO or a method to force */
  int graphs;
  int fused;
  long long split_bytes;
  int progress_thread;
} ferry_halo_options;
void ferry_halo_options_init(ferry_halo_options* options);

/* fields[s * nfields + f]: field f of local subdomain s (nsub must be the rank's subdomains). */
int ferry_halo_plan_create(ferry_halo_domain domain, int nsub, int nfields,
                           const ferry_halo_field* fields, const ferry_halo_options* options,
                           ferry_halo_plan* plan);
int ferry_halo_plan_free(ferry_halo_plan* plan);
int ferry_halo_exchange(ferry_halo_plan plan);
int ferry_halo_start(ferry_halo_plan plan, void* stream /* cudaStream_t or NULL */);
int ferry_halo_finish(ferry_halo_plan plan, void* stream);
int ferry_halo_test(ferry_halo_plan plan, int* done);
int ferry_halo_swap(ferry_halo_plan plan);
/* Collective: fills, exchanges, checks every halo cell, restores; *bad_cells over all ranks. */
int ferry_halo_verify(ferry_halo_plan plan, long long* bad_cells);
/* Methods, bytes and messages per method, NUL-terminated and truncated to len bytes. */
int ferry_halo_describe(ferry_halo_plan plan, char* buf, int len);

#ifdef __cplusplus
}
#endif

#endif /* FERRY_HALO_H */
