// A tiny model trained by the tracing tests: Conv1d → ReLU → Linear → ReLU → Linear, SGD.
#pragma once

#include <torch/torch.h>

#include "profiling/trace/op_tracer.h"
#include "profiling/trace/schedule.h"

namespace rt::prof::testing {

struct TinyNetImpl : torch::nn::Module {
  TinyNetImpl()
      : conv(register_module("conv", torch::nn::Conv1d(torch::nn::Conv1dOptions(2, 4, 3).padding(1)))),
        fc1(register_module("fc1", torch::nn::Linear(4 * 16, 32))),
        fc2(register_module("fc2", torch::nn::Linear(32, 4))) {}
  torch::Tensor forward(torch::Tensor x) {
    {
      ModuleScope scope("conv");
      x = torch::relu(conv(x));
    }
    x = x.flatten(1);
    ModuleScope scope("fc");
    return fc2(torch::relu(fc1(x)));
  }
  torch::nn::Conv1d conv;
  torch::nn::Linear fc1, fc2;
};
TORCH_MODULE(TinyNet);

// One training step with trainer-style phase annotations.
inline void train_step(TinyNet& net, torch::optim::SGD& opt, const torch::Tensor& x, const torch::Tensor& y) {
  torch::Tensor loss;
  {
    ScopedAnnotation a("forward");
    loss = torch::mse_loss(net->forward(x), y);
  }
  {
    ScopedAnnotation a("backward");
    opt.zero_grad();
    loss.backward();
  }
  {
    ScopedAnnotation a("optimizer_step");
    opt.step();
  }
}

// The session tests' schedule: wait 1, warm up 1, record 2, twice; over 10 steps the windows
// record steps 2-3 and 6-7.
inline ProfilerSchedule two_window_schedule() {
  ProfilerSchedule s;
  s.wait = 1;
  s.warmup = 1;
  s.active = 2;
  s.repeat = 2;
  s.skip_first = 0;
  return s;
}

}  // namespace rt::prof::testing
