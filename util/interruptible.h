// A long computation that Ctrl-C and SIGTERM end at once, for the commands whose work is one
// call that cannot be interrupted from inside (a model's forward over a whole file, a
// validation pass over a database): `compute` runs on a thread of its own while the calling
// thread watches for a stop signal (util/signals.h). On one, StopRequested is thrown at once
// and the computation is left running on its thread: the caller must then end the process with
// std::_Exit (not return through destructors under it), having written nothing the computation
// was still making. generate (generate/generate.h) and evaluate use it.
#pragma once

#include <ATen/Parallel.h>

#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <utility>

#include "util/signals.h"

namespace rt {

template <typename F>
auto run_interruptible(F compute, const std::string& during) -> decltype(compute()) {
  using T = decltype(compute());
  auto task = std::make_shared<std::packaged_task<T()>>([compute = std::move(compute)]() mutable {
    at::init_num_threads();  // the intra-op thread count the caller set applies on this thread too
    return compute();
  });
  std::future<T> done = task->get_future();
  std::thread worker([task] { (*task)(); });
  while (done.wait_for(std::chrono::milliseconds(50)) != std::future_status::ready) {
    if (stop_requested()) {
      worker.detach();
      throw_if_stop_requested(during);
    }
  }
  worker.join();
  return done.get();
}

}  // namespace rt
