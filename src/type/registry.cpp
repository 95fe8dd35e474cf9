// The committed-type cache. Readers (every pack, every intercepted MPI call) take a shared lock
// and one hash probe; commit and free take the exclusive lock.
#include <ferry/registry.hpp>

#include <mutex>
#include <shared_mutex>
#include <unordered_map>

#include "sys/error.hpp"
#include "type/translate.hpp"

namespace ferry {

namespace {

struct Registry {
  std::shared_mutex mutex;
  std::unordered_map<MPI_Datatype, std::shared_ptr<const Type>> types;
};

Registry& registry() {
  static Registry* r = new Registry();  // never destroyed: usable from atexit and MPI_Finalize
  return *r;
}

}  // namespace

namespace detail {
bool is_predefined(MPI_Datatype t) {
  int ni, na, nd, combiner;
  if (MPI_Type_get_envelope(t, &ni, &na, &nd, &combiner) != MPI_SUCCESS) return false;
  return combiner == MPI_COMBINER_NAMED || combiner == MPI_COMBINER_F90_REAL ||
         combiner == MPI_COMBINER_F90_COMPLEX || combiner == MPI_COMBINER_F90_INTEGER;
}
}  // namespace detail

std::shared_ptr<const Type> commit(MPI_Datatype datatype) {
  if (datatype == MPI_DATATYPE_NULL)
    detail::fail(MPI_ERR_TYPE, "invalid datatype: MPI_DATATYPE_NULL");
  Registry& r = registry();
  {
    // A handle MPI recycled after MPI_Type_free must not keep its old translation if the new
    // one fails.
    std::unique_lock lock(r.mutex);
    r.types.erase(datatype);
  }
  auto type = std::make_shared<const Type>(translate(datatype));
  std::unique_lock lock(r.mutex);
  r.types[datatype] = type;
  return type;
}

void release(MPI_Datatype datatype) {
  if (datatype == MPI_DATATYPE_NULL)
    detail::fail(MPI_ERR_TYPE, "invalid datatype: MPI_DATATYPE_NULL");
  Registry& r = registry();
  std::unique_lock lock(r.mutex);
  if (r.types.erase(datatype) == 0)
    detail::fail(MPI_ERR_TYPE, "datatype was not committed with Ferry (or was already freed)");
}

std::shared_ptr<const Type> lookup(MPI_Datatype datatype) {
  if (datatype == MPI_DATATYPE_NULL)
    detail::fail(MPI_ERR_TYPE, "invalid datatype: MPI_DATATYPE_NULL");
  Registry& r = registry();
  {
    std::shared_lock lock(r.mutex);
    auto it = r.types.find(datatype);
    if (it != r.types.end()) return it->second;
  }
  if (!detail::is_predefined(datatype))
    detail::fail(MPI_ERR_TYPE,
                 "datatype is not committed (commit it with MPI_Type_commit under the interposer, "
                 "or ferry_type_commit) or was freed");
  return commit(datatype);
}

}  // namespace ferry
