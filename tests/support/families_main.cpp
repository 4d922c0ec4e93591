// main() of the test suites that read configs: the built-in model families are registered
// before any test runs, as the programs' main() does (families/builtin.h).
#include <gtest/gtest.h>

#include "families/builtin.h"

int main(int argc, char** argv) {
  rt::register_builtin_model_families();
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
