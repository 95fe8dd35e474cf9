/* ferry/ferry.h — Ferry's C API: MPI-style datatype commit, pack and unpack.
 *
 * Every function returns MPI_SUCCESS or the MPI error class MPI would return for the same input,
 * and leaves a message for ferry_error_string(). Derived datatypes must be committed through
 * ferry_type_commit() (the interposer does this inside MPI_Type_commit) before use and released
 * with ferry_type_free(); a type Ferry has not seen committed, or has seen freed, is MPI_ERR_TYPE.
 * Named types need no commit. All functions are thread-safe; ferry_type_commit (and the first use
 * of a named type) call MPI_Type_get_envelope/contents, so calling them from several threads at
 * once needs MPI_THREAD_MULTIPLE. */
#ifndef FERRY_FERRY_H
#define FERRY_FERRY_H

#include <mpi.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Translates and caches `datatype` (MPI_Type_commit must have been called on it, or be called
 * right after; Ferry reads the type through MPI_Type_get_contents). Cost: a few microseconds per
 * level of nesting; later lookups are a hash-map probe. */
int ferry_type_commit(MPI_Datatype datatype);
/* Forgets the cached translation (call before MPI_Type_free). */
int ferry_type_free(MPI_Datatype datatype);

/* Same arguments and semantics as MPI_Pack_size / MPI_Pack / MPI_Unpack, without the communicator
 * (Ferry packs the native representation). */
int ferry_pack_size(int incount, MPI_Datatype datatype, int* size);
int ferry_pack(const void* inbuf, int incount, MPI_Datatype datatype, void* outbuf, int outsize,
               int* position);
int ferry_unpack(const void* inbuf, int insize, int* position, void* outbuf, int outcount,
                 MPI_Datatype datatype);

/* Writes the canonical form of a committed type (as the demo prints it) into buf, NUL-terminated
 * and truncated to len bytes. */
int ferry_type_describe(MPI_Datatype datatype, char* buf, int len);

/* The message of the last error returned on this thread ("" if none). */
const char* ferry_error_string(void);

#ifdef __cplusplus
}
#endif

#endif /* FERRY_FERRY_H */
