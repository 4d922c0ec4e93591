// What a training run on a GPU needs besides the model: the device a `train.device` value names
// (RAVE's `--gpu N` writes `cuda:N`), the CUDA math settings RAVE's train.py makes, and the
// message of an out-of-memory failure.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "config/run_keys.h"
#include "training/schedule_phase.h"

namespace rt {

// The device `requested` (a train.device value: auto, cpu, cuda, cuda:N) names for a process at
// `local_rank` of its machine. cuda: the rank's own GPU, LOCAL_RANK modulo the GPUs this process
// sees (one GPU per local rank, as torchrun lays jobs out; NCCL refuses two ranks on one GPU).
// cuda:N: GPU N, for a one-process run only (`distributed`: a data-parallel job gives each rank
// LOCAL_RANK's GPU). auto: cuda when a GPU is usable, else cpu.
// Throws rt::Error naming the value when the GPU it names is not there.
torch::Device resolve_device(const std::string& requested, int local_rank, bool distributed);

// The GPU index in a `cuda:N` value, or nullopt for any other value.
std::optional<int> cuda_index_of(const std::string& device);

// RAVE's train.py: torch.set_float32_matmul_precision('high') (float32 matmuls and
// convolutions may use TF32 tensor cores) and torch.backends.cudnn.benchmark = True (cuDNN times
// its algorithms for each new input shape and keeps the fastest).
struct CudaMathSettings {
  bool tf32 = true;             // train.tf32: 'high'; false: 'highest' (full float32)
  bool cudnn_benchmark = true;  // train.cudnn_benchmark
};
CudaMathSettings cuda_math_settings(const RunKeys& keys);
// Sets them in ATen's global context (what the Python calls set). Called for CUDA runs only:
// on the CPU, 'high' would let oneDNN compute float32 matmuls in bfloat16 in LibTorch 2.x.
void apply_cuda_math_settings(const CudaMathSettings& settings);

// Where a step failed for lack of device memory, and what to try: the step, the training phase
// (forward, backward, ...) the allocation failed in, RAVE's training phase (phase 2 adds the
// discriminator and its optimizer: RAVE issue #59), the allocator's own message (its first
// line) and the remedies. `phase_1_duration` < 0: not a RAVE run. `snapshot` names the memory
// snapshot written for it ("" when none was recorded).
struct OutOfMemoryContext {
  int64_t step = 0;
  std::string step_phase;  // "" when the failure happened outside any phase
  int64_t phase_1_duration = -1;
  int64_t batch = 0;
  std::string device;
  std::string snapshot;
};
std::string out_of_memory_message(const std::string& allocator_message, const OutOfMemoryContext& context);
// The context of a step that ran out of memory: the step, the phase it was in (training/phases.h),
// RAVE's phase 1 length (the start of its second schedule phase), the batch, the device, and
// `snapshot` (the memory snapshot's path).
OutOfMemoryContext out_of_memory_context(const RunKeys& keys, const std::vector<SchedulePhase>& phases,
                                         int64_t step, const torch::Device& device, std::string snapshot);

}  // namespace rt
