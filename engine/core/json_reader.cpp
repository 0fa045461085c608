// SPDX-License-Identifier: Apache-2.0
// The JSON reader (json_reader.h): nlohmann-json's SAX parser and JsonTreeBuilder, a handler
// that builds the JsonValue tree with a hash set of keys per open object, a depth cap and every
// allocation charged to the caller's ReaderBudget (Note [Linear JSON]).
#include "engine/core/json_reader.h"

#include <algorithm>
#include <charconv>
#include <limits>
#include <unordered_set>

#include <nlohmann/json.hpp>

#include "engine/core/error.h"
#include "engine/core/reader_budget.h"

namespace anvil {
namespace {

using Json = nlohmann::json;

// What a message quotes of a bad token or of nlohmann's own message.
constexpr std::size_t kMessageQuote = 240;

// Appends `s` to `out` with JSON escapes for '"', '\\' and control bytes (so a message stays
// on one line), stopping once `out` reaches `limit` bytes.
void append_escaped(std::string& out, std::string_view s, std::size_t limit) {
  constexpr const char* kHex = "0123456789abcdef";
  for (const char c : s) {
    if (out.size() >= limit) return;
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (u < 0x20) {
      out += "\\u00";
      out += kHex[u >> 4];
      out += kHex[u & 15];
    } else {
      out += c;
    }
  }
}

// The longest prefix of `s` of at most `max` bytes that does not end inside a UTF-8 sequence.
std::string_view utf8_prefix(std::string_view s, std::size_t max) {
  if (s.size() <= max) return s;
  std::size_t cut = max;
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;
  return s.substr(0, cut);
}

template <typename Number>
void append_number(std::string& out, Number n) {
  char buf[40];
  const auto r = std::to_chars(buf, buf + sizeof buf, n);
  out.append(buf, r.ptr);
}

// Recursion: at most JsonLimits::max_depth deep, and it stops once `out` reaches `limit`.
void append_preview(std::string& out, const JsonValue& v, std::size_t limit) {
  if (out.size() >= limit) return;
  std::int64_t i = 0;
  std::uint64_t u = 0;
  switch (v.kind()) {
    case JsonValue::Kind::null:
      out += "null";
      return;
    case JsonValue::Kind::boolean:
      out += v.boolean() ? "true" : "false";
      return;
    case JsonValue::Kind::string:
      out += '"';
      append_escaped(out, v.str(), limit);
      out += '"';
      return;
    case JsonValue::Kind::floating:
      append_number(out, v.number());
      return;
    case JsonValue::Kind::integer:
    case JsonValue::Kind::unsigned_integer:
      if (v.as_int(i))
        append_number(out, i);
      else if (v.as_uint(u))
        append_number(out, u);
      return;
    case JsonValue::Kind::array:
    case JsonValue::Kind::object:
      break;
  }
  const bool object = v.is_object();
  out += object ? '{' : '[';
  for (std::size_t k = 0; k < v.size() && out.size() < limit; ++k) {
    if (k > 0) out += ", ";
    if (object) {
      out += '"';
      append_escaped(out, v.keys()[k], limit);
      out += "\": ";
    }
    append_preview(out, v.items()[k], limit);
  }
  out += object ? '}' : ']';
}

}  // namespace

// ---- JsonValue ------------------------------------------------------------------------------

const char* JsonValue::type_name() const {
  switch (kind_) {
    case Kind::null:
      return "null";
    case Kind::boolean:
      return "a boolean";
    case Kind::integer:
    case Kind::unsigned_integer:
      return "an integer";
    case Kind::floating:
      return "a float";
    case Kind::string:
      return "a string";
    case Kind::array:
      return "an array";
    case Kind::object:
      return "an object";
  }
  return "?";
}

bool JsonValue::as_uint(std::uint64_t& out) const {
  if (kind_ == Kind::unsigned_integer) {
    out = number_.u;
    return true;
  }
  if (kind_ == Kind::integer && number_.i >= 0) {
    out = static_cast<std::uint64_t>(number_.i);
    return true;
  }
  return false;
}

bool JsonValue::as_int(std::int64_t& out) const {
  if (kind_ == Kind::integer) {
    out = number_.i;
    return true;
  }
  if (kind_ == Kind::unsigned_integer &&
      number_.u <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
    out = static_cast<std::int64_t>(number_.u);
    return true;
  }
  return false;
}

double JsonValue::number() const {
  switch (kind_) {
    case Kind::integer:
      return static_cast<double>(number_.i);
    case Kind::unsigned_integer:
      return static_cast<double>(number_.u);
    case Kind::floating:
      return number_.d;
    default:
      return 0.0;
  }
}

const JsonValue* JsonValue::find(std::string_view key) const {
  for (std::size_t i = 0; i < keys_.size(); ++i)
    if (keys_[i] == key) return &items_[i];
  return nullptr;
}

std::string JsonValue::preview(std::size_t max_chars) const {
  std::string out;
  append_preview(out, *this, max_chars);
  if (out.size() >= max_chars) {
    out.resize(utf8_prefix(out, max_chars).size());
    out += "...";
  }
  return out;
}

std::string json_prefix(std::string_view s, std::size_t max_bytes) {
  const std::string_view head = utf8_prefix(s, max_bytes);
  std::string out = "'";
  append_escaped(out, head, std::numeric_limits<std::size_t>::max());
  out += '\'';
  if (head.size() < s.size()) {
    out += "... (";
    out += std::to_string(s.size());
    out += " bytes)";
  }
  return out;
}

// ---- the SAX handler --------------------------------------------------------------------------

// Builds the tree for nlohmann's sax_parse (its SAX interface: one call per value, key and
// bracket; `false` would stop the parse, but every refusal here throws its own message).
class JsonTreeBuilder {
 public:
  JsonTreeBuilder(const std::string& name, const char* where, const char* malformed,
                  ReaderBudget& budget, const JsonLimits& limits)
      : name_(name), where_(where), malformed_(malformed), budget_(budget), limits_(limits) {}

