#include "models/ssm/decoders.h"

#include <optional>

#include "distributed/sync_batch_norm.h"
#include "models/common/batch_slice.h"
#include "models/common/row_linear.h"
#include "models/ssm/fused_ops.h"
#include "profiling/annotation.h"
#include "util/error.h"
#include "util/torch_compat.h"

namespace rt::ssm {

SsmOptions SsmOptions::s5_maze() { return SsmOptions{}; }

SsmOptions SsmOptions::foundational() {
  SsmOptions o;
  o.variant = SsmVariant::kFoundational;
  o.d_model = 128;
  o.state_dim = 128;
  o.n_layers = 4;
  o.ssm_blocks = 4;  // foundational_ssm decoders.py: ssm_init_diag_blocks = 4
  o.context_dim = 8;
  return o;
}

void SsmOptions::validate() const {
  if (variant == SsmVariant::kFoundational && context_dim >= d_model) {
    throw Error("model.context_dim = " + std::to_string(context_dim) + " must be < model.d_model = " +
                std::to_string(d_model) + " (the encoders output d_model − context_dim features)");
  }
  layer_options().validate();
}

S5LayerOptions SsmOptions::layer_options() const {
  S5LayerOptions l;
  l.kind = kind;
  l.d_model = d_model;
  l.state_dim = state_dim;
  l.ssm_blocks = ssm_blocks;
  l.conj_sym = conj_sym;
  l.discretization = discretization;
  l.scan = scan;
  l.dt_min = dt_min;
  l.dt_max = dt_max;
  return l;
}

S5BlockImpl::S5BlockImpl(const S5LayerOptions& layer, double dropout, bool batch_statistics_in_eval) {
  const int64_t H = layer.d_model;
  // foundational_ssm: eqx.nn.BatchNorm(channelwise_affine=False).
  norm = register_module(
      "norm", torch::nn::BatchNorm1d(torch::nn::BatchNorm1dOptions(H).affine(false).track_running_stats(
                  !batch_statistics_in_eval)));
  ssm = register_module("ssm", make_ssm_layer(layer));
  glu_w1 = register_module("glu_w1", torch::nn::Linear(H, H));
  glu_w2 = register_module("glu_w2", torch::nn::Linear(H, H));
  drop = register_module("drop", torch::nn::Dropout(dropout));
}

void S5BlockImpl::set_module_path(std::string path) {
  ssm_path_ = path + ".ssm";
  TracedModule::set_module_path(std::move(path));
}

bool S5BlockImpl::uses_fused_kernels(const torch::Tensor& x) const {
  return fused_kernels && ssm->options().scan == ScanKind::kFused && x.device().is_cpu() &&
         (x.scalar_type() == torch::kFloat || x.scalar_type() == torch::kDouble);
}

torch::Tensor S5BlockImpl::forward(const torch::Tensor& x) {
  prof::ModuleScope span(module_path());
  if (uses_fused_kernels(x)) return forward_fused(x);
  // B = batch, T = time, H = features. BatchNorm1d over [B, H, T] pools statistics over B×T.
  torch::Tensor h;
  if (norm_sync && norm_sync->world_size() > 1 && norm->is_training()) {
    const int64_t B = x.size(0), T = x.size(1), H = x.size(2);
    h = dist::sync_batch_norm(x.reshape({B * T, H}), *norm, *norm_sync).view({B, T, H});
  } else {
    h = norm(x.transpose(1, 2)).transpose(1, 2);
  }
  {
    prof::ModuleScope ssm_span(ssm_path_);
    h = ssm->forward(h);
  }
  h = torch::gelu(h, "tanh");  // jax.nn.gelu defaults to the tanh approximation
  // Masks independent of the data-parallel split (models/common/batch_slice.h).
  h = models::batch_dropout(h, drop->options.p(), drop->is_training());
  h = glu_w1(h) * torch::sigmoid(glu_w2(h));
  h = models::batch_dropout(h, drop->options.p(), drop->is_training());
  return x + h;
}

// The same block in rows [B·T, H] (fused_ops.h). For an SSM with a recurrence form (S5, LRU)
// outside autocast: fused::ssm_block, the whole body as one node, a few sequences at a time
// (the module span of the SSM covers its discretisation only; the block's span the rest).
// Otherwise (S4D's convolution, autocast) single kernels around the layer's rows form:
// BatchNorm without transposes, gelu ⊕ D·u ⊕ dropout, one product for both GLU halves, and
// GLU ⊕ dropout ⊕ residual. Either way the dropout seeds are drawn from torch's default
// generator in the order the unfused path draws its two masks.
torch::Tensor S5BlockImpl::forward_fused(const torch::Tensor& x) {
  const int64_t B = x.size(0), T = x.size(1), H = x.size(2);
  auto x2 = x.reshape({B * T, H});
  const double p = drop->is_training() ? drop->options.p() : 0.0;
  if (!compat::autocast_enabled(c10::DeviceType::CPU)) {
    // Layers with a recurrence form (S5, LRU): the whole block as one node, tile by tile.
    std::optional<SsmLayerBase::RecurrenceWeights> rw;
    {
      prof::ModuleScope ssm_span(ssm_path_);
      rw = ssm->recurrence_weights();
    }
    if (rw.has_value()) {
      const auto dtype = x2.scalar_type();
      fused::BlockWeights w{rw->w_in.to(dtype),
                            rw->a_re.to(dtype),
                            rw->a_im.to(dtype),
                            rw->w_out.to(dtype),
                            ssm->feedthrough().to(dtype),
                            torch::cat({glu_w1->weight, glu_w2->weight}, 0),
                            torch::cat({glu_w1->bias, glu_w2->bias}, 0)};
      const uint64_t seed_gelu = p > 0 ? fused::draw_dropout_seed() : 0;
      const uint64_t seed_glu = p > 0 ? fused::draw_dropout_seed() : 0;
      return fused::ssm_block(x2, B, *norm, norm_sync.get(), w, p, seed_gelu, seed_glu).view({B, T, H});
    }
  }
  auto u = fused::batch_norm_module(x2, *norm, norm_sync.get());
  torch::Tensor z;
  {
    prof::ModuleScope ssm_span(ssm_path_);
    z = ssm->forward_fused_rows(u, B);
  }
  // Under autocast (train.precision bf16/fp16) the matmuls' outputs are in the low precision; the
  // fused kernels run in the activations' float32, as autocast runs the ops on its float32 list.
  auto h = fused::gelu_dropout(z.to(u.scalar_type()), u, ssm->feedthrough(), p,
                               p > 0 ? fused::draw_dropout_seed() : 0);
  auto w = torch::cat({glu_w1->weight, glu_w2->weight}, 0);  // [2H, H]: both halves in one addmm
  auto b = torch::cat({glu_w1->bias, glu_w2->bias}, 0);
  auto ab = models::row_linear(h, w, b).to(x2.scalar_type());
  return fused::glu_dropout_residual(ab, x2, p, p > 0 ? fused::draw_dropout_seed() : 0).view({B, T, H});
}

void SsmModelImpl::add_blocks(const SsmOptions& options, bool batch_statistics_in_eval) {
  torch::nn::ModuleList list;
  for (int64_t i = 0; i < options.n_layers; ++i) {
    blocks.emplace_back(options.layer_options(), options.dropout, batch_statistics_in_eval);
    list->push_back(blocks.back());
  }
  register_module("blocks", list);
}

void SsmModelImpl::set_scan(ScanKind scan) {
  for (auto& b : blocks) b->ssm->set_scan(scan);
}

void SsmModelImpl::set_fused_kernels(bool on) {
  for (auto& b : blocks) b->fused_kernels = on;
}

void SsmModelImpl::set_batch_norm_sync(std::shared_ptr<dist::Communicator> comm) {
  for (auto& b : blocks) b->norm_sync = comm;
}

S5DecoderImpl::S5DecoderImpl(const SsmOptions& options) {
  options.validate();
  encoder = register_module("encoder", torch::nn::Linear(options.input_dim, options.d_model));
  add_blocks(options);
  decoder = register_module("decoder", torch::nn::Linear(options.d_model, options.output_dim));
  models::assign_module_paths(*this);
}

// Module spans use the registered names: they are the module paths from this root.
torch::Tensor S5DecoderImpl::forward(const torch::Tensor& x, int64_t /*group*/) {
  TORCH_CHECK(x.dim() == 3, "S5Decoder: expected input [B, T, units], got ", x.sizes());
  const int64_t B = x.size(0), T = x.size(1);
  torch::Tensor h;
  {
    // In rows: one product with its bias (a 3-D input would take matmul + a separate bias add).
    prof::ModuleScope span("encoder");
    h = models::row_linear(x.reshape({B * T, x.size(2)}), encoder->weight, encoder->bias).view({B, T, -1});
  }
  for (auto& b : blocks) h = b(h);
  prof::ModuleScope span("decoder");
  return models::row_linear(h.reshape({B * T, h.size(2)}), decoder->weight, decoder->bias).view({B, T, -1});
}

FoundationalDecoderImpl::FoundationalDecoderImpl(const SsmOptions& options, int64_t n_groups)
    : input_dim_(options.input_dim) {
  options.validate();
  TORCH_CHECK(n_groups >= 1, "FoundationalDecoder: n_groups must be >= 1, got ", n_groups);
  torch::nn::ModuleList list;
  for (int64_t g = 0; g < n_groups; ++g) {
    encoders.emplace_back(options.input_dim, options.d_model - options.context_dim);
    list->push_back(encoders.back());
  }
  register_module("encoders", list);
  encoder_drop = register_module("encoder_drop", torch::nn::Dropout(options.dropout));
  if (options.context_dim > 0) {
    context = register_module("context", torch::nn::Embedding(n_groups, options.context_dim));
  }
  add_blocks(options, /*batch_statistics_in_eval=*/true);
  decoder = register_module("decoder", torch::nn::Linear(options.d_model, options.output_dim));
  models::assign_module_paths(*this);
}

torch::Tensor FoundationalDecoderImpl::forward(const torch::Tensor& x, int64_t group) {
  TORCH_CHECK(group >= 0 && group < n_groups(), "FoundationalDecoder: group ", group, " out of range [0, ",
              n_groups(), ")");
  TORCH_CHECK(x.dim() == 3 && x.size(2) <= input_dim_,
              "FoundationalDecoder: expected input [B, T, <= ", input_dim_, "], got ", x.sizes());
  auto padded = x.size(2) < input_dim_ ? torch::constant_pad_nd(x, {0, input_dim_ - x.size(2)}) : x;
  torch::Tensor h;
  {
    prof::ModuleScope span(prof::module_spans_enabled() ? "encoders." + std::to_string(group)
                                                        : std::string());
    h = models::batch_dropout(encoders[static_cast<size_t>(group)](padded), encoder_drop->options.p(),
                              encoder_drop->is_training());
  }
  if (context) {
    auto idx = torch::full({1}, group, torch::TensorOptions().dtype(torch::kLong).device(x.device()));
    auto c = context(idx).view({1, 1, -1}).expand({h.size(0), h.size(1), -1});
    h = torch::cat({h, c}, 2);
  }
  for (auto& b : blocks) h = b(h);
  prof::ModuleScope span("decoder");
  return decoder(h);
}

std::shared_ptr<SsmModelImpl> make_ssm_model(const SsmOptions& options, int64_t n_groups) {
  options.validate();
  if (options.variant == SsmVariant::kFoundational)
    return std::make_shared<FoundationalDecoderImpl>(options, n_groups);
  return std::make_shared<S5DecoderImpl>(options);
}

std::pair<std::vector<torch::Tensor>, std::vector<torch::Tensor>> split_weight_decay_parameters(
    const torch::nn::Module& model) {
  std::pair<std::vector<torch::Tensor>, std::vector<torch::Tensor>> groups;
  for (const auto& item : model.named_parameters(/*recurse=*/true)) {
    (is_ssm_parameter_name(item.key()) ? groups.second : groups.first).push_back(item.value());
  }
  return groups;
}

torch::Tensor r2_score(const torch::Tensor& pred, const torch::Tensor& target) {
  TORCH_CHECK(pred.sizes() == target.sizes(), "r2_score: shapes differ: ", pred.sizes(), " vs ",
              target.sizes());
  auto p = pred.reshape({-1, pred.size(-1)}).to(torch::kFloat64);
  auto t = target.reshape({-1, target.size(-1)}).to(torch::kFloat64);
  auto ss_res = (t - p).pow(2).sum(0);
  auto ss_tot = (t - t.mean(0, /*keepdim=*/true)).pow(2).sum(0);
  return (1.0 - ss_res / (ss_tot + 1e-8)).mean();
}

}  // namespace rt::ssm
