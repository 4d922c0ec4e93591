#include "config/config_value.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "util/error.h"

namespace rt {
namespace {

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string format_float(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  // Whole numbers below 2^53 are exact in fixed notation: "40.0" rather than %g's "4e+01".
  if (v == std::trunc(v) && std::fabs(v) < 9007199254740992.0) {
    std::snprintf(buf, sizeof buf, "%.1f", v);
    return buf;
  }
  // Otherwise the shortest text that reads back to the same double, so to_toml() round-trips
  // exactly.
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  std::string s = buf;
  if (s.find_first_of(".en") == std::string::npos) s += ".0";  // TOML floats need . or e
  return s;
}

std::string quote(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        if (c < 0x20 || c == 0x7f) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

template <typename T, typename F>
std::string list_text(const std::vector<T>& v, F each) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + each(v[i]);
  return out + "]";
}

bool parse_int_text(const std::string& text, int64_t* out) {
  std::string t = text;
  if (!t.empty() && t[0] == '+') t.erase(0, 1);
  if (t.empty()) return false;
  auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), *out);
  return ec == std::errc() && p == t.data() + t.size();
}

bool parse_float_text(const std::string& text, double* out) {
  if (text.empty() || std::isspace(static_cast<unsigned char>(text[0]))) return false;
  char* end = nullptr;
  *out = std::strtod(text.c_str(), &end);
  return end == text.c_str() + text.size() && std::isfinite(*out);
}

// Lists on the command line are TOML arrays, brackets optional: "[4,4,2]" or "4,4,2".
bool parse_list_text(const std::string& text, KeyType type, ConfigValue* out) {
  std::string t = text;
  if (t.find('[') == std::string::npos) t = "[" + t + "]";
  try {
    toml::table tbl = toml::parse("v = " + t);
    const toml::node* n = tbl.get("v");
    return n != nullptr && toml_to_value(*n, type, out);
  } catch (const toml::parse_error&) {
    return false;
  }
}

}  // namespace

std::string value_text(const ConfigValue& v) {
  struct Visitor {
    std::string operator()(bool b) const { return b ? "true" : "false"; }
    std::string operator()(int64_t i) const { return std::to_string(i); }
    std::string operator()(double d) const { return format_float(d); }
    std::string operator()(const std::string& s) const { return quote(s); }
    std::string operator()(const std::vector<int64_t>& l) const {
      return list_text(l, [](int64_t i) { return std::to_string(i); });
    }
    std::string operator()(const std::vector<std::vector<int64_t>>& l) const {
      return list_text(l, [this](const std::vector<int64_t>& r) { return (*this)(r); });
    }
    std::string operator()(const std::vector<double>& l) const { return list_text(l, format_float); }
  };
  return std::visit(Visitor{}, v);
}

const char* value_kind(const ConfigValue& v) {
  switch (v.index()) {
    case 0:
      return "a bool";
    case 1:
      return "an integer";
    case 2:
      return "a float";
    case 3:
      return "a string";
    case 4:
      return "an integer list";
    case 5:
      return "a list of integer lists";
    default:
      return "a float list";
  }
}

bool coerce_value(const ConfigValue& v, KeyType type, ConfigValue* out) {
  switch (type) {
    case KeyType::Bool:
    case KeyType::Int:
    case KeyType::String:
    case KeyType::IntList:
    case KeyType::IntListList: {
      static const size_t index_of[] = {0, 1, 2, 3, 3, 4, 5, 6};
      if (v.index() != index_of[static_cast<int>(type)]) return false;
      *out = v;
      return true;
    }
    case KeyType::Enum:
      if (!std::holds_alternative<std::string>(v)) return false;
      *out = v;
      return true;
    case KeyType::Float:
      if (auto* i = std::get_if<int64_t>(&v)) {
        *out = static_cast<double>(*i);
      } else if (std::holds_alternative<double>(v)) {
        *out = v;
      } else {
        return false;
      }
      return true;
    case KeyType::FloatList:
      if (auto* l = std::get_if<std::vector<int64_t>>(&v)) {
        *out = std::vector<double>(l->begin(), l->end());
      } else if (std::holds_alternative<std::vector<double>>(v)) {
        *out = v;
      } else {
        return false;
      }
      return true;
  }
  return false;
}

