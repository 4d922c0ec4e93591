// The exported RAVE, described once: a small typed graph of export-level ops that the TorchScript
// writer (export/torchscript) and the ONNX writer (export/onnx) each walk. It is built from the
// trained model (export/graph/describe.h), and holds everything the two files must agree on:
// the ops in the order they run, each with its weights (weight norm folded), the shape, rate and
// streaming delay of every value, the streaming state each op keeps, the latent's kind and
// tensors, the latencies and the nn~ methods. How an op becomes code (a matrix product or a
// convolution, FFTs or a Toeplitz product, int8 or float32 weights) is each writer's choice;
// what it computes is decided here.
//
// Streaming follows acids-ircam/cached_conv v2.5.0 (convs.py): a convolution's whole padding is
// taken from a per-batch-row cache of the previous call's last samples (CachedConv1d), a strided
// convolution first delays its input so that its right padding is a whole number of strides
// (stride_delay), a transposed convolution keeps its overlap for the next call
// (CachedConvTranspose1d), and branches that meet again are delayed to the slowest one
// (AlignBranches). The streaming output then equals the offline output of the input delayed by
// the sum of the right paddings, each at its own rate: Flow::delay carries that sum.
#pragma once

#include <torch/torch.h>

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "models/common/conv.h"
#include "models/rave/prior.h"
#include "models/rave/rational_resampler.h"
#include "models/rave/rave.h"

