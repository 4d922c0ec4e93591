// What a database holds: RAVE audio or neural recordings (config key data.kind, preprocess --kind).
#pragma once

#include "util/enum_names.h"

namespace rt {

enum class DataKind { kAudio, kNeural, kMaxValue = kNeural };
constexpr EnumNames<DataKind> enum_names(DataKind) { return {{"audio", "neural"}}; }

}  // namespace rt
