#include "config/config.h"

#include <gtest/gtest.h>

#include <string>

#include "config/config_value.h"
#include "data/data_kind.h"
#include "distributed/process_group.h"
#include "families/ssm/ssm_family.h"
#include "models/rave/options.h"
#include "models/ssm/decoders.h"
#include "support/expect.h"
#include "support/test_support.h"
#include "util/atomic_file.h"
#include "util/error.h"

namespace rt {
namespace {

using testing::error_of;

std::string load_error(const std::string& toml) {
  return error_of([&] {
    Config c;
    c.merge_toml_string(toml, "bad.toml");
    c.finalize();
  });
}

Config load(const std::string& toml) {
  Config c;
  c.merge_toml_string(toml, "test.toml");
  c.finalize();
  return c;
}

TEST(ConfigDefaults, MatchTheKeyList) {
  Config c;
  EXPECT_EQ(c.get_string("model.family"), "rave");
  EXPECT_EQ(c.get_int("model.capacity"), 96);
  EXPECT_EQ(c.get_int_list("model.ratios"), (std::vector<int64_t>{4, 4, 4, 2}));
  EXPECT_EQ(c.get_int_list_list("model.dilations"),
            (std::vector<std::vector<int64_t>>{{1, 3, 9}, {1, 3, 9}, {1, 3, 9}, {1, 3}}));
  EXPECT_DOUBLE_EQ(c.get_float("model.dropout"), 0.05);
  EXPECT_EQ(c.get_int("data.n_signal"), 131072);
  EXPECT_DOUBLE_EQ(c.get_float("train.lr"), 1e-3);
  EXPECT_EQ(c.get_string("train.out_path"), "runs");
  EXPECT_FALSE(c.get_bool("profiling.enabled"));
  EXPECT_EQ(c.get_int("profiling.skip_first"), 10);
  EXPECT_EQ(c.get_string("profiling.sort_by"), "self_cpu_time_total");
  EXPECT_FALSE(c.was_set("train.lr"));
  EXPECT_EQ(c.origin("train.lr"), "default");
}

TEST(ConfigFile, ValuesOverrideDefaultsAndIntegersAreAcceptedAsFloats) {
  const Config c = load(
      "[train]\nlr = 1\nbatch = 4\n[model]\nratios = [2, 2]\ndilations = [[1, 3]]\nactivation = \"snake\"\n");
  EXPECT_DOUBLE_EQ(c.get_float("train.lr"), 1.0);
  EXPECT_EQ(c.get_int("train.batch"), 4);
  EXPECT_EQ(c.get_int_list("model.ratios"), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(c.get_string("model.activation"), "snake");
  EXPECT_TRUE(c.was_set("train.lr"));
  EXPECT_FALSE(c.was_set("train.seed"));
  EXPECT_HAS(c.origin("train.batch"), "test.toml:3");
}

TEST(ConfigFile, UnknownKeyNamesFileKeyAndClosestKey) {
  const std::string msg = load_error("[train]\nlrr = 1e-4\n");
  EXPECT_HAS(msg, "bad.toml:2");
  EXPECT_HAS(msg, "'train.lrr'");
  EXPECT_HAS(msg, "did you mean 'train.lr'?");
}

TEST(ConfigFile, KeyInTheWrongSectionSuggestsItsSection) {
  const std::string msg = load_error("[train]\nn_signal = 4096\n");
  EXPECT_HAS(msg, "'train.n_signal'");
  EXPECT_HAS(msg, "did you mean 'data.n_signal'?");
}

TEST(ConfigFile, UnknownSectionIsAnErrorWithSuggestion) {
  const std::string msg = load_error("[trian]\nlr = 1e-4\n");
  EXPECT_HAS(msg, "bad.toml");
  EXPECT_HAS(msg, "unknown section [trian]");
  EXPECT_HAS(msg, "did you mean [train]?");
}

TEST(ConfigFile, KeyOutsideASectionSuggestsTheSectionKey) {
  const std::string msg = load_error("lr = 1e-4\n");
  EXPECT_HAS(msg, "'lr'");
  EXPECT_HAS(msg, "did you mean 'train.lr'?");
}

TEST(ConfigFile, WrongTypeNamesKeyValueAndExpectedType) {
  std::string msg = load_error("[train]\nmax_steps = \"many\"\n");
  EXPECT_HAS(msg, "bad.toml:2");
  EXPECT_HAS(msg, "train.max_steps");
  EXPECT_HAS(msg, "\"many\"");
  EXPECT_HAS(msg, "expected an integer >= 1");
  EXPECT_HAS(msg, "got string");
  // A float where an integer is expected is refused (the reverse is accepted).
  msg = load_error("[train]\nbatch = 1.5\n");
  EXPECT_HAS(msg, "train.batch");
  EXPECT_HAS(msg, "1.5");
  EXPECT_HAS(msg, "integer");
  msg = load_error("[model]\ndilations = [1, 3, 9]\n");
  EXPECT_HAS(msg, "model.dilations");
  EXPECT_HAS(msg, "list of integer lists");
}

TEST(ConfigFile, BadEnumNamesValueAndChoices) {
  const std::string msg = load_error("[train]\ndevice = \"cuda0\"\n");
  EXPECT_HAS(msg, "train.device");
  EXPECT_HAS(msg, "\"cuda0\"");
  EXPECT_HAS(msg, "one of auto, cpu, cuda");
  EXPECT_HAS(msg, "did you mean 'cuda'?");
}

TEST(ConfigFile, OutOfRangeNamesValueAndWhatIsAllowed) {
  std::string msg = load_error("[model]\nn_band = 3\n");
  EXPECT_HAS(msg, "model.n_band = 3");
  EXPECT_HAS(msg, "one of 1, 2, 4, 8, 16, 32, 64");
  msg = load_error("[train]\nbatch = 0\n");
  EXPECT_HAS(msg, "train.batch = 0");
  EXPECT_HAS(msg, ">= 1");
  msg = load_error("[model]\ndropout = 1.0\n");
  EXPECT_HAS(msg, "model.dropout");
  EXPECT_HAS(msg, "in [0, 1)");
  msg = load_error("[model]\nkernel_size = 4\n");
  EXPECT_HAS(msg, "an odd integer");
  msg = load_error("[model]\nstate_dim = 7\n");
  EXPECT_HAS(msg, "an even integer >= 2");
  msg = load_error("[model]\nratios = [4, 0]\n");
  EXPECT_HAS(msg, "model.ratios = [4, 0]");
  EXPECT_HAS(msg, ">= 1");
  msg = load_error("[model]\nratios = []\n");
  EXPECT_HAS(msg, "model.ratios = []");
  EXPECT_HAS(msg, "a non-empty list of integers >= 1");
  msg = load_error("[model]\nmrd_n_ffts = [2048, 1022]\n");
  EXPECT_HAS(msg, "integers >= 16, multiples of 4");
}

TEST(ConfigFile, ParseErrorCarriesFileLineAndColumn) {
  const std::string msg = load_error("[train]\nlr = 1e-4\nbatch = = 3\n");
  EXPECT_HAS(msg, "bad.toml:3:");
  EXPECT_HAS(msg, "TOML parse error");
}

TEST(ConfigFile, MissingFileIsNamed) {
  testing::ScratchDir dir;
  const std::string msg = error_of([&] { load_config_file(dir / "nope.toml"); });
  EXPECT_HAS(msg, "nope.toml");
}

TEST(ConfigGetters, UnknownKeyOrWrongTypeIsAnError) {
  Config c;
  EXPECT_HAS(error_of([&] { c.get_int("train.lrr"); }), "train.lr");
  EXPECT_HAS(error_of([&] { c.get_int("train.lr"); }), "float");
  EXPECT_THROW(c.get_float("train.batch"), Error);
  EXPECT_THROW(c.get_bool("model.ratios"), Error);
  EXPECT_EQ(c.get_string("train.device"), "auto");  // enums read as strings
}

TEST(ConfigSet, ParsesTextPerType) {
  Config c;
  for (const char* t : {"true", "True", "1", "yes", "on", "ON"}) {
    c.set("profiling.gzip", "false", "t");
    c.set("profiling.gzip", t, "t");
    EXPECT_TRUE(c.get_bool("profiling.gzip")) << t;
  }
  for (const char* f : {"false", "False", "0", "no", "off"}) {
    c.set("profiling.gzip", "true", "t");
    c.set("profiling.gzip", f, "t");
    EXPECT_FALSE(c.get_bool("profiling.gzip")) << f;
  }
  c.set("train.lr", "1e-4", "t");
  EXPECT_DOUBLE_EQ(c.get_float("train.lr"), 1e-4);
  c.set("train.seed", "-7", "t");
  EXPECT_EQ(c.get_int("train.seed"), -7);
  c.set("model.ratios", "[4, 2]", "t");
  EXPECT_EQ(c.get_int_list("model.ratios"), (std::vector<int64_t>{4, 2}));
  c.set("model.ratios", "8,8", "t");
  EXPECT_EQ(c.get_int_list("model.ratios"), (std::vector<int64_t>{8, 8}));
  c.set("model.dilations", "[[1],[1,3]]", "t");
  EXPECT_EQ(c.get_int_list_list("model.dilations"), (std::vector<std::vector<int64_t>>{{1}, {1, 3}}));
  c.set("train.name", "\"quoted\"", "t");
  EXPECT_EQ(c.get_string("train.name"), "quoted");

  std::string msg = error_of([&] { c.set("profiling.gzip", "maybe", "--profiling.gzip"); });
  EXPECT_HAS(msg, "--profiling.gzip");
  EXPECT_HAS(msg, "'maybe'");
  EXPECT_HAS(msg, "true or false");
  msg = error_of([&] { c.set("train.batch", "8x", "--batch"); });
  EXPECT_HAS(msg, "train.batch = '8x'");
  msg = error_of([&] { c.set("model.ratios", "[4, a]", "--override"); });
  EXPECT_HAS(msg, "model.ratios");
  EXPECT_HAS(msg, "list of integers");
  msg = error_of([&] { c.set("train.lr", "-1", "--override"); });
  EXPECT_HAS(msg, "train.lr = -1");
  EXPECT_HAS(msg, "> 0");
}

TEST(ConfigAliases, RenamesMapOntoCanonicalKeys) {
  const Config c = load(
      "[profiling]\nwait_steps = 2\nwarmup_steps = 3\nactive_steps = 4\nrepeat_cycles = 5\n"
      "trace_memory = true\nprofile_every_n_steps = 50\nlog_dir = \"logs/p\"\n");
  EXPECT_EQ(c.get_int("profiling.wait"), 2);
  EXPECT_EQ(c.get_int("profiling.warmup"), 3);
  EXPECT_EQ(c.get_int("profiling.active"), 4);
  EXPECT_EQ(c.get_int("profiling.repeat"), 5);
  EXPECT_TRUE(c.get_bool("profiling.profile_memory"));
  EXPECT_EQ(c.get_int("profiling.memory_every"), 50);
  EXPECT_EQ(c.get_string("profiling.output_dir"), "logs/p");
  EXPECT_EQ(c.get_int("profiling.wait_steps"), 2);  // aliases read too
  // The train.warmup_steps key is not the profiling alias.
  EXPECT_EQ(c.get_int("train.warmup_steps"), 0);
}

TEST(ConfigAliases, StartAndEndStepSetSkipFirstAndActiveInAnyOrder) {
  Config c = load("[profiling]\nend_step = 20\nstart_step = 10\n");
  EXPECT_EQ(c.get_int("profiling.skip_first"), 10);
  EXPECT_EQ(c.get_int("profiling.active"), 10);
  EXPECT_TRUE(c.was_set("profiling.active"));
  // A later start_step recomputes active; a later explicit active wins over end_step.
  c.set("profiling.start_step", "15", "--profiling.start_step");
  c.finalize();
  EXPECT_EQ(c.get_int("profiling.active"), 5);
  c.set("profiling.active", "2", "--profiling.active");
  c.finalize();
  EXPECT_EQ(c.get_int("profiling.active"), 2);

  std::string msg = load_error("[profiling]\nend_step = 20\n");
  EXPECT_HAS(msg, "profiling.end_step = 20");
  EXPECT_HAS(msg, "start_step");
  msg = load_error("[profiling]\nstart_step = 20\nend_step = 20\n");
  EXPECT_HAS(msg, "profiling.end_step = 20 must be greater than profiling.start_step = 20");
}

TEST(ConfigAliases, ScheduleEveryNStepsIsTheCycleLength) {
  Config c = load("[profiling]\nschedule_every_n_steps = 50\n");
  // Defaults warmup 1, active 3: wait = 50 - 1 - 3.
  EXPECT_EQ(c.get_int("profiling.wait"), 46);
  c = load("[profiling]\nschedule_every_n_steps = 25\nwarmup = 2\nactive = 5\n");
  EXPECT_EQ(c.get_int("profiling.wait"), 18);
  c.set("profiling.active", "10", "--profiling.active");
  c.finalize();
  EXPECT_EQ(c.get_int("profiling.wait"), 13);
  const std::string msg = load_error("[profiling]\nschedule_every_n_steps = 3\n");
  EXPECT_HAS(msg, "profiling.schedule_every_n_steps = 3");
  EXPECT_HAS(msg, "at least 4");
}

TEST(ConfigToToml, RoundTripsEveryKey) {
  Config c;
  c.set("train.lr", "0.00013", "t");
  c.set("train.beta_start", "1e-7", "t");
  c.set("data.phase_mangle_p", "0.1", "t");
  c.set("train.name", "with \"quotes\" and \\ backslash", "t");
  c.set("model.dilations", "[[1,3,9],[1]]", "t");
  c.set("model.ratios", "[4, 2]", "t");
  c.set("model.periods", "[]", "t");
  c.set("profiling.enabled", "true", "t");
  c.set("train.seed", "-3", "t");
  c.set("train.device", "cpu", "t");
  c.finalize();
  ASSERT_NE(c, Config());
  for (bool with_help : {false, true}) {
    const std::string text = c.to_toml(with_help);
    EXPECT_HAS(text, "[profiling]");
    EXPECT_HAS(text, "dilations = [[1, 3, 9], [1]]");
    Config back;
    back.merge_toml_string(text, "roundtrip.toml");
    back.finalize();
    EXPECT_EQ(back, c) << text;
    EXPECT_DOUBLE_EQ(back.get_float("train.lr"), 0.00013);
    EXPECT_EQ(back.get_string("train.name"), "with \"quotes\" and \\ backslash");
  }
  // Every common key and every key of the chosen family appears once, in its section.
  const std::string text = c.to_toml();
  for (const auto& spec : config_schema()) {
    if (!spec.owner.empty() && spec.owner != "rave") continue;
    const size_t begin = text.find("[" + spec.section() + "]\n");
    ASSERT_NE(begin, std::string::npos) << spec.key;
    const std::string section = text.substr(begin, text.find("\n[", begin) - begin);
    const std::string line = "\n" + spec.name() + " = ";
    EXPECT_HAS(section, line);
    EXPECT_EQ(section.find(line), section.rfind(line)) << spec.key;
  }
}

TEST(ConfigValueText, WholeFloatsAreFixedAndOthersTheShortestExactText) {
  EXPECT_EQ(value_text(40.0), "40.0");
  EXPECT_EQ(value_text(-3.0), "-3.0");
  EXPECT_EQ(value_text(0.00013), "0.00013");
  EXPECT_EQ(value_text(1e-7), "1e-07");
  EXPECT_EQ(value_text(1e300), "1e+300");
  EXPECT_EQ(value_text(std::vector<double>{20.0, 0.5}), "[20.0, 0.5]");
}

TEST(ConfigFamilies, KeysOfAnotherFamilyAreRefusedNamingBothFamilies) {
  std::string msg = load_error("[model]\nstate_dim = 32\n");
  EXPECT_HAS(msg, "bad.toml:2: model.state_dim belongs to model.family = ssm, but this config trains rave");
  EXPECT_HAS(msg, "set model.family = ssm");
  msg = load_error("[model]\nfamily = \"ssm\"\n[train]\nphase_1_duration = 10\n");
  EXPECT_HAS(msg, "train.phase_1_duration belongs to model.family = rave, but this config trains ssm");
  // Every family's keys are accepted while merging: the family may come last.
  const Config c = load("[model]\nstate_dim = 32\nscan = \"fused\"\nfamily = \"ssm\"\n");
  EXPECT_EQ(c.get_int("model.state_dim"), 32);
}

TEST(ConfigFamilies, ToTomlHoldsTheCommonKeysAndTheChosenFamilysOnly) {
  const std::string rave = Config().to_toml();
  EXPECT_HAS(rave, "\ncapacity = 96\n");
  EXPECT_HAS(rave, "\nphase_1_duration = ");
  EXPECT_EQ(rave.find("state_dim"), std::string::npos) << rave;
  EXPECT_EQ(rave.find("weight_decay"), std::string::npos) << rave;
  const std::string ssm = load("[model]\nfamily = \"ssm\"\n").to_toml();
  EXPECT_HAS(ssm, "\nstate_dim = 64\n");
  EXPECT_HAS(ssm, "\nweight_decay = 0.01\n");
  EXPECT_HAS(ssm, "\nbatch = 8\n");
  EXPECT_EQ(ssm.find("capacity"), std::string::npos) << ssm;
}

TEST(ConfigFamilies, CrossKeyChecksOfTheChosenFamilyRunAtFinalize) {
  std::string msg = load_error("[model]\nfamily = \"ssm\"\ndt_min = 0.5\ndt_max = 0.1\n");
  EXPECT_HAS(msg, "bad.toml:4: model.dt_max = 0.1");
  EXPECT_HAS(msg, "greater than model.dt_min = 0.5 (bad.toml:3)");
  msg = load_error("[model]\nfamily = \"ssm\"\nvariant = \"foundational\"\nd_model = 8\ncontext_dim = 8\n");
  EXPECT_HAS(msg, "model.context_dim = 8 must be < model.d_model = 8");
  msg = load_error("[model]\nratios = [4, 2]\n");
  EXPECT_HAS(msg, "model.dilations: needs one list per ratio (2) or a single list, got 4");
}

TEST(ConfigGetters, EnumKeysReadAsTheirEnums) {
  const Config c = load("[model]\nfamily = \"ssm\"\nscan = \"fused\"\n[data]\nkind = \"neural\"\n");
  EXPECT_EQ(c.get_enum<ssm::ScanKind>("model.scan"), ssm::ScanKind::kFused);
  EXPECT_EQ(c.get_enum<ssm::SsmVariant>("model.variant"), ssm::SsmVariant::kS5Maze);
  EXPECT_EQ(c.get_enum<DataKind>("data.kind"), DataKind::kNeural);
  EXPECT_EQ(c.get_enum<LrSchedule>("train.lr_schedule"), LrSchedule::kConstant);
  // The choices of an enum key are its enum's spellings. The common keys spell theirs out (the
  // config library sits below data and distributed): they must stay the enums' names.
  EXPECT_EQ(find_key_spec("model.version")->choices, enum_choices<rave::RaveVersion>());
  EXPECT_EQ(find_key_spec("data.kind")->choices, enum_choices<DataKind>());
  EXPECT_EQ(find_key_spec("train.distributed.backend")->choices, enum_choices<dist::Backend>());
  EXPECT_EQ(find_key_spec("train.distributed.wait")->choices, enum_choices<dist::WaitPolicy>());
  EXPECT_EQ(find_key_spec("model.discriminator")->choices,
            (std::vector<std::string>{"none", "period_scale", "descript", "scale_spectral"}));
  // Reading an enum key as an enum whose spellings it does not hold names the key.
  EXPECT_HAS(error_of([&] { c.get_enum<rave::RaveVersion>("model.scan"); }),
             "model.scan = \"fused\" is not allowed; expected one of v1, v2, v3");
}

TEST(ConfigSchema, EveryDefaultIsOfItsTypeAndInItsRange) {
  for (const auto& spec : config_schema()) {
    ConfigValue v;
    ASSERT_TRUE(coerce_value(spec.default_value, spec.type, &v)) << spec.key;
    EXPECT_EQ(spec.check_range(v), "") << spec.key << " = " << value_text(v) << ", " << spec.allowed_text();
  }
}

TEST(ArchitectureSignature, HoldsTheArchitectureKeysOfTheChosenFamilyOnly) {
  const std::string base = "[model]\nfamily = \"ssm\"\n";
  const std::string sig = load(base).architecture_signature();
  EXPECT_HAS(sig, "model.d_model = 64; ");
  EXPECT_HAS(sig, "model.variant = \"s5_maze\"; ");
  EXPECT_EQ(sig.find("model.capacity"), std::string::npos) << sig;  // another family's key
  EXPECT_EQ(sig.find("train."), std::string::npos) << sig;
  // The scan is an implementation choice: a checkpoint resumes under another one.
  EXPECT_EQ(load(base + "scan = \"fused\"\n").architecture_signature(), sig);
  EXPECT_EQ(load(base + "scan = \"sequential\"\n").architecture_signature(), sig);
  EXPECT_NE(load(base + "d_model = 32\n").architecture_signature(), sig);
  // RAVE: the loss scales are not part of the model, the capacity is.
  const std::string rave = Config().architecture_signature();
  EXPECT_EQ(load("[model]\nstft_scales = [1024, 512]\n").architecture_signature(), rave);
  EXPECT_NE(load("[model]\ncapacity = 8\n").architecture_signature(), rave);
}

}  // namespace
}  // namespace rt

namespace rt {
namespace {

// A checkpoint written before an architecture key existed (its signature lacks the key) still
// resumes and exports when this build's value is the key's default; any other value is another
// model.
TEST(ArchitectureSignature, KeysAddedLaterMatchAtTheirDefault) {
  Config c;
  c.set("model.family", "rave", "test");
  c.finalize();
  const std::string now = c.architecture_signature();
  ASSERT_NE(now.find("model.spectral_capacity = 32; "), std::string::npos) << now;
  std::string before = now;
  for (const char* key : {"model.spectral_scales", "model.spectral_capacity", "model.encoder",
                          "model.noise_augmentation", "model.noise_hidden"}) {
    const size_t at = before.find(std::string(key) + " = ");
    ASSERT_NE(at, std::string::npos) << key;
    before.erase(at, before.find("; ", at) + 2 - at);
  }
  EXPECT_TRUE(signatures_match(before, now));
  EXPECT_TRUE(signatures_match(now, before));
  Config other = c;
  other.set("model.spectral_capacity", "16", "test");
  EXPECT_FALSE(signatures_match(before, other.architecture_signature()));
  other = c;
  other.set("model.capacity", "8", "test");
  EXPECT_FALSE(signatures_match(now, other.architecture_signature()));
}

}  // namespace
}  // namespace rt
