// Bucketed gradient synchronisation and parameter broadcast: 2 ranks × B rows against one
// process with the 2B-row batch (rt_rank_worker on loopback), and the single-process seam.
#include "distributed/gradient_sync.h"

#include <gtest/gtest.h>

#include "dist_fixtures.h"
#include "distributed/bucketed_gradient_sync.h"
#include "support/expect.h"

namespace rt::dist {
namespace {

using testing::ScratchDir;
using testing::dist::global_input;
using testing::dist::kRowsPerRank;
using testing::dist::load_result;
using testing::dist::make_mlp;
using testing::dist::run_ranks;

// One process, the whole 2-rank global batch: the gradients every rank must end with.
std::vector<torch::Tensor> reference_grads(int step) {
  auto net = make_mlp(7);
  auto x = global_input(kRowsPerRank * 2, 8, 100 + step);
  auto y = global_input(kRowsPerRank * 2, 4, 200 + step);
  torch::mse_loss(net->forward(x), y).backward();
  std::vector<torch::Tensor> grads;
  for (const auto& p : net->parameters()) grads.push_back(p.grad());
  return grads;
}

bool is_undefined_marker(const torch::Tensor& t) { return t.numel() == 1 && std::isnan(t.item<float>()); }

using rt::testing::expect_allclose;
using rt::testing::read_text;

TEST(GradientSync, OneProcessGetsTheFreeSeam) {
  auto sync = make_gradient_sync(std::make_shared<LocalCommunicator>());
  EXPECT_NE(dynamic_cast<SingleProcessSync*>(sync.get()), nullptr);
  EXPECT_NE(dynamic_cast<SingleProcessSync*>(make_gradient_sync(nullptr).get()), nullptr);
}

TEST(GradientSync, BucketsFollowReverseParameterOrderAndTheCaps) {
  // One rank is enough to see the plan: the all-reduces are the identity.
  auto net = make_mlp(7);
  auto params =
      net->parameters();  // W1 [16,8] b1 W2 [16,16] b2 W3 [4,16] b3: 512, 64, 1024, 64, 256, 16 bytes
  BucketedGradientSync sync(std::make_shared<LocalCommunicator>(), {256, 1024});
  sync.begin(params);
  torch::mse_loss(net->forward(global_input(4, 8, 1)), global_input(4, 4, 2)).backward();
  sync.finish();
  const auto& report = sync.last_report();
  // First bucket closes at 256 bytes (b3 + W3), the others at 1024.
  EXPECT_EQ(report.buckets, (std::vector<std::vector<size_t>>{{5, 4}, {3, 2}, {1, 0}}));
  EXPECT_EQ(report.launched_during_backward, 3u);
}

TEST(GradientSync, TwoRanksAverageToTheGradientOfTheWholeBatch) {
  ScratchDir out("grad_sync");
  const auto run = run_ranks(2, "grad_sync", out.path());
  ASSERT_EQ(run.exit_code, 0) << run.output;
  for (int step = 0; step < 2; ++step) {
    // Each step reuses the plan and its hooks (the MLP's parameters do not change between steps
    // here: the test compares gradients, not updates).
    const auto expected = reference_grads(step);
    for (int r = 0; r < 2; ++r) {
      for (size_t i = 0; i < expected.size(); ++i) {
        expect_allclose(
            load_result(out.path(), "step" + std::to_string(step) + "_grad" + std::to_string(i), r),
            expected[i],
            "step " + std::to_string(step) + " rank " + std::to_string(r) + " param " + std::to_string(i),
            1e-6);
      }
    }
  }
}

TEST(GradientSync, AllReducesStartWhileBackwardIsStillRunning) {
  ScratchDir out("grad_overlap");
  const auto run = run_ranks(2, "grad_sync", out.path());
  ASSERT_EQ(run.exit_code, 0) << run.output;
  for (int r = 0; r < 2; ++r) {
    const auto launches = load_result(out.path(), "step1_launch_ns", r);
    const int64_t backward_end = load_result(out.path(), "step1_backward_end_ns", r).item<int64_t>();
    const auto buckets = load_result(out.path(), "step1_buckets", r);
    EXPECT_EQ(buckets[0].item<int64_t>(), 3);
    EXPECT_EQ(buckets[1].item<int64_t>(), 3) << "every bucket started from a gradient hook";
    EXPECT_LT(launches[0].item<int64_t>(), backward_end)
        << "the first all-reduce starts before backward ends";
  }
}

TEST(GradientSync, GradientsLeftInTheBucketAndZeroedInPlaceStayCorrect) {
  ScratchDir out("grad_aliased");
  const auto run = run_ranks(2, "aliased_grads", out.path());
  ASSERT_EQ(run.exit_code, 0) << run.output;
  for (int step = 0; step < 3; ++step) {
    const std::string tag = "step" + std::to_string(step) + "_grad";
    const auto expected = reference_grads(step);
    for (int r = 0; r < 2; ++r) {
      for (size_t i = 0; i < expected.size(); ++i) {
        expect_allclose(load_result(out.path(), tag + std::to_string(i), r), expected[i],
                        tag + " rank " + std::to_string(r) + " param " + std::to_string(i), 1e-6);
      }
      for (size_t i = expected.size(); i < expected.size() + 2; ++i) {
        const auto g = load_result(out.path(), tag + std::to_string(i), r);
        if (step == 0) {
          EXPECT_TRUE(torch::equal(g, load_result(out.path(), tag + std::to_string(i), 1 - r)))
              << "synchronised";
        } else {
          EXPECT_TRUE(is_undefined_marker(g)) << tag << " extra parameter " << i;
        }
      }
    }
  }
}

TEST(GradientSync, UndefinedGradientsStayUndefinedAndTheirBucketReducesTheRest) {
  ScratchDir out("grad_unused");
  const auto run = run_ranks(2, "unused_grads", out.path());
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const auto expected = reference_grads(0);
  // Parameter order: W1 b1 W2 b2 (unused W, b) W3 b3; one bucket holds them all.
  const std::vector<int> used_index{0, 1, 2, 3, -1, -1, 4, 5};
  for (int r = 0; r < 2; ++r) {
    for (size_t i = 0; i < used_index.size(); ++i) {
      const auto g = load_result(out.path(), "grad" + std::to_string(i), r);
      if (used_index[i] < 0) {
        EXPECT_TRUE(is_undefined_marker(g)) << "parameter " << i << " got a gradient";
      } else {
        expect_allclose(g, expected[static_cast<size_t>(used_index[i])], "parameter " + std::to_string(i),
                        1e-6);
      }
    }
    EXPECT_EQ(load_result(out.path(), "launched_during_backward", r).item<int64_t>(), 0)
        << "a bucket with a parameter that gets no gradient waits for finish()";
  }
}

TEST(GradientSync, ACarriedCountIsSummedInTheLastBucketWithoutACollectiveOfItsOwn) {
  ScratchDir out("grad_carry");
  const auto run = run_ranks(2, "carried_count", out.path());
  ASSERT_EQ(run.exit_code, 0) << run.output;
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(load_result(out.path(), "before_any", r).item<int64_t>(), 0) << "nothing carried yet";
    EXPECT_EQ(load_result(out.path(), "step0_carried", r).item<double>(), 1.0)
        << "rank 1's count, on rank " << r;
    EXPECT_EQ(load_result(out.path(), "step1_carried", r).item<double>(), 2.0)
        << "both ranks' counts, in a last bucket without gradients";
    EXPECT_EQ(load_result(out.path(), "step2_carried", r).item<double>(), -1.0)
        << "a step that carried nothing";
    for (int step = 0; step < 3; ++step) {
      const std::string tag = "step" + std::to_string(step) + "_";
      const int64_t buckets = load_result(out.path(), tag + "buckets", r).item<int64_t>();
      // Step 0: three buckets with gradients, the count in the last: three collectives. Steps 1
      // and 2: a fourth bucket, reached last, without gradients: it runs a collective only to
      // carry a count (step 1).
      ASSERT_EQ(buckets, step == 0 ? 3 : 4) << tag;
      const int64_t expected = step == 2 ? 3 : buckets;
      EXPECT_EQ(load_result(out.path(), tag + "collectives", r).item<int64_t>(), expected)
          << tag << "rank " << r;
      const auto expected_grads = reference_grads(step);
      for (size_t i = 0; i < expected_grads.size(); ++i) {
        expect_allclose(load_result(out.path(), tag + "grad" + std::to_string(i), r), expected_grads[i],
                        tag + "rank " + std::to_string(r) + " param " + std::to_string(i), 1e-6);
      }
    }
  }
}

TEST(GradientSync, AlternatingOptimizersSyncOnlyTheParametersTheyStep) {
  ScratchDir out("grad_alternation");
  const auto run = run_ranks(2, "alternation", out.path());
  ASSERT_EQ(run.exit_code, 0) << run.output;
  auto equal_on_ranks = [&](const std::string& name) {
    return torch::equal(load_result(out.path(), name, 0), load_result(out.path(), name, 1));
  };
  // The last bias of each network gets a gradient that does not depend on the data (the
  // generator's: rows × the discriminator's weight; the discriminator's: −1), equal on every
  // rank whether synchronised or not; the local-gradient checks leave it out.
  for (int round = 0; round < 2; ++round) {
    const std::string tag = "round" + std::to_string(round) + "_";
    for (int i = 0; i < 6; ++i) {
      EXPECT_TRUE(equal_on_ranks(tag + "gen_step_gen" + std::to_string(i)))
          << "generator step syncs the generator";
      if (i < 5) {
        EXPECT_FALSE(equal_on_ranks(tag + "unsynced_gen" + std::to_string(i)))
            << "no begin(): gradients stay local";
      }
    }
    for (int i = 0; i < 2; ++i) EXPECT_TRUE(equal_on_ranks(tag + "dis_step_dis" + std::to_string(i)));
    EXPECT_FALSE(equal_on_ranks(tag + "gen_step_dis0"))
        << "the discriminator's gradients of a generator step stay local";
  }
}

TEST(GradientSync, BroadcastParametersGivesEveryRankRankZerosModel) {
  ScratchDir out("broadcast_params");
  const auto run = run_ranks(2, "broadcast_params", out.path());
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const auto before0 = load_result(out.path(), "before", 0);
  EXPECT_FALSE(torch::equal(before0, load_result(out.path(), "before", 1)));
  EXPECT_TRUE(torch::equal(load_result(out.path(), "after", 0), before0));
  EXPECT_TRUE(torch::equal(load_result(out.path(), "after", 1), before0)) << "parameters and buffers";
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(
        read_text(out / ("mismatch_rank" + std::to_string(r) + ".txt"))
            .rfind(
                "mismatched model (parameter and buffer names, shapes, dtypes) across ranks: rank 1 differs",
                0),
        0u);
  }
}

