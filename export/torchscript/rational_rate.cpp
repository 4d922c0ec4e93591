#include "export/torchscript/rational_rate.h"

#include <utility>
#include <vector>

#include "export/torchscript/script_writer.h"
#include "util/error.h"

namespace rt::exporting {
namespace {

// The arguments after the signal of `convert` and `convert_cycles` for one direction.
std::string args(const std::string& weights, const rave::RationalResampling& c, bool with_history) {
  return "self." + weights + ", " + str(c.up) + ", " + str(c.down) + ", " + str(c.window) +
         (with_history ? ", " + str(c.history) : "");
}

// The conversion methods both directions share: whole cycles of a buffer, and a whole signal.
void define_conversions(torch::jit::Module& top, const graph::RationalRate& q) {
  top.register_buffer("down_weights", q.down.weights.to(torch::kFloat32).contiguous());
  top.register_buffer("up_weights", q.up.weights.to(torch::kFloat32).contiguous());
  top.define(R"(
def convert_cycles(self, buf: Tensor, cycles: int, weights: Tensor, up: int, stride: int, window: int) -> Tensor:
    b = buf.size(0)
    c = buf.size(1)
    flat = buf.reshape(b * c, 1, buf.size(2))
    parts = [torch.zeros([b, c, 0], dtype=buf.dtype, device=buf.device)]
    first = 0
    while first < cycles:
        n = min(4096, cycles - first)
        x = flat[:, :, first * stride:first * stride + (n - 1) * stride + window]
        y = torch.conv1d(x, weights.to(buf.dtype), None, [stride])
        parts.append(y.transpose(1, 2).reshape(b, c, n * up))
        first += n
    return torch.cat(parts, 2)

def cycles_in(self, buffered: int, stride: int, window: int) -> int:
    if buffered < window:
        return 0
    return (buffered - window) // stride + 1

def convert(self, x: Tensor, weights: Tensor, up: int, stride: int, window: int, history: int) -> Tensor:
    t = x.size(2)
    out = (t * up + stride - 1) // stride
    cycles = (out + up - 1) // up
    right = max(0, (cycles - 1) * stride + window - history - t)
    left = torch.zeros([x.size(0), x.size(1), history], dtype=x.dtype, device=x.device)
    tail = torch.zeros([x.size(0), x.size(1), right], dtype=x.dtype, device=x.device)
    buf = torch.cat([left, x, tail], 2)
    return self.convert_cycles(buf, cycles, weights, up, stride, window)[:, :, :out]
)");
  top.define("def to_model_rate(self, x: Tensor) -> Tensor:\n    return self.convert(x, " +
             args("down_weights", q.down, true) + ")\n");
  top.define("def from_model_rate(self, x: Tensor) -> Tensor:\n    return self.convert(x, " +
             args("up_weights", q.up, true) + ")\n");
}

// `text` with each {key} replaced by its value.
std::string fill(std::string text, const std::vector<std::pair<std::string, std::string>>& values) {
  for (const auto& [key, value] : values) {
    for (size_t at = text.find(key); at != std::string::npos; at = text.find(key, at + value.size()))
      text.replace(at, key.size(), value);
  }
  return text;
}

void define_offline_forward(torch::jit::Module& top, const graph::Rave& r, const std::string& checks) {
  const std::string body = R"(
    n = x.size(2)
    m = self.to_model_rate(x)
    t = m.size(2)
    if t == 0:
        return torch.zeros([x.size(0), {OUT}, 0], dtype=x.dtype, device=x.device)
    pad = torch.zeros([m.size(0), {C}, (t + {R} - 1) // {R} * {R} - t], dtype=m.dtype, device=m.device)
    y = self.decode_at_model_rate(self.encode_at_model_rate(torch.cat([m, pad], 2)))[:, :, :t]
    return self.from_model_rate(y)[:, :, :n]
)";
  top.define("def forward(self, x: Tensor) -> Tensor:\n" + checks +
             fill(body.substr(1),
                  {{"{C}", str(r.channels)}, {"{OUT}", str(r.output_channels)}, {"{R}", str(r.ratio)}}));
}

void define_streaming_forward(torch::jit::Module& top, const graph::Rave& r, const std::string& checks) {
  const graph::RationalRate& q = *r.rational;
  // The queues, for one batch row until a call brings another batch size.
  top.register_buffer("host_in", torch::zeros({1, r.channels, q.down.history}));
  top.register_buffer("model_in", torch::zeros({1, r.channels, q.model_delay}));
  top.register_buffer("model_out", torch::zeros({1, r.output_channels, q.up.history}));
  top.register_buffer("host_out", torch::zeros({1, r.output_channels, q.host_delay}));
  top.define(R"(
def convert_queued(self, buf: Tensor, weights: Tensor, up: int, stride: int, window: int) -> Tuple[Tensor, Tensor]:
    k = self.cycles_in(buf.size(2), stride, window)
    return self.convert_cycles(buf, k, weights, up, stride, window), buf[:, :, k * stride:]
)");
  const std::string body = R"(
    b = x.size(0)
    if self.host_in.size(0) != b:
        self.host_in = torch.zeros([b, {C}, {H_DOWN}], dtype=x.dtype, device=x.device)
        self.model_in = torch.zeros([b, {C}, {MODEL_DELAY}], dtype=x.dtype, device=x.device)
        self.model_out = torch.zeros([b, {OUT}, {H_UP}], dtype=x.dtype, device=x.device)
        self.host_out = torch.zeros([b, {OUT}, {HOST_DELAY}], dtype=x.dtype, device=x.device)
    m, rest = self.convert_queued(torch.cat([self.host_in, x], 2), {DOWN})
    self.host_in = rest
    m = torch.cat([self.model_in, m], 2)
    whole = m.size(2) // {R} * {R}
    self.model_in = m[:, :, whole:]
    if whole > 0:
        y = self.decode_at_model_rate(self.encode_at_model_rate(m[:, :, :whole]))
        h, rest = self.convert_queued(torch.cat([self.model_out, y], 2), {UP})
        self.model_out = rest
        self.host_out = torch.cat([self.host_out, h], 2)
    n = x.size(2)
    assert self.host_out.size(2) >= n, "internal error: the output queue ran dry"
    y = self.host_out[:, :, :n]
    self.host_out = self.host_out[:, :, n:]
    return y
)";
  top.define("def forward(self, x: Tensor) -> Tensor:\n" + checks +
             fill(body.substr(1), {{"{C}", str(r.channels)},
                                   {"{OUT}", str(r.output_channels)},
                                   {"{H_DOWN}", str(q.down.history)},
                                   {"{H_UP}", str(q.up.history)},
                                   {"{MODEL_DELAY}", str(q.model_delay)},
                                   {"{HOST_DELAY}", str(q.host_delay)},
                                   {"{R}", str(r.ratio)},
                                   {"{DOWN}", args("down_weights", q.down, false)},
                                   {"{UP}", args("up_weights", q.up, false)}}));
}

}  // namespace

void define_rational_forward(torch::jit::Module& top, const graph::Rave& r, const std::string& checks) {
  if (!r.rational) throw Error("export: internal error: no rational rate to write");
  define_conversions(top, *r.rational);
  if (r.streaming) {
    define_streaming_forward(top, r, checks);
  } else {
    define_offline_forward(top, r, checks);
  }
}

}  // namespace rt::exporting
