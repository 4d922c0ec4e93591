// The description of export/graph/graph.h built from a trained RaveModel: its module tree walked
// once, each block's options and tensors deciding the ops, so that neither file can drift from
// the model it comes from. Every tensor of the model is used or dropped with a reason
// (export/graph/tensor_ledger.h), else rt::Error names the ones left.
#pragma once

#include "export/graph/export_options.h"
#include "export/graph/graph.h"

namespace rt::exporting::graph {

// export --channels' largest value (as many as a database may hold).
inline constexpr int64_t kMaxExportChannels = 256;

// Throws rt::Error naming --channels when `channels` (decode's and forward's output channels) is
// outside 1 … kMaxExportChannels.
void check_output_channels(int64_t channels);

// How many copies of the latent decode runs to make `output_channels` from a model of `channels`
// (export --channels): 1 unless more channels than the model's are asked for.
int64_t decoded_copies(int64_t channels, int64_t output_channels);

struct DescribeOptions {
  bool streaming = false;
  int64_t latent_size = 0;  // exported latent dimensions (variational; 0 = all)
  int64_t channels = 0;     // decode's and forward's output channels (export --channels); 0 = the model's
  // export --sr: the host's rate, an integer multiple of the model's (RAVE's Resampler inside); 0 =
  // the model's.
  int64_t host_rate = 0;
};

// Throws rt::Error naming what cannot be exported (check_exportable, a module with no op, a GRU
// or AdaIN's learnt statistics where they cannot be carried), before anything is written.
Rave describe_rave(rave::RaveModelImpl& model, const DescribeOptions& options);

// Adds a trained prior to `r` (export --prior): r.prior and nn~'s `prior` method (one temperature
// signal in, the prior's latent_size latent signals out, both at the latent's rate). Throws
// rt::Error when the prior models more dimensions than the RAVE's latent holds.
void add_prior(Rave& r, rave::VariationalPriorImpl& prior);

}  // namespace rt::exporting::graph