// RAVE's spectral denominators are started before the autoencoder and read at the loss:
// models::batch_global_means_async gives every rank the global batch's means (not the mean of
// the two ranks' means: the slices are uneven), the same as the blocking call, and a collective
// issued while it runs completes in order.
TEST(GlobalMeans, StartedEarlyTheyAreTheGlobalBatchsMeansOnEveryRank) {
  ScratchDir out("global_means");
  const auto run = run_ranks(2, "global_means", out.path());
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const auto expected = global_input(5, 3, 41).mean(0);
  for (int r = 0; r < 2; ++r) {
    for (const char* name : {"means", "means_again", "blocking"}) {
      const auto got = load_result(out.path(), name, r);
      EXPECT_TRUE(torch::allclose(got, expected, 1e-6, 1e-6)) << name << " rank " << r << ": " << got;
    }
    EXPECT_TRUE(torch::equal(load_result(out.path(), "other", r), torch::full({2}, 2.0f))) << "rank " << r;
  }
  // The mean of per-rank means would differ: the test can tell them apart.
  const auto g = global_input(5, 3, 41);
  const auto mean_of_means = (g.narrow(0, 0, 2).mean(0) + g.narrow(0, 2, 3).mean(0)) / 2;
  EXPECT_FALSE(torch::allclose(mean_of_means, expected, 1e-4, 1e-4));
}

}  // namespace
}  // namespace rt::dist
