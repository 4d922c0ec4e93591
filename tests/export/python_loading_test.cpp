// Debian's python3-torch loads the exported files (torch.jit.load) and its encode, decode and
// forward equal the C++ model's within 1e-5 (tests/export/check_torchscript.py). Skipped only
// when /usr/bin/python3 has no torch (scripts/setup.sh installs python3-torch).
#include "export/export_fixtures.h"

namespace rt::exporting::testing {
namespace {

// The inputs and the C++ model's outputs, as buffers of a module Python can torch.jit.load.
void write_reference(rave::RaveModelImpl& model, const std::filesystem::path& file) {
  const auto& o = model.options();
  torch::manual_seed(31);
  auto x = torch::randn({2, o.channels, 10 * o.compression()}) * 0.3;
  auto z = torch::randn({2, o.latent_size, 10});
  torch::jit::Module ref("__torch__.Reference");
  ref.register_buffer("x", x);
  ref.register_buffer("z", z);
  ref.register_buffer("encode_sampled", reference_latent(model, x, true, 5));
  ref.register_buffer("decode", reference_decode(model, z, 6));
  torch::NoGradGuard no_grad;
  torch::manual_seed(7);
  ref.register_buffer("forward_out", model.forward(x));
  ref.register_buffer("encode_mean", reference_latent(model, x, false));
  ref.save(file.string());
}

TEST(PythonLoading, DebianTorchLoadsTheFilesAndComputesWhatTheModelComputes) {
  auto probe = rt::testing::run_command("/usr/bin/python3 -c 'import torch' 2>&1");
  if (probe.exit_code != 0) GTEST_SKIP() << "/usr/bin/python3 has no torch (apt-get install python3-torch)";
  rt::testing::ScratchDir dir("export_python");
  for (const Variant& v : {Variant{"v1_mono", rave::RaveVersion::kV1, 1, 0, false},
                           Variant{"v2_stereo", rave::RaveVersion::kV2, 2, 0, false},
                           Variant{"v2_noise", rave::RaveVersion::kV2, 1, 4, false},
                           Variant{"v3_mono", rave::RaveVersion::kV3, 1, 0, false}}) {
    auto model = tiny_model(tiny_options(v), v.warm);
    script_rave(*model, ScriptOptions{}, nullptr).save((dir / ("model_" + v.name + ".ts")).string());
    write_reference(*model, dir / ("reference_" + v.name + ".pt"));
    // The streaming file is compared block by block in streaming_test.cpp; Python loads and runs it.
    ScriptOptions streaming;
    streaming.streaming = true;
    script_rave(*model, streaming, nullptr).save((dir / ("stream_" + v.name + ".ts")).string());
  }
  auto r = rt::testing::run_command("/usr/bin/python3 " +
                                    rt::testing::source_path("tests/export/check_torchscript.py").string() +
                                    " " + dir.path().string() + " 2>&1");
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

}  // namespace
}  // namespace rt::exporting::testing