bool parse_bool_text(const std::string& text, bool* out) {
  const std::string t = lower(text);
  if (t == "true" || t == "1" || t == "yes" || t == "on") {
    *out = true;
    return true;
  }
  if (t == "false" || t == "0" || t == "no" || t == "off") {
    *out = false;
    return true;
  }
  return false;
}

bool parse_value_text(const std::string& text, KeyType type, ConfigValue* out) {
  switch (type) {
    case KeyType::Bool: {
      bool b = false;
      if (!parse_bool_text(text, &b)) return false;
      *out = b;
      return true;
    }
    case KeyType::Int: {
      int64_t i = 0;
      if (!parse_int_text(text, &i)) return false;
      *out = i;
      return true;
    }
    case KeyType::Float: {
      double d = 0;
      if (!parse_float_text(text, &d)) return false;
      *out = d;
      return true;
    }
    case KeyType::String:
    case KeyType::Enum: {
      std::string s = text;
      if (s.size() >= 2 && (s.front() == '"' || s.front() == '\'') && s.back() == s.front()) {
        s = s.substr(1, s.size() - 2);
      }
      *out = s;
      return true;
    }
    case KeyType::IntList:
    case KeyType::IntListList:
    case KeyType::FloatList:
      return parse_list_text(text, type, out);
  }
  return false;
}

bool toml_to_value(const toml::node& node, KeyType type, ConfigValue* out) {
  auto int_list = [](const toml::node& n, std::vector<int64_t>* v) {
    const toml::array* a = n.as_array();
    if (a == nullptr) return false;
    for (const auto& e : *a) {
      if (!e.is_integer()) return false;
      v->push_back(e.as_integer()->get());
    }
    return true;
  };
  switch (type) {
    case KeyType::Bool:
      if (!node.is_boolean()) return false;
      *out = node.as_boolean()->get();
      return true;
    case KeyType::Int:
      if (!node.is_integer()) return false;
      *out = node.as_integer()->get();
      return true;
    case KeyType::Float:
      if (node.is_integer()) {
        *out = static_cast<double>(node.as_integer()->get());
      } else if (node.is_floating_point()) {
        *out = node.as_floating_point()->get();
      } else {
        return false;
      }
      return true;
    case KeyType::String:
    case KeyType::Enum:
      if (!node.is_string()) return false;
      *out = node.as_string()->get();
      return true;
    case KeyType::IntList: {
      std::vector<int64_t> v;
      if (!int_list(node, &v)) return false;
      *out = std::move(v);
      return true;
    }
    case KeyType::IntListList: {
      const toml::array* a = node.as_array();
      if (a == nullptr) return false;
      std::vector<std::vector<int64_t>> v;
      for (const auto& row : *a) {
        v.emplace_back();
        if (!int_list(row, &v.back())) return false;
      }
      *out = std::move(v);
      return true;
    }
    case KeyType::FloatList: {
      const toml::array* a = node.as_array();
      if (a == nullptr) return false;
      std::vector<double> v;
      for (const auto& e : *a) {
        if (e.is_integer()) {
          v.push_back(static_cast<double>(e.as_integer()->get()));
        } else if (e.is_floating_point()) {
          v.push_back(e.as_floating_point()->get());
        } else {
          return false;
        }
      }
      *out = std::move(v);
      return true;
    }
  }
  return false;
}

std::string toml_node_text(const toml::node& node) {
  if (const auto* s = node.as_string()) return quote(s->get());
  std::ostringstream os;
  node.visit([&os](auto&& n) { os << n; });
  return os.str();
}

std::string did_you_mean(const std::string& name, const std::vector<std::string>& candidates) {
  const std::string best = closest_match(name, candidates);
  return best.empty() ? "" : "; did you mean '" + best + "'?";
}

}  // namespace rt
