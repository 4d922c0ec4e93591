#include "export/onnx/latent_nodes.h"

#include <cmath>

namespace rt::exporting::onnx {

// RAVE's unit_norm_vector_to_angles, as the TorchScript file's latent_to_angles
// (export/torchscript/rave_script.cpp): x (B, L, T) → (B, L − 1, T) angles in [−1, 1], 0 where RAVE divides
// 0 by 0. The flipped cumulative sum there is CumSum with reverse here (the same additions).
std::string latent_to_angles(SectionWriter& e, const std::string& x, int64_t L) {
  auto& g = e.graph();
  const std::string one = g.scalar("one", 1.0), pi = g.scalar("pi", M_PI),
                    two_pi = g.scalar("two_pi", 2.0 * M_PI);
  const std::string tails =
      g.node("CumSum", {g.node("Mul", {x, x}), g.initializer("axis", torch::tensor(int64_t{1}))},
             {{"reverse", int64_t{1}}});
  const std::string norms = g.node("Sqrt", {g.slice(tails, 1, 0, L - 1)});
  const std::string defined = g.node("Greater", {norms, g.scalar("zero", 0.0)});
  const std::string ratio = g.node(
      "Where",
      {defined, g.node("Div", {g.slice(x, 1, 0, L - 1), g.node("Where", {defined, norms, one})}), one});
  const std::string angles = g.node("Acos", {g.node("Clip", {ratio, g.scalar("minus_one", -1.0), one})});
  const std::string last_angle = g.slice(angles, 1, L - 2, L - 1);
  const std::string last =
      g.node("Where", {g.node("GreaterOrEqual", {g.slice(x, 1, L - 1, L), g.scalar("zero", 0.0)}), last_angle,
                       g.node("Sub", {two_pi, last_angle})});
  const std::string scaled =
      g.concat({g.node("Div", {g.slice(angles, 1, 0, L - 2), pi}), g.node("Div", {last, two_pi})}, 1);
  return g.node("Mul", {g.node("Sub", {scaled, g.scalar("half", 0.5)}), g.scalar("two", 2.0)});
}

// RAVE's angles_to_unit_norm_vector, as the TorchScript file's angles_to_latent: (B, L − 1, T)
// angles (wrapped into [−1, 1)) → the unit vector (B, L, T). The running product of sines is
// written out, one Mul per dimension (ONNX has no CumProd).
std::string angles_to_latent(SectionWriter& e, const std::string& angles, int64_t L) {
  auto& g = e.graph();
  std::string a = g.node("Add", {g.node("Div", {angles, g.scalar("two", 2.0)}), g.scalar("half", 0.5)});
  a = g.node("Sub", {a, g.node("Floor", {a})});  // torch.remainder(a, 1.0)
  a = g.concat({g.node("Mul", {g.slice(a, 1, 0, L - 2), g.scalar("pi", M_PI)}),
                g.node("Mul", {g.slice(a, 1, L - 2, L - 1), g.scalar("two_pi", 2.0 * M_PI)})},
               1);
  const std::string sin = g.node("Sin", {a});
  std::vector<std::string> products{g.slice(sin, 1, 0, 1)};
  for (int64_t k = 1; k < L - 1; ++k)
    products.push_back(g.node("Mul", {products.back(), g.slice(sin, 1, k, k + 1)}));
  const std::string cumprod = products.size() == 1 ? products[0] : g.concat(products, 1);
  const std::string ones = g.node("Add", {e.zeros_like_channels(angles, 1), g.scalar("one", 1.0)});
  return g.node("Mul", {g.concat({g.node("Cos", {a}), ones}, 1), g.concat({ones, cumprod}, 1)});
}

// The residual quantiser's nearest-code search over `codebooks` ([K, D] each), as the TorchScript
// file's quantize_latent: (B, D, T) → (B, Q, T) code indices as floats (what msprior reads).
std::string quantize_latent(SectionWriter& e, const std::vector<torch::Tensor>& codebooks,
                            const std::string& z) {
  auto& g = e.graph();
  std::string residual = g.transpose(z, {0, 2, 1});  // (B, T, D)
  std::vector<std::string> codes;
  int64_t i = 0;
  for (const auto& embed : codebooks) {
    const std::string key = "codebook_" + std::to_string(i++);
    const std::string table = g.initializer(key, embed);
    const torch::Tensor t = embed.t().contiguous();
    const std::string squared = g.node(
        "ReduceSum", {g.node("Mul", {residual, residual}), g.ints("last", {-1})}, {{"keepdims", int64_t{1}}});
    const std::string cross =
        g.node("Mul", {g.node("MatMul", {residual, g.initializer(key + "_t", t)}), g.scalar("two", 2.0)});
    const std::string distance = g.node(
        "Add", {g.node("Sub", {squared, cross}), g.initializer(key + "_norms", t.pow(2).sum(0, true))});
    const std::string index = g.node("ArgMin", {distance}, {{"axis", int64_t{-1}}, {"keepdims", int64_t{0}}});
    residual = g.node("Sub", {residual, g.node("Gather", {table, index})});
    codes.push_back(g.node("Unsqueeze", {index, g.ints("axis1", {1})}));
  }
  return g.node("Cast", {g.concat(codes, 1)}, {{"to", int64_t{1}}});
}

// The codes back to the latent, as the TorchScript file's dequantize_latent: (B, Q, T) floats,
// clamped to the codebook and truncated → (B, D, T), the sum of the codes they name.
std::string dequantize_latent(SectionWriter& e, const graph::Latent& l, const std::string& codes) {
  auto& g = e.graph();
  const std::string index =
      g.node("Cast",
             {g.node("Clip", {codes, g.scalar("zero", 0.0),
                              g.scalar("last_code", static_cast<double>(l.codebook_size - 1))})},
             {{"to", int64_t{7}}});
  std::string sum;
  int64_t i = 0;
  for (const auto& embed : l.codebooks) {
    const std::string picked = g.node(
        "Gather", {g.initializer("codebook_" + std::to_string(i), embed), g.slice(index, 1, i, i + 1)});
    sum = sum.empty() ? picked : g.node("Add", {sum, picked});
    ++i;
  }
  return g.transpose(g.reshape(sum, {0, -1, l.full}), {0, 2, 1});  // (B, 1, T, D) → (B, D, T)
}

}  // namespace rt::exporting::onnx
