// nn~'s `prior` method (export --prior), written from the description's prior
// (export/graph/graph.h, Prior) as RAVE's ScriptedRAVE.prior / TraceModel
// (acids-ircam/RAVE v2.3.1 scripts/export.py) computes it:
//
//   temperature  softplus(mean of the input block) / ln 2 (an input of 0 gives 1);
//   each frame   the prior's logits for the next frame from the frame drawn last (its causal
//                convolutions on caches of the frames before), divided by the temperature, one
//                bin drawn per dimension from their softmax, decoded (the bin's lower edge plus a
//                uniform dither, through the inverse normal CDF, clamped to ±4) and realigned
//                (DiagonalShift.inverse over a cache of latent_size − 1 frames);
//   output       (batch, latent_size, frames): the latent `decode` takes.
//
// Every batch row keeps its own state (up to kMaxBatch rows), where RAVE's keeps one frame for
// batch row 0 only and fails on a batch above 1. The state carries over between calls whether or
// not the file streams: the prior is a generator, and each call goes on where the last ended.
#pragma once

#include <torch/script.h>

#include "export/graph/graph.h"
#include "export/torchscript/script_writer.h"

namespace rt::exporting {

void define_prior_method(ScriptContext& ctx, torch::jit::Module& top, const graph::Prior& prior);

}  // namespace rt::exporting
