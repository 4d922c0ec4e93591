// util/torch_compat.h against the LibTorch it is built with: each shim must agree with what the
// library itself does.
#include "util/torch_compat.h"

#include <c10/core/impl/alloc_cpu.h>
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

namespace rt {
namespace {

TEST(TorchCompat, OptimizerStateKeyFindsTheStockOptimizersState) {
  torch::manual_seed(1);
  std::vector<torch::Tensor> params = {torch::randn({3}, torch::requires_grad()),
                                       torch::randn({2, 2}, torch::requires_grad())};
  torch::optim::Adam adam(params, torch::optim::AdamOptions(1e-2));
  for (auto& p : params) p.mutable_grad() = torch::ones_like(p);
  adam.step();
  ASSERT_EQ(adam.state().size(), params.size());
  for (const auto& p : params) {
    auto it = adam.state().find(compat::optimizer_state_key(p));
    ASSERT_NE(it, adam.state().end());
    // The state found is this parameter's: its moments have the parameter's shape.
    EXPECT_EQ(static_cast<torch::optim::AdamParamState&>(*it->second).exp_avg().sizes(), p.sizes());
  }
  // A different tensor with equal contents has another key.
  EXPECT_EQ(adam.state().count(compat::optimizer_state_key(params[0].detach().clone())), 0u);
}

// A compat::CpuAllocator subclass that counts its blocks; its deleter frees with c10's.
int g_live_blocks = 0;
void counting_free(void* p) {
  --g_live_blocks;
  c10::free_cpu(p);
}
class CountingAllocator final : public compat::CpuAllocator {
 protected:
  c10::DataPtr allocate_block(size_t nbytes) const override {
    ++g_live_blocks;
    void* p = c10::alloc_cpu(nbytes);
    return {p, p, &counting_free, c10::Device(c10::DeviceType::CPU)};
  }
};

// Instantiating CountingAllocator proves every pure virtual of this LibTorch's c10::Allocator
// is implemented (copy_data() since 2.3); the calls go through the base class's allocate().
TEST(TorchCompat, CpuAllocatorSubclassServesC10AllocateCalls) {
  CountingAllocator allocator;
  c10::Allocator& base = allocator;
  {
    c10::DataPtr a = base.allocate(16);
    c10::DataPtr b = base.allocate(64);
    EXPECT_EQ(g_live_blocks, 2);
    ASSERT_NE(a.get(), nullptr);
    std::memset(a.get(), 7, 16);
    EXPECT_EQ(static_cast<unsigned char*>(a.get())[15], 7);
    EXPECT_EQ(a.device(), c10::Device(c10::DeviceType::CPU));
  }
  EXPECT_EQ(g_live_blocks, 0);
}

}  // namespace
}  // namespace rt
