#include "export/torchscript/prior_method.h"

#include <cmath>
#include <string>

namespace rt::exporting {
namespace {

// One step of a cached causal convolution of the 1-frame input `x`: the conv's cache (its last
// `cache` input frames, per batch row) prepended, then updated. Returns the output variable.
std::string step_conv(MethodWriter& w, const graph::Conv& c, const std::string& x, const std::string& out,
                      const std::string& indent) {
  const std::string weight = w.tensor(c.key + ".weight", c.kernel), bias = w.tensor(c.key + ".bias", c.bias);
  std::string input = x;
  if (c.cache > 0) {
    const std::string state = w.state(c.key + ".cache", 1, c.options.in_channels(), c.cache) + "[:b]";
    const std::string padded = out + "_in";
    w.line(indent + padded + " = torch.cat([" + state + ", " + x + "], -1)");
    w.line(indent + state + ".copy_(" + padded + "[:, :, -" + str(c.cache) + ":])");
    input = padded;
  }
  w.line(indent + out + " = torch.conv1d(" + input + ", " + weight + ", " + bias + ", [1], [0], [" +
         str(c.options.dilation()) + "], " + str(c.options.groups()) + ")");
  return out;
}

}  // namespace

void define_prior_method(ScriptContext& ctx, torch::jit::Module& top, const graph::Prior& p) {
  const int64_t d = p.latent_size, r = p.resolution;
  MethodWriter w(ctx, top);
  // The frame drawn last, one-hot: at first every dimension in the bin of 0 (RAVE's
  // quantized_normal.encode(zeros)).
  auto first = torch::zeros({kMaxBatch, d * r, 1});
  for (int64_t i = 0; i < d; ++i) first.select(1, i * r + r / 2).fill_(1.0);
  const std::string previous = w.tensor("prior.previous_step", first, /*is_buffer=*/true) + "[:b]";
  const std::string realign = d > 1 ? w.state("prior.diagonal_cache", 1, d, d - 1) + "[:b]" : "";

  w.line(
      "assert temp.dim() == 3 and temp.size(1) == 1, \"prior expects (batch, 1 temperature channel, time)\"");
  w.line("assert temp.size(0) <= " + str(kMaxBatch) + ", \"the prior's state holds " + str(kMaxBatch) +
         " batch slots\"");
  w.line("b = temp.size(0)");
  w.line("t = torch.softplus(temp.mean(-1, keepdim=True), 1.0, 20.0) / " + num(std::log(2.0)));
  w.line("out = torch.zeros([b, " + str(d) + ", temp.size(2)], dtype=temp.dtype, device=temp.device)");
  w.line("for i in range(temp.size(2)):");
  const std::string in = "    ";
  w.line(in + "x = " + previous);
  step_conv(w, p.pre, "x", "h", in);
  w.line(in + "h = torch.leaky_relu(h, 0.2)");
  for (size_t k = 0; k < p.blocks.size(); ++k) {
    const auto& block = p.blocks[k];
    step_conv(w, block.dconv, "h", "g", in);
    w.line(in + "halves = g.chunk(2, 1)");
    w.line(in + "g = torch.sigmoid(halves[0]) * torch.tanh(halves[1])");
    step_conv(w, block.rconv, "g", "res", in);
    w.line(in + "h = h + res");
    step_conv(w, block.sconv, "g", "s", in);
    w.line(in + (k == 0 ? "skip = s" : "skip = skip + s"));
  }
  step_conv(w, p.post, "skip", "y", in);
  w.line(in + "y = torch.leaky_relu(y, 0.2)");
  step_conv(w, p.logits, "y", "logits", in);
  // Channel dim·resolution + bin: (b, D·R, 1) → (b·D, R).
  w.line(in + "probs = torch.softmax((logits / t).reshape(b * " + str(d) + ", " + str(r) + "), -1)");
  w.line(in + "bins = torch.multinomial(probs, 1, True).reshape(b, " + str(d) + ", 1)");
  w.line(in + "one_hot = torch.zeros([b, " + str(d) + ", " + str(r) +
         "], dtype=temp.dtype, device=temp.device).scatter_(2, bins, 1.0)");
  w.line(in + previous + ".copy_(one_hot.reshape(b, " + str(d * r) + ", 1))");
  w.line(in + "v = (bins.to(temp.dtype) + torch.rand([b, " + str(d) +
         ", 1], dtype=temp.dtype, device=temp.device)) / " + num(static_cast<double>(r)));
  w.line(in + "v = torch.clamp(torch.erfinv(2.0 * v - 1.0) * " + num(std::sqrt(2.0)) + ", -4.0, 4.0)");
  if (d > 1) {
    w.line(in + "c = torch.cat([" + realign + ", v], -1)");
    w.line(in + realign + ".copy_(c[:, :, 1:])");
    w.line(in + "out.select(2, i).copy_(torch.diagonal(c, 0, 1, 2))");
  } else {
    w.line(in + "out.select(2, i).copy_(v.select(2, 0))");
  }
  w.define("prior", "temp: Tensor", "Tensor", "out");
}

}  // namespace rt::exporting
