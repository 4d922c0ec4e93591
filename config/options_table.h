// Binds config keys to the fields of a family's options struct, so that a key is declared once:
// its spec (name, range, help, CLI flag) sits next to the field it sets, its type follows the
// field's type and its default is the field's member initialiser.
//
//   const OptionsTable<rave::RaveOptions>& rave_model_keys() {
//     static const OptionsTable<rave::RaveOptions> table = {
//         {&rave::RaveOptions::capacity, keys::Field("model.capacity", "channel capacity").ge(1)},
//         {&rave::RaveOptions::version, keys::Field("model.version", "RAVE version")},  // an enum
//     };
//     return table;
//   }
//   rave::RaveOptions o = rave_model_keys().from(config);  // every bound field, read from config
//
// Field types: bool, int64_t, double, std::string, std::vector<int64_t>,
// std::vector<std::vector<int64_t>>, std::vector<double>, and enums with an enum_names table
// (util/enum_names.h; their spellings become the key's choices).
#pragma once

#include <functional>
#include <initializer_list>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "config/config.h"
#include "config/config_schema.h"

namespace rt {
namespace options_detail {

template <typename T>
constexpr KeyType key_type() {
  if constexpr (std::is_enum_v<T>) {
    return KeyType::Enum;
  } else if constexpr (std::is_same_v<T, bool>) {
    return KeyType::Bool;
  } else if constexpr (std::is_same_v<T, int64_t>) {
    return KeyType::Int;
  } else if constexpr (std::is_same_v<T, double>) {
    return KeyType::Float;
  } else if constexpr (std::is_same_v<T, std::string>) {
    return KeyType::String;
  } else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
    return KeyType::IntList;
  } else if constexpr (std::is_same_v<T, std::vector<std::vector<int64_t>>>) {
    return KeyType::IntListList;
  } else {
    static_assert(std::is_same_v<T, std::vector<double>>, "no config key type for this field type");
    return KeyType::FloatList;
  }
}

template <typename T>
ConfigValue to_value(const T& v) {
  if constexpr (std::is_enum_v<T>) {
    return std::string(enum_name(v));
  } else {
    return ConfigValue(v);
  }
}

template <typename T>
T read(const Config& c, const std::string& key) {
  if constexpr (std::is_enum_v<T>) {
    return c.get_enum<T>(key);
  } else if constexpr (std::is_same_v<T, bool>) {
    return c.get_bool(key);
  } else if constexpr (std::is_same_v<T, int64_t>) {
    return c.get_int(key);
  } else if constexpr (std::is_same_v<T, double>) {
    return c.get_float(key);
  } else if constexpr (std::is_same_v<T, std::string>) {
    return c.get_string(key);
  } else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
    return c.get_int_list(key);
  } else if constexpr (std::is_same_v<T, std::vector<std::vector<int64_t>>>) {
    return c.get_int_list_list(key);
  } else {
    return c.get_float_list(key);
  }
}

}  // namespace options_detail

template <typename Options>
class OptionsTable {
 public:
  // One key bound to one field of Options.
  class Binding {
   public:
    template <typename T>
    Binding(T Options::*field, keys::Spec spec) : spec_(std::move(spec)) {
      spec_.type = options_detail::key_type<T>();
      spec_.default_value = options_detail::to_value(Options{}.*field);
      if constexpr (std::is_enum_v<T>) spec_.choices = enum_choices<T>();
      read_ = [field, key = spec_.key](const Config& c, Options* o) {
        o->*field = options_detail::read<T>(c, key);
      };
      value_ = [field](const Options& o) { return options_detail::to_value(o.*field); };
    }
    const KeySpec& spec() const { return spec_; }
    void read(const Config& c, Options* o) const { read_(c, o); }
    // The field's value in `o`, as the key holds it.
    ConfigValue value(const Options& o) const { return value_(o); }

   private:
    KeySpec spec_;
    std::function<void(const Config&, Options*)> read_;
    std::function<ConfigValue(const Options&)> value_;
  };

  OptionsTable(std::initializer_list<Binding> bindings) : bindings_(bindings) {}

  const std::vector<Binding>& bindings() const { return bindings_; }

  // The bound keys' specs in table order, then `unbound` (keys the family reads from the
  // config itself): a FamilyRegistration's keys.
  std::vector<KeySpec> specs(const std::vector<KeySpec>& unbound = {}) const {
    std::vector<KeySpec> out;
    for (const auto& b : bindings_) out.push_back(b.spec());
    out.insert(out.end(), unbound.begin(), unbound.end());
    return out;
  }

  // Options{} with every bound field read from `config` (fields without a key keep their
  // initialiser).
  Options from(const Config& config) const {
    Options o;
    for (const auto& b : bindings_) b.read(config, &o);
    return o;
  }

 private:
  std::vector<Binding> bindings_;
};

}  // namespace rt
