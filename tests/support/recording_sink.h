// A ScalarSink (profiling/scalar_sink.h) that keeps every scalar it is sent, in order: what the
// timers and the memory metrics would have written to TensorBoard.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "profiling/scalar_sink.h"

namespace rt::testing {

struct RecordingSink : prof::ScalarSink {
  struct Row {
    std::string tag;
    double value;
    int64_t step;
  };
  std::vector<Row> rows;
  void add_scalar(const std::string& tag, double value, int64_t step) override {
    rows.push_back({tag, value, step});
  }
  std::vector<std::string> tags() const {
    std::vector<std::string> out;
    for (const auto& r : rows) out.push_back(r.tag);
    return out;
  }
  // The value of the first scalar named `tag`; a test failure when there is none.
  double value(const std::string& tag) const {
    for (const auto& r : rows) {
      if (r.tag == tag) return r.value;
    }
    ADD_FAILURE() << "no scalar " << tag;
    return -1.0;
  }
};

}  // namespace rt::testing