  JsonValue& root() { return root_; }

  bool null() {
    add(JsonValue::Kind::null);
    return true;
  }
  bool boolean(bool b) {
    add(JsonValue::Kind::boolean).boolean_ = b;
    return true;
  }
  bool number_integer(Json::number_integer_t n) {
    add(JsonValue::Kind::integer).number_.i = n;
    return true;
  }
  bool number_unsigned(Json::number_unsigned_t n) {
    add(JsonValue::Kind::unsigned_integer).number_.u = n;
    return true;
  }
  bool number_float(Json::number_float_t n, const Json::string_t&) {
    add(JsonValue::Kind::floating).number_.d = n;
    return true;
  }
  bool string(Json::string_t& s) {
    budget_.charge(s.size(), name_, "a JSON string");
    add(JsonValue::Kind::string).text_ = std::move(s);
    return true;
  }
  bool binary(Json::binary_t&) { fail(where_, name_, ": binary values are not JSON"); }

  bool start_object(std::size_t) { return open(JsonValue::Kind::object); }
  bool start_array(std::size_t) { return open(JsonValue::Kind::array); }
  bool end_object() { return close(); }
  bool end_array() { return close(); }

  // Stores the key now (its value follows) and refuses one the object already has: O(1) per
  // key through the level's hash set of indices into keys_ (Note [Linear JSON]).
  bool key(Json::string_t& k) {
    Level& level = levels_.back();
    JsonValue& object = *level.value;
    budget_.charge(sizeof(std::string) + k.size() + kKeySetEntryBytes, name_, "a JSON key");
    grow(object.keys_);
    object.keys_.push_back(std::move(k));
    if (!level.keys.insert(object.keys_.size() - 1).second)
      fail(where_, name_, ": duplicate key ", json_prefix(object.keys_.back()), " in ", location());
    level.key_set_bytes += kKeySetEntryBytes;
    return true;
  }

  bool parse_error(std::size_t, const std::string& last_token,
                   const nlohmann::detail::exception& e) {
    // nlohmann's message (with the line and column) quotes the whole last token, which may be
    // megabytes: cut both.
    const std::string what = e.what();
    fail(where_, name_, ": ", malformed_, ": ",
         std::string(utf8_prefix(what.substr(0, what.find("; last read:")), kMessageQuote)),
         " (last read: ", json_prefix(last_token), ")");
  }

