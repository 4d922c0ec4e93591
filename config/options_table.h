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
// The same table binds fields to keys declared elsewhere (the common schema's data.* and
// train.* keys): {&AudioDatasetOptions::n_signal, "data.n_signal"} reads without declaring, so
// every options struct a family builds — model, losses, data, training schedule — is filled
// by one mechanism, once per run. The keys every run reads whatever its family (the schedule,
// the run directory, the device, the profilers) have their tables in config/run_keys.h; no
// source outside config/ reads a key by name (scripts/check_key_lookups.py).
//
// Field types: bool, int64_t, double, std::string, std::vector<int64_t>,
// std::vector<std::vector<int64_t>>, std::vector<double>, and enums with an enum_names table
// (util/enum_names.h; their spellings become the key's choices).
#pragma once

#include <functional>
#include <initializer_list>
#include <optional>
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

// Keeps T out of template argument deduction (C++20's std::type_identity_t).
template <typename T>
struct NonDeduced {
  using type = T;
};

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
  // Reads a key's value for a field that holds it in another form (a comma-separated list of
  // names as enums, -1 as "keep the base's value"): called with the config, the key and the
  // field to set.
  template <typename T>
  using Convert = std::function<void(const Config&, const std::string& key, T* field)>;

  // One key bound to one field of Options. A binding either declares its key (the key is the
  // family's own: FamilyRegistration::keys) or reads a key declared elsewhere (the common
  // schema's data.*, train.lr …), whose type must be the field's.
  class Binding {
   public:
    // Declares `spec`'s key: its type follows the field, its default is the field's initialiser.
    template <typename T>
    Binding(T Options::*field, keys::Spec spec) : spec_(std::move(spec)), declares_(true) {
      spec_.type = options_detail::key_type<T>();
      spec_.default_value = options_detail::to_value(Options{}.*field);
      if constexpr (std::is_enum_v<T>) spec_.choices = enum_choices<T>();
      bind_direct(field);
    }
    // Reads `key`, declared elsewhere, into the field.
    template <typename T>
    Binding(T Options::*field, const char* key) : declares_(false) {
      spec_.key = key;
      bind_direct(field);
    }
    // Declares `spec`'s key as written (type and default included) and sets the field through
    // `convert`.
    template <typename T>
    Binding(T Options::*field, keys::Spec spec, typename options_detail::NonDeduced<Convert<T>>::type convert)
        : spec_(std::move(spec)), declares_(true) {
      bind_converted(field, std::move(convert));
    }
    // Reads `key`, declared elsewhere, through `convert`.
    template <typename T>
    Binding(T Options::*field, const char* key, typename options_detail::NonDeduced<Convert<T>>::type convert)
        : declares_(false) {
      spec_.key = key;
      bind_converted(field, std::move(convert));
    }

    // The declared spec; for a binding that reads a key declared elsewhere, only its key.
    const KeySpec& spec() const { return spec_; }
    const std::string& key() const { return spec_.key; }
    bool declares() const { return declares_; }
    void read(const Config& c, Options* o) const { read_(c, o); }
    // The field's value in `o`, as the key holds it; nullopt for a converted field.
    std::optional<ConfigValue> value(const Options& o) const {
      if (!value_) return std::nullopt;
      return value_(o);
    }

   private:
    template <typename T>
    void bind_direct(T Options::*field) {
      read_ = [field, key = spec_.key](const Config& c, Options* o) {
        o->*field = options_detail::read<T>(c, key);
      };
      value_ = [field](const Options& o) { return options_detail::to_value(o.*field); };
    }
    template <typename T>
    void bind_converted(T Options::*field, Convert<T> convert) {
      read_ = [field, key = spec_.key, convert = std::move(convert)](const Config& c, Options* o) {
        convert(c, key, &(o->*field));
      };
    }

    KeySpec spec_;
    bool declares_ = true;
    std::function<void(const Config&, Options*)> read_;
    std::function<ConfigValue(const Options&)> value_;
  };

  OptionsTable(std::initializer_list<Binding> bindings) : bindings_(bindings) {}

  const std::vector<Binding>& bindings() const { return bindings_; }

  // The specs of the keys this table declares, in table order, then `unbound` (keys the family
  // declares without a field): a FamilyRegistration's keys.
  std::vector<KeySpec> specs(const std::vector<KeySpec>& unbound = {}) const {
    std::vector<KeySpec> out;
    for (const auto& b : bindings_)
      if (b.declares()) out.push_back(b.spec());
    out.insert(out.end(), unbound.begin(), unbound.end());
    return out;
  }

  // `base` (by default Options{}) with every bound field read from `config`; fields without a
  // key keep base's value. Read once, when a run is set up: a field holds its key's value for
  // the whole run.
  Options from(const Config& config, Options base = Options{}) const {
    for (const auto& b : bindings_) b.read(config, &base);
    return base;
  }

 private:
  std::vector<Binding> bindings_;
};

// The keys of several tables, in order: a FamilyRegistration's keys when a family binds more
// than one options struct.
inline std::vector<KeySpec> concat_specs(std::initializer_list<std::vector<KeySpec>> lists) {
  std::vector<KeySpec> out;
  for (const auto& l : lists) out.insert(out.end(), l.begin(), l.end());
  return out;
}

}  // namespace rt
