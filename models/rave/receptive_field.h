// RAVE's receptive field and its valid-signal crop (acids-ircam/RAVE 2.3.1 rave/core.py:
// get_rave_receptive_field, valid_signal_crop; rave/model.py training_step).
//
// RAVE measures, once per run, how many input samples left and right of an output sample
// influence it: the gradient of y[0, 0, N/2] with respect to a random input x of N samples
// (N = 2^15, doubled until both ends of x have zero gradient) has `left` non-zero entries in
// x's first half and `right` in its second. v2 and v3 (valid_signal_crop = True) then cut both
// multiband signals to the samples whose outputs saw no padding before the multiband spectral
// distance; the fullband distance is not cropped.
#pragma once

#include <torch/torch.h>

#include <cstdint>

namespace rt::rave {

struct RaveModelImpl;

struct ReceptiveField {
  int64_t left = 0, right = 0;
  bool empty() const { return left == 0 && right == 0; }
};

// get_rave_receptive_field on `model`, in eval mode with the encoder not frozen (RAVE runs it
// in the sanity validation, before phase 2). Draws its random input from a generator of its
// own, so torch's global generator is untouched; leaves no gradients and restores the model's
// training and warm-up state. Throws rt::Error if no N up to 2^24 covers the field.
ReceptiveField measure_receptive_field(RaveModelImpl& model);

// How many of `length` samples valid_signal_crop keeps of a signal with `dim` rows (bands ×
// channels): length − left // dim − ceil(right / dim), at least 0.
int64_t valid_signal_length(int64_t length, int64_t dim, ReceptiveField field);

// rave.core.valid_signal_crop on x (B, D, T) with D = x.size(1) (bands × channels):
// x[..., left // D:], then, when right > 0, x[..., :-right // D] in Python's arithmetic, which
// drops ceil(right / D) samples. A crop longer than the signal leaves 0 samples, as in Python.
torch::Tensor valid_signal_crop(const torch::Tensor& x, ReceptiveField field);

}  // namespace rt::rave