 private:
  // What one key costs in a level's hash set while its object is open: the node (index + next
  // pointer, rounded up by malloc) and a bucket pointer.
  static constexpr std::uint64_t kKeySetEntryBytes = 40;

  // Hash and equality of key indices, looking the keys up in the object (keys_ may reallocate
  // as it grows; an index stays valid).
  struct KeyHash {
    const std::vector<std::string>* keys;
    std::size_t operator()(std::size_t i) const { return std::hash<std::string>{}((*keys)[i]); }
  };
  struct KeyEqual {
    const std::vector<std::string>* keys;
    bool operator()(std::size_t a, std::size_t b) const { return (*keys)[a] == (*keys)[b]; }
  };
  struct Level {
    JsonValue* value;
    std::unordered_set<std::size_t, KeyHash, KeyEqual> keys;
    std::uint64_t key_set_bytes = 0;
  };

  // Doubles a vector's capacity when it is full, charging the new elements' bytes first.
  template <typename T>
  void grow(std::vector<T>& v) {
    if (v.size() < v.capacity()) return;
    const std::size_t more = std::max<std::size_t>(4, v.capacity());
    budget_.charge(bytes_for(more, sizeof(T)), name_, "a JSON array or object");
    v.reserve(v.capacity() + more);
  }

  // The new value: the root, the next element of the open array or the value of the open
  // object's last key.
  JsonValue& add(JsonValue::Kind kind) {
    JsonValue* v = &root_;
    if (!levels_.empty()) {
      std::vector<JsonValue>& items = levels_.back().value->items_;
      grow(items);
      v = &items.emplace_back();
    }
    v->kind_ = kind;
    return *v;
  }

  bool open(JsonValue::Kind kind) {
    if (levels_.size() >= limits_.max_depth)
      fail(where_, name_, ": JSON nested deeper than ", limits_.max_depth, " levels (in ",
           location(), ")");
    JsonValue& v = add(kind);
    const auto* keys = &v.keys_;
    levels_.push_back(
        {&v, std::unordered_set<std::size_t, KeyHash, KeyEqual>(0, KeyHash{keys}, KeyEqual{keys})});
    return true;
  }

  bool close() {
    budget_.release(levels_.back().key_set_bytes);  // the hash set goes, the keys stay
    levels_.pop_back();
    return true;
  }

  // "the top level" or "the value at 'a' > [3]": the keys and indices leading to the innermost
  // open value; of a deep path only the first three and the last two steps.
  std::string location() const {
    const std::size_t steps = levels_.size() - 1;
    std::string out;
    for (std::size_t i = 0; i < steps; ++i) {
      if (i == 3 && steps > 5) {
        out += " > ...";
        i = steps - 3;
        continue;
      }
      const JsonValue& v = *levels_[i].value;
      if (!out.empty()) out += " > ";
      if (v.is_object()) {
        out += json_prefix(v.keys_.back(), 40);
      } else {
        out += '[';
        out += std::to_string(v.items_.size() - 1);
        out += ']';
      }
    }
    if (out.empty()) return "the top level";
    out.insert(0, "the value at ");
    return out;
  }

  const std::string& name_;
  const char* where_;
  const char* malformed_;
  ReaderBudget& budget_;
  const JsonLimits& limits_;
  JsonValue root_;
  std::vector<Level> levels_;
};

JsonValue parse_json(std::string_view text, const std::string& name, const char* where,
                     const char* malformed, ReaderBudget& budget, const JsonLimits& limits) {
  if (text.size() > limits.max_bytes)
    fail(where, name, ": JSON text of ", text.size(), " bytes is longer than the limit of ",
         limits.max_bytes, " bytes");
  JsonTreeBuilder builder(name, where, malformed, budget, limits);
  budget.charge(sizeof(JsonValue), name, "a JSON value");
  // strict: nothing but whitespace may follow the value; comments are not JSON.
  Json::sax_parse(text.begin(), text.end(), &builder, Json::input_format_t::json, true, false);
  return std::move(builder.root());
}

}  // namespace anvil
