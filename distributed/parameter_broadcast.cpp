#include "distributed/parameter_broadcast.h"

#include <sstream>

namespace rt::dist {

void broadcast_parameters(Communicator& comm, torch::nn::Module& module) {
  if (comm.world_size() == 1) return;
  std::vector<torch::Tensor> tensors;
  std::ostringstream layout;
  for (const auto& item : module.named_parameters(/*recurse=*/true)) {
    layout << "p " << item.key() << " " << item.value().sizes() << " " << item.value().dtype() << "\n";
    tensors.push_back(item.value());
  }
  for (const auto& item : module.named_buffers(/*recurse=*/true)) {
    layout << "b " << item.key() << " " << item.value().sizes() << " " << item.value().dtype() << "\n";
    tensors.push_back(item.value());
  }
  check_same_on_all_ranks(comm, "model (parameter and buffer names, shapes, dtypes)", layout.str());
  comm.broadcast(tensors, 0);
}

}  // namespace rt::dist
