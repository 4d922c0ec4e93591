#include "families/ssm/ssm_transfer.h"

#include <map>
#include <sstream>

#include "config/config.h"
#include "families/ssm/ssm_family.h"
#include "training/checkpoint.h"
#include "util/error.h"

namespace rt {
namespace {

namespace fs = std::filesystem;

// The first component of a dotted name: the model's child that holds it.
std::string top_module(const std::string& name) { return name.substr(0, name.find('.')); }

bool transferred_module(const std::string& top) { return top == "blocks" || top == "decoder"; }

std::string shape_text(const torch::Tensor& t) {
  std::ostringstream s;
  s << t.sizes();
  return s.str();
}

// Walks `module` and the archive `in` that Module::save wrote for a module of the same roles,
// copying what is under blocks.* and decoder.* and has the same shape.
void copy_matching(torch::nn::Module& module, torch::serialize::InputArchive& in, const std::string& prefix,
                   bool in_scope, TransferReport& report) {
  auto take = [&](const std::string& key, torch::Tensor& target, bool is_buffer) {
    const std::string name = prefix + key;
    if (!in_scope) {
      report.made_anew.push_back(name + " (the new session's)");
      return;
    }
    torch::Tensor source;
    if (!in.try_read(key, source, is_buffer)) {
      report.made_anew.push_back(name + " (not in the checkpoint)");
      return;
    }
    if (!source.sizes().equals(target.sizes())) {
      report.made_anew.push_back(name + " (" + shape_text(target) + " here, " + shape_text(source) +
                                 " in the checkpoint)");
      return;
    }
    torch::NoGradGuard no_grad;
    target.copy_(source);
    report.copied.push_back(name);
  };
  for (auto& p : module.named_parameters(/*recurse=*/false)) take(p.key(), p.value(), false);
  for (auto& b : module.named_buffers(/*recurse=*/false)) take(b.key(), b.value(), true);
  for (const auto& child : module.named_children()) {
    const bool scope = in_scope || (prefix.empty() && transferred_module(child.key()));
    torch::serialize::InputArchive child_in;
    if (scope && !in.try_read(child.key(), child_in)) {
      for (const auto& p : child.value()->named_parameters())
        report.made_anew.push_back(prefix + child.key() + "." + p.key() + " (not in the checkpoint)");
      continue;
    }
    copy_matching(*child.value(), child_in, prefix + child.key() + ".", scope, report);
  }
}

}  // namespace

bool trains_in_transfer_mode(const std::string& name, TransferMode mode) {
  switch (mode) {
    case TransferMode::kAll:
      return true;
    case TransferMode::kFreezeA:
      return !ssm::is_ssm_parameter_name(name);
    case TransferMode::kEncoderOnly:
      return !transferred_module(top_module(name));
  }
  return true;
}

TransferReport transfer_pretrained_ssm(const fs::path& checkpoint, torch::nn::Module& model,
                                       const ssm::SsmOptions& options) {
  const std::string file = checkpoint.string();
  const CheckpointMeta meta = read_checkpoint_meta(checkpoint);
  if (meta.family != "ssm") {
    throw Error("train.init_from: '" + file + "' is a checkpoint of model.family = '" + meta.family +
                "'; a transfer starts from an ssm checkpoint");
  }
  Config pretrained;
  pretrained.merge_toml_string(meta.config_toml, file);
  pretrained.finalize();
  const ssm::SsmOptions p = ssm_options_from(pretrained);
  std::vector<std::string> differ;
  auto check = [&](const char* key, const std::string& there, const std::string& here) {
    if (there != here) differ.push_back(std::string(key) + " = " + there + " there, " + here + " here");
  };
  check("model.ssm", enum_name(p.kind), enum_name(options.kind));
  check("model.d_model", std::to_string(p.d_model), std::to_string(options.d_model));
  check("model.state_dim", std::to_string(p.state_dim), std::to_string(options.state_dim));
  check("model.n_layers", std::to_string(p.n_layers), std::to_string(options.n_layers));
  check("model.ssm_blocks", std::to_string(p.ssm_blocks), std::to_string(options.ssm_blocks));
  check("model.conj_sym", p.conj_sym ? "true" : "false", options.conj_sym ? "true" : "false");
  check("model.discretization", enum_name(p.discretization), enum_name(options.discretization));
  if (!differ.empty()) {
    std::string list;
    for (const auto& d : differ) list += (list.empty() ? "" : "; ") + d;
    throw Error("train.init_from: the SSM blocks of '" + file +
                "' do not match this model's, so they cannot carry over (" + list +
                "): set those model.* keys as the pretraining did");
  }
  torch::serialize::InputArchive top, model_in, ssm_in;
  top.load_from(file);
  top.read("model", model_in);
  model_in.read("ssm", ssm_in);
  TransferReport report;
  report.checkpoint = checkpoint;
  report.source = "ssm " + std::string(enum_name(p.variant)) + ", " + enum_name(p.kind) + ", step " +
                  std::to_string(meta.step);
  copy_matching(model, ssm_in, "", false, report);
  return report;
}

std::string TransferReport::text() const {
  // Names grouped by their module up to the tensor: "blocks.0.ssm (6)".
  auto grouped = [](const std::vector<std::string>& names) {
    std::map<std::string, int> count;
    std::vector<std::string> order;
    for (const auto& n : names) {
      const size_t paren = n.find(" (");
      const std::string tensor = n.substr(0, paren);
      const size_t dot = tensor.rfind('.');
      std::string key = dot == std::string::npos ? tensor : tensor.substr(0, dot);
      if (paren != std::string::npos) key += n.substr(paren);  // keep the reason
      if (count[key]++ == 0) order.push_back(key);
    }
    std::string out;
    for (const auto& k : order) {
      out += "\n    " + k;
      if (count[k] > 1) out += " [" + std::to_string(count[k]) + " tensors]";
    }
    return out;
  };
  std::string t = "init_from " + checkpoint.string() + " (" + source + "):\n  copied (" +
                  std::to_string(copied.size()) + " tensors):" + grouped(copied);
  t += "\n  made anew (" + std::to_string(made_anew.size()) + " tensors):" + grouped(made_anew) + "\n";
  return t;
}

}  // namespace rt