namespace rt::exporting::graph {

// What a value is, beside its numbers: (batch·rows, channels, steps).
struct Flow {
  int64_t channels = 0;
  int64_t hop = 1;    // audio samples per step
  int64_t rows = 1;   // tensor batch rows per batch slot (the PQMF folds channels into the batch)
  int64_t delay = 0;  // streaming only: delay behind the offline computation, in audio samples
};

// A 1-D convolution: a weight-normed layer (kernel folded), a PQMF bank, a waveform layer.
// Offline it pads pad_left/pad_right zeros; streaming it pads from its caches instead.
struct Conv {
  std::string key;  // state-dict prefix; the writers name its tensors and states after it
  models::WNConv1dOptions options{1, 1, 1};
  torch::Tensor kernel, bias;  // [out, in / groups, kernel]; bias may be undefined
  int64_t stride_delay = 0;  // streaming: input first delayed this many steps (state key.downsampling_delay)
  int64_t cache = 0;         // streaming: the previous call's last samples prepended (state key.cache)
};

// A transposed convolution (upsampling). Streaming: no padding; its last `overlap` output
// samples are added to the next call's first ones (state key.cache); the bias after, once.
struct ConvTranspose {
  std::string key;
  models::WNConvTranspose1dOptions options{1, 1, 1};
  torch::Tensor kernel, bias;  // [in, out, kernel]
  int64_t overlap = 0;         // streaming: kernel − stride
};

// Streaming only: the input delayed by `samples` of its steps (state key, cropped cache).
struct Delay {
  std::string key;
  int64_t samples = 0;
};

// An elementwise function of one value.
struct Activation {
  enum class Kind { kLeakyRelu, kSnake, kTanh };
  Kind kind = Kind::kTanh;
  double slope = 0.0;   // kLeakyRelu
  std::string key;      // kSnake: alpha's prefix
  torch::Tensor alpha;  // kSnake: x + 1/(α + 1e-9) · sin(α·x)², as models::SnakeImpl
};

// BatchNorm1d in evaluation: the running statistics.
struct BatchNorm {
  std::string key;
  torch::Tensor weight, bias, mean, var;
  double momentum = 0.1, eps = 1e-5;
};

// The sum of two values of the same flow.
struct Add {};

// A product of two halves: kAmplitude: x[:, :C/2] · sigmoid(x[:, C/2:]) (GeneratorV2's amplitude
// modulation); kTanhTimesModSigmoid: tanh(a) · mod_sigmoid(b) of two inputs (v1's synthesis).
struct Gate {
  enum class Kind { kAmplitude, kTanhTimesModSigmoid };
  Kind kind = Kind::kAmplitude;
};

// PQMF analysis (audio (B, C, T) → bands (B, C·M, T/M)) or synthesis (back): the channels folded
// into the batch, the bank's convolution, RAVE's reverse_half (odd bands negated at even steps
// of the offline time index, `sign_offset` band samples behind in a stream), unfolded.
struct Pqmf {
  bool synthesis = false;
  int64_t bands = 1, channels = 1;  // M; the audio's channels
  Flow folded;                      // the convolution's input
  Conv conv;                        // the bank (PqmfImpl's forward_conv / inverse_conv, as it is)
  int64_t sign_offset = 0;
};

// export --sr: RAVE's Resampler (models/rave/resampler.h) between the host's rate and the model's,
// an integer `ratio` apart, the channels folded into the batch. Down: a lowpass convolution
// strided by the ratio (audio (B, C, T) → (B, C, T / ratio)); up: its polyphase components, one
// output phase per channel, interleaved ((B, C, T) → (B, C, T · ratio)). Both padded as
// cached_conv's centred padding, from caches when streaming.
struct Resample {
  bool up = false;
  int64_t ratio = 1, channels = 1;
  Flow folded;  // the convolution's input
  Conv conv;
};

// blocks.NoiseGenerator(V2)'s synthesis from its network's output (the op's input): per-frame
// filters of `hop` taps (amp_to_impulse_response) applied to uniform noise (fft_convolve),
// scaled by the method's noise_scale.
struct Noise {
  std::string key;
  int64_t hop = 0, data_size = 0, bins = 0;
};

// blocks.GRU (hybrid.gin), offline only: aten's GRU over the frames from a zero state.
struct Gru {
  std::string key;
  int64_t layers = 0, hidden = 0;
  std::vector<std::pair<std::string, torch::Tensor>> params;  // weight_ih_l0, weight_hh_l0, bias_ih_l0, …
};

using OpKind =
    std::variant<Conv, ConvTranspose, Delay, Activation, BatchNorm, Add, Gate, Pqmf, Noise, Gru, Resample>;

struct Op {
  OpKind kind;
  std::vector<int> inputs;  // value ids of the section
  int output = 0;
};

// A chain of ops from one input value (id 0) to one output value, the flows of its values by id.
struct Section {
  std::vector<Op> ops;
  std::vector<Flow> values;
  int output = 0;
  const Flow& out() const { return values.at(static_cast<size_t>(output)); }
};

// The latent between encoder and decoder (model.encoder): what encode returns and decode takes.
struct Latent {
  rave::EncoderKind kind = rave::EncoderKind::kVariational;
  int64_t full = 0;                      // the model's latent_size
  int64_t exported = 0;                  // exported_latent_size
  int64_t noise_augmentation = 0;        // standard normal channels decode appends (wasserstein, discrete)
  torch::Tensor pca, mean, fidelity;     // the checkpoint's latent_pca, latent_mean, fidelity buffers
  std::vector<torch::Tensor> codebooks;  // discrete: [K, D] per quantizer
  int64_t codebook_size = 0;
};

// RAVE's _mel_encode front end (model.input_mode = mel): torchaudio's MelSpectrogram.
struct Mel {
  torch::Tensor window, filters;  // the STFT window; the HTK filter bank [bins, n_mels]
  int64_t n_fft = 0, hop = 0, n_mels = 0;
};

// One nn~ method: [in channels, in ratio, out channels, out ratio] and the labels nn~ shows.
struct NnMethod {
  std::string name;
  int64_t in_channels = 1, in_ratio = 1, out_channels = 1, out_ratio = 1;
  std::string input_label, output_label;  // "(signal) Channel" → "(signal) Channel 1", …
};

// The prior (export --prior): a trained VariationalPrior (models/rave/prior.h) drawn one latent
// frame per input frame, as RAVE's TraceModel (acids-ircam/RAVE v2.3.1 scripts/export.py): the
// causal convolutions run on caches of the frames before (each conv's `cache`: (kernel − 1) ·
// dilation frames), the last frame drawn is the next step's input, and the staggered dimensions
// are realigned through a cache of latent_size − 1 frames.
struct Prior {
  int64_t latent_size = 0, resolution = 0;
  Conv pre;  // grouped causal conv, LeakyReLU 0.2 after
  struct Block {
    Conv dconv, rconv, sconv;  // dilated causal conv to the gate's halves; 1×1 residual and skip
  };
  std::vector<Block> blocks;
  Conv post, logits;  // 1×1 convs on the skip sum, LeakyReLU 0.2 between; logits grouped by dimension
  int64_t ratio = 0;  // audio samples per frame: the method's in and out ratio
};

// export --sr at a rate that is no integer multiple of the model's (48000 for a 44100 Hz model):
// the rational converter (models/rave/rational_resampler.h) down before the model and up after
// it. A latent frame would span a fractional number of host samples, so only forward is an nn~
// method; encode and decode run inside it at the model's rate. Streaming, forward takes blocks of
// any size: the host's audio goes down as whole converter cycles allow, the model runs on whole
// latent frames, the output comes back up and leaves from a queue primed with `host_delay`
// zeros, the most the three stages can hold back, so that every call returns as many samples as
// it was given. The model's input is primed with `model_delay` zeros so that its latency comes to
// whole cycles of the up converter: forward's latency is then a whole number of host samples.
struct RationalRate {
  rave::RationalResampling down, up;  // host → model, model → host
  int64_t model_delay = 0, host_delay = 0;
  int64_t latency = 0;  // forward's, host samples: host_delay + (model latency + model_delay) · L / M
};

struct Rave {
  bool streaming = false;
  // ratio: host-rate audio samples per latent frame (model-rate with a rational --sr, whose frames
  // span no whole number of host samples)
  int64_t channels = 0, ratio = 0;
  int64_t host_rate = 0, model_rate = 0;  // export --sr: the file's rate and the model's (equal without)
  // decode's and forward's output channels (RAVE's export --channels): more than the model's
  // decode the latent that many times over (each copy its own random draws) and stack the copies'
  // channels, fewer keep the first ones. The model's channels by default.
  int64_t output_channels = 0;
  Latent latent;
  std::optional<Mel> mel;
  Section analysis;                   // audio → bands (no ops with one band; first the resampler with --sr)
  Section encoder;                    // bands (or mel features) → the encoder's raw output
  Section decoder;                    // latent (+ noise channels) → bands
  std::optional<Section> synthesis;   // bands → audio; none with a raw decoder (model.output_mode = raw)
  std::optional<Section> upsampling;  // export --sr: model-rate audio → host-rate audio
  int64_t encode_latency = 0, decode_latency = 0;  // streaming delays, audio samples
  std::vector<NnMethod> methods;                   // encode, decode, forward (and prior)
  std::optional<Prior> prior;                      // export --prior
  std::optional<RationalRate> rational;            // export --sr, a rational ratio
  // Model tensors with no place in the files, by reason (the discriminator, flags).
  std::map<std::string, std::vector<std::string>> dropped;
  // Host samples; with a rational --sr, encode_latency and decode_latency are the model's own.
  int64_t forward_latency() const { return rational ? rational->latency : encode_latency + decode_latency; }
};

}  // namespace rt::exporting::graph
