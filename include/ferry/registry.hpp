// ferry/registry.hpp — the cache of committed datatypes shared by the C API and the interposer.
#pragma once

#include <ferry/type.hpp>

#include <memory>

namespace ferry {

// Translates and caches `datatype`. Throws Error(MPI_ERR_TYPE) for MPI_DATATYPE_NULL.
std::shared_ptr<const Type> commit(MPI_Datatype datatype);
// Drops the cached translation; MPI_ERR_TYPE if Ferry never saw it committed.
void release(MPI_Datatype datatype);
// The cached translation. Named types are translated on first use; a derived type that was not
// committed through Ferry (or was freed) is Error(MPI_ERR_TYPE).
std::shared_ptr<const Type> lookup(MPI_Datatype datatype);

}  // namespace ferry
