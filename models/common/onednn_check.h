// A one-time check of oneDNN's float32 convolution gradients against ATen's own kernels.
//
// Debian 13's LibTorch 2.6.0 (oneDNN 3.7.2), on an AVX-512 CPU, returns wrong input gradients
// from float32 conv1d/conv2d backward when the stride is 1 and the channel counts are small
// (4 or 8 channels: off by 40–80 % of the gradient's largest magnitude, sometimes NaN), while the
// forward pass and the weight gradients are right. RAVE's small configurations hit exactly this
// (the golden test's tiny v2 goes to NaN within a few steps). Measured with python3-torch 2.6 on
// the same machine: torch.backends.mkldnn.flags(enabled=False) gives the correct values.
// LibTorch 1.13.1 (oneDNN 2.x) passes the check.
//
// Rather than keying on a version, every process that builds a convolution module runs the
// affected shapes once through oneDNN in float32 and through ATen's native kernels in float64,
// and turns oneDNN off (at::globalContext().setUserEnabledMkldnn(false)) with a warning on
// stderr when they disagree. Results with oneDNN on are kept where it is right.
#pragma once

#include <string>

namespace rt::models {

struct OneDnnConvolutionCheck {
  bool ran = false;          // oneDNN was available and enabled, so it was checked
  double max_rel_error = 0;  // largest |oneDNN − reference| / max|reference| over all probes
  bool disabled = false;     // the check turned oneDNN off for this process
  std::string worst;         // which probe and which tensor gave max_rel_error
};

// Largest relative error of oneDNN's float32 convolution (output, input gradient, weight
// gradient) against the float64 native kernels, over the probe shapes. No side effects beyond
// restoring the oneDNN flag; consumes no random numbers. ran = false when oneDNN is unavailable
// or disabled.
OneDnnConvolutionCheck measure_onednn_convolutions();

// Runs measure_onednn_convolutions() once per process (thread-safe) and disables oneDNN when its
// error exceeds 1e-3; later calls return the first result. Called by every convolution module's
// constructor (models/common/conv.cpp).
const OneDnnConvolutionCheck& ensure_correct_cpu_convolutions();

}  // namespace rt::models
