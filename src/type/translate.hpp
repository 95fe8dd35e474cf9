// type/translate.hpp — internals of MPI datatype translation shared with darray.cpp.
#pragma once

#include <ferry/type.hpp>

namespace ferry::detail {

// Predefined datatypes: the named ones and those of MPI_Type_create_f90_{real,complex,integer}.
// They need no commit and are never freed.
bool is_predefined(MPI_Datatype t);

// The IR of one dimension of a distributed array, built on `inner` (the faster dimensions or the
// old type). Follows MPI-4 §5.1.4: process coordinates are row-major whatever the storage order.
NodePtr darray_node(int size, int rank, int ndims, const int* gsizes, const int* distribs,
                    const int* dargs, const int* psizes, int order, NodePtr old, i64 old_extent);

}  // namespace ferry::detail
