// The GPU backend (work in progress on this branch).
#include <ferry/model.hpp>

#include "halo/plan.hpp"
#include "sys/error.hpp"

namespace ferry::halo::detail {

bool device_ipc_possible(const Plan::Impl&) { return false; }

Method model_choice(i64 bytes, i64 block, bool same_node) {
  static const model::Model m = model::Model::from_environment();
  const auto d = m.choose(bytes, block, same_node ? model::Locality::other_gpu : model::Locality::other_node, false);
  return d.method == model::Method::pipelined ? Method::pipelined : Method::staged;
}

std::unique_ptr<Backend> make_device_backend(Plan::Impl&) {
  ferry::detail::fail(MPI_ERR_OTHER, "halo: the GPU backend is not built yet");
}

}  // namespace ferry::halo::detail
