#include "support/test_support.h"

#include <sys/wait.h>
#include <torch/version.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <random>
#include <stdexcept>
#include <thread>

#include "support/libtorch_version.h"
#include "util/blas_kernels.h"
#include "util/signals.h"
#include "util/torch_compat.h"

namespace rt::testing {
namespace {

// Every test binary runs on the BLAS kernels its CPU allows, as the programs do
// (util/blas_kernels.h), and the programs the tests start inherit the choice (silently).
const bool blas_chosen = (choose_blas_kernels(), true);
// And TorchScript runs without the tensor-expression fuser, as in export and generate.
const bool fuser_off = (compat::disable_tensorexpr_fuser(), true);

}  // namespace

ScratchDir::ScratchDir(const std::string& prefix) {
  std::random_device rd;
  for (int attempt = 0; attempt < 100; ++attempt) {
    auto candidate = std::filesystem::temp_directory_path() /
                     (prefix + "_" + std::to_string(::getpid()) + "_" + std::to_string(rd() % 1000000));
    if (std::filesystem::create_directories(candidate)) {
      path_ = candidate;
      return;
    }
  }
  throw std::runtime_error("cannot create a scratch directory");
}

ScratchDir::~ScratchDir() {
  if (std::getenv("RT_KEEP_TEST_DIRS") != nullptr) return;
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

CommandResult run_command(const std::string& command) {
  CommandResult result;
  const std::string full = command + " 2>&1";
  FILE* pipe = ::popen(full.c_str(), "r");
  if (pipe == nullptr) return result;
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), pipe)) > 0) result.output.append(buf.data(), n);
  int status = ::pclose(pipe);
  if (WIFEXITED(status)) {
    result.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    result.exit_code = 128 + WTERMSIG(status);
  }
  return result;
}

std::string libtorch_version() { return TORCH_VERSION; }
std::string libtorch_major_minor() {
  return std::to_string(TORCH_VERSION_MAJOR) + "." + std::to_string(TORCH_VERSION_MINOR) + ".";
}

std::string torchrun_unusable_reason() {
  static const std::string reason = [] {
    if (run_command("command -v torchrun").exit_code != 0)
      return std::string("torchrun is not installed (python3-torch)");
    // torchrun's agent hosts the TCPStore the ranks join: one of another torch major.minor speaks
    // another store protocol (LibTorch 2.x's clients ping a 1.13 store, which resets them).
    const auto version = run_command(
        "\"$(sed -n '1s/^#!//p' \"$(command -v torchrun)\")\" -c 'import torch; print(torch.__version__)' "
        "2>/dev/null");
    const std::string ours = libtorch_major_minor();
    // The version is the last line printed (importing torch may warn first).
    std::string theirs = version.output;
    while (!theirs.empty() && theirs.back() == '\n') theirs.pop_back();
    theirs = theirs.substr(theirs.rfind('\n') == std::string::npos ? 0 : theirs.rfind('\n') + 1);
    if (version.exit_code == 0 && !theirs.empty() && theirs.rfind(ours, 0) != 0) {
      return "torchrun runs torch " + theirs + ", this build LibTorch " + libtorch_version() +
             ": their TCPStore protocols differ (put a matching torchrun first on PATH)";
    }
    const auto probe = run_command(
        "timeout -k 5 60 torchrun --standalone --no_python --nproc_per_node 1 --redirects 2 --tee 2 "
        "/bin/true");
    if (probe.exit_code == 0) return std::string();
    const size_t at = probe.output.find("RuntimeError: ");
    return "torchrun cannot start ranks here: " +
           (at == std::string::npos ? "exit code " + std::to_string(probe.exit_code)
                                    : probe.output.substr(at, probe.output.find('\n', at) - at));
  }();
  return reason;
}

bool signal_this_process(int sig) {
  const long before = rt::signals_received();
  if (::kill(::getpid(), sig) != 0) return false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (rt::signals_received() == before) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  return true;
}

std::string bin_path(const std::string& name) { return std::string(RT_BIN_DIR) + "/" + name; }

std::filesystem::path source_path(const std::string& relative) {
  return std::filesystem::path(RT_SOURCE_DIR) / relative;
}

std::string read_text(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

}  // namespace rt::testing
