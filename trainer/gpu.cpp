#include "trainer/gpu.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>

#include "training/phases.h"
#include "util/error.h"

namespace rt {

std::optional<int> cuda_index_of(const std::string& device) {
  const std::string prefix = "cuda:";
  if (device.size() <= prefix.size() || device.compare(0, prefix.size(), prefix) != 0) return std::nullopt;
  const std::string digits = device.substr(prefix.size());
  if (digits.size() > 4 ||
      !std::all_of(digits.begin(), digits.end(), [](unsigned char c) { return std::isdigit(c); }))
    return std::nullopt;
  return std::stoi(digits);
}

torch::Device resolve_device(const std::string& requested, int local_rank, bool distributed) {
  const auto index = cuda_index_of(requested);
  if (index && distributed) {
    throw Error("train.device = '" + requested +
                "' names one GPU, but this is a data-parallel job: each rank takes the GPU of its LOCAL_RANK "
                "(use --device cuda, and CUDA_VISIBLE_DEVICES to choose the GPUs)");
  }
  const bool available = torch::cuda::is_available();
  if ((requested == "cuda" || index) && !available) {
    throw Error("train.device = '" + requested + "' but no CUDA device is available (this LibTorch " +
                (torch::cuda::device_count() > 0 ? "sees a GPU it cannot use" : "sees no GPU") +
                "); use --device cpu");
  }
  const int count = std::max<int>(1, static_cast<int>(torch::cuda::device_count()));
  if (index) {
    if (*index >= count) {
      const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
      throw Error("train.device = '" + requested + "': this process sees " + std::to_string(count) +
                  " GPU(s), cuda:0 to cuda:" + std::to_string(count - 1) +
                  (visible ? " (CUDA_VISIBLE_DEVICES=" + std::string(visible) + ")" : std::string()));
    }
    return torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(*index));
  }
  if (requested == "cuda" || (requested == "auto" && available)) {
    return torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(local_rank % count));
  }
  return torch::Device(torch::kCPU);
}

CudaMathSettings cuda_math_settings(const RunKeys& keys) {
  CudaMathSettings s;
  s.tf32 = keys.tf32;
  s.cudnn_benchmark = keys.cudnn_benchmark;
  return s;
}

void apply_cuda_math_settings(const CudaMathSettings& settings) {
  // torch.set_float32_matmul_precision (torch/__init__.py) and torch.backends.cudnn.benchmark
  // (torch/backends/cudnn/__init__.py) set exactly these.
  at::globalContext().setFloat32MatmulPrecision(settings.tf32 ? "high" : "highest");
  at::globalContext().setBenchmarkCuDNN(settings.cudnn_benchmark);
}

std::string out_of_memory_message(const std::string& allocator_message, const OutOfMemoryContext& c) {
  std::string m = "out of memory on " + c.device + " at step " + std::to_string(c.step);
  if (!c.step_phase.empty()) m += ", in the " + c.step_phase + " phase";
  const bool rave = c.phase_1_duration >= 0;
  const bool phase_2 = rave && c.step >= c.phase_1_duration;
  if (rave) {
    m += phase_2 ? ", RAVE phase 2 (adversarial: since step " + std::to_string(c.phase_1_duration) + ")"
                 : ", RAVE phase 1 (phase 2 starts at step " + std::to_string(c.phase_1_duration) + ")";
  }
  m += ", train.batch = " + std::to_string(c.batch) + ": " + first_line(allocator_message) + "\nTry:";
  if (phase_2) {
    m += "\n  - phase 2 adds the discriminator, its activations, gradients and Adam state to what phase 1 "
         "held (RAVE issue #59): a batch that fit phase 1 may not fit phase 2. Resume from the last "
         "checkpoint (--ckpt last) with a smaller batch";
  } else if (rave) {
    m +=
        "\n  - phase 2 (train.phase_1_duration) needs more memory than phase 1: the discriminator joins then";
  }
  m += "\n  - a smaller batch: --batch " + std::to_string(std::max<int64_t>(1, c.batch / 2)) +
       " (or shorter examples: --n_signal)";
  m += "\n  - PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True when much memory is reserved but not "
       "allocated (fragmentation; memory_profile.json shows both)";
  m += "\n  - another GPU with more memory (--gpu N), or fewer other processes on this one (nvidia-smi)";
  if (c.snapshot.empty()) {
    m += "\n  - --profiling.memory_snapshot_on_oom true: a memory snapshot of the failure, for "
         "https://pytorch.org/memory_viz";
  } else {
    m += "\nMemory snapshot: " + c.snapshot + " (open it at https://pytorch.org/memory_viz)";
  }
  return m;
}

OutOfMemoryContext out_of_memory_context(const RunKeys& keys, const std::vector<SchedulePhase>& phases,
                                         int64_t step, const torch::Device& device, std::string snapshot) {
  OutOfMemoryContext c;
  c.step = step;
  if (const auto phase = unwound_phase()) c.step_phase = phase_name(*phase);
  c.phase_1_duration = keys.family == "rave" && phases.size() > 1 ? phases[1].first_step : -1;
  c.batch = keys.batch;
  c.device = device.str();
  c.snapshot = std::move(snapshot);
  return c;
}

}  // namespace rt
