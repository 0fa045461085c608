// SPDX-License-Identifier: Apache-2.0
#pragma once
// The one JSON reader of anvil's input files: the safetensors header (engine/core/safetensors.cpp)
// and the IMDB word index (data/imdb.cpp). nlohmann-json's SAX parser drives a handler of our
// own that builds a JsonValue tree (nlohmann stays private to json_reader.cpp).
//
// Note [Linear JSON]
// The files are untrusted, so the reader must cost time linear in the text and bounded memory:
//   - duplicate keys are errors (nlohmann would keep the last silently): each open object keeps
//     a hash set of its keys, so a key costs O(1), not a walk over its siblings. (nlohmann's
//     callback parser, used before, walked the parent object after every child object: a
//     100k-entry safetensors header took minutes.)
//   - nesting deeper than JsonLimits::max_depth is refused when it is opened, so no recursion
//     here (the tree's destructor, preview()) goes deeper than that;
//   - text longer than JsonLimits::max_bytes is refused before parsing;
//   - every node, string and key is charged to the caller's ReaderBudget before it is stored;
//   - messages quote at most a short prefix of a value, key or bad token (json_prefix,
//     JsonValue::preview), never a whole value.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace anvil {

class ReaderBudget;

// A parsed JSON value. An object keeps its members in file order; its keys are unique.
class JsonValue {
 public:
  enum class Kind : std::uint8_t {
    null,
    boolean,
    integer,
    unsigned_integer,
    floating,
    string,
    array,
    object
  };

  Kind kind() const { return kind_; }
  bool is_object() const { return kind_ == Kind::object; }
  bool is_array() const { return kind_ == Kind::array; }
  bool is_string() const { return kind_ == Kind::string; }
  // A number without fraction or exponent (nlohmann's number_integer / number_unsigned).
  bool is_integer() const { return kind_ == Kind::integer || kind_ == Kind::unsigned_integer; }
  // "null", "a boolean", "an integer", "a float", "a string", "an array", "an object".
  const char* type_name() const;

  // The value as a non-negative integer when it is one, else false.
  bool as_uint(std::uint64_t& out) const;
  // The value as a signed integer when it is one that fits, else false.
  bool as_int(std::int64_t& out) const;
  const std::string& str() const { return text_; }  // a string's text ("" otherwise)
  bool boolean() const { return boolean_; }         // a boolean's value (false otherwise)
  double number() const;                            // any number as a double (0 otherwise)

  // Array elements, or object values (parallel to keys()).
  const std::vector<JsonValue>& items() const { return items_; }
  const std::vector<std::string>& keys() const { return keys_; }  // object keys
  std::size_t size() const { return items_.size(); }
  // The member called `key`, or null (a linear search: for the small objects of a schema).
  const JsonValue* find(std::string_view key) const;

  // The value as JSON text, cut after about max_chars characters ("..." marks a cut); stops
  // as soon as it has that many, so it never walks a large value.
  std::string preview(std::size_t max_chars = 60) const;

 private:
  friend class JsonTreeBuilder;
  Kind kind_ = Kind::null;
  bool boolean_ = false;
  union {
    std::int64_t i;
    std::uint64_t u;
    double d;
  } number_{};
  std::string text_;               // a string's text
  std::vector<JsonValue> items_;   // array elements or object values
  std::vector<std::string> keys_;  // object keys
};

struct JsonLimits {
  std::size_t max_depth = 64;             // arrays and objects nested at most this deep
  std::uint64_t max_bytes = 100'000'000;  // longest text accepted (the safetensors header cap)
};

// Parses `text` (strict JSON, UTF-8) into a JsonValue. Throws anvil::Error "<where>: <name>: ..."
// for malformed JSON ("<malformed>: <nlohmann's message with line and column, cut> (last read:
// <a short quote>)"), nesting deeper than
// limits.max_depth, text longer than limits.max_bytes, a key given twice in one object, and a
// tree that would pass `budget` (Note [Linear JSON]). `budget` is charged with the tree's
// memory and keeps that charge (the tree lives on); the text itself is the caller's to charge.
JsonValue parse_json(std::string_view text, const std::string& name, const char* where,
                     const char* malformed, ReaderBudget& budget, const JsonLimits& limits = {});

// `s` quoted for a message: at most max_bytes of it in single quotes, cut at a UTF-8 character
// boundary, followed by "... (N bytes)" when cut.
std::string json_prefix(std::string_view s, std::size_t max_bytes = 60);

}  // namespace anvil
