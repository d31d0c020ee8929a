// GGUF metadata (io/gguf.h): each key and value checked as it is parsed, the
// values kept as views into the mapping, and the typed lookups that read them.
#include <functional>
#include <iterator>

#include "gguf_cursor.h"
#include "headscope/io/gguf.h"

namespace headscope {

namespace {

// Arrays of arrays are legal; deeper than this they are no model's metadata.
constexpr int max_array_depth = 4;
// GgufArray's checkpoints: one every this many elements of variable size.
constexpr uint64_t checkpoint_every = 64;
// The spec's longest key.
constexpr uint64_t max_key_bytes = 65535;

constexpr const char* type_names[] = {"uint8", "int8",   "uint16", "int16",  "uint32", "int32",  "float32",
                                      "bool",  "string", "array",  "uint64", "int64",  "float64"};

bool is_type(uint32_t id) { return id < std::size(type_names); }

// The least a value of `type` takes: a string's length, an array's element type and count.
uint64_t min_bytes(GgufValueType type) {
    if (type == GgufValueType::string) return 8;
    if (type == GgufValueType::array) return 12;
    return gguf_fixed_bytes(type);
}

bool is_integer(GgufValueType type) {
    switch (type) {
        case GgufValueType::uint8:
        case GgufValueType::int8:
        case GgufValueType::uint16:
        case GgufValueType::int16:
        case GgufValueType::uint32:
        case GgufValueType::int32:
        case GgufValueType::uint64:
        case GgufValueType::int64: return true;
        default: return false;
    }
}
bool is_number(GgufValueType type) {
    return is_integer(type) || type == GgufValueType::float32 || type == GgufValueType::float64;
}
bool is_string(GgufValueType type) { return type == GgufValueType::string; }
bool is_boolean(GgufValueType type) { return type == GgufValueType::boolean; }
bool is_array(GgufValueType type) { return type == GgufValueType::array; }

std::string with_article(GgufValueType type) {
    const std::string name = to_string(type);
    return (name[0] == 'i' || name[0] == 'a' ? "an " : "a ") + name;
}

template <typename T>
T load(const std::byte* p) {
    T value;
    std::memcpy(&value, p, sizeof value);
    return value;
}

// What a value is, for an error: "key 'k'", "key 'k'[3]". Built only on an error.
using Where = std::function<std::string()>;

// Checks the value of `type` at the cursor and moves past it. `depth`: the
// arrays around it; `checkpoints`, for a key's own array of strings or
// arrays, gets where every 64th element starts.
void check_value(GgufCursor& cursor, GgufValueType type, int depth, const Where& where,
                 std::vector<uint64_t>* checkpoints) {
    if (type == GgufValueType::string) {
        cursor.string(where);
        return;
    }
    if (type == GgufValueType::boolean) {
        const auto value = cursor.read<uint8_t>(where);
        if (value > 1) cursor.fail(where() + ": bool value " + std::to_string(value) + " is neither 0 nor 1");
        return;
    }
    if (type != GgufValueType::array) {
        cursor.take(gguf_fixed_bytes(type), where);
        return;
    }
    if (depth == max_array_depth)
        cursor.fail(where() + ": arrays nested deeper than " + std::to_string(max_array_depth) + " levels");
    const auto element_id = cursor.read<uint32_t>(where);
    if (!is_type(element_id))
        cursor.fail(where() + ": array element type " + std::to_string(element_id) + " is not a GGUF type");
    const auto element_type = static_cast<GgufValueType>(element_id);
    const auto count = cursor.read<uint64_t>(where);
    if (count > cursor.left() / min_bytes(element_type)) {
        cursor.fail(where() + ": an array of " + std::to_string(count) + " " + to_string(element_type) +
                    " runs past the end of the file (" + std::to_string(cursor.left()) + " bytes left)");
    }
    const uint64_t fixed = gguf_fixed_bytes(element_type);
    if (fixed != 0 && element_type != GgufValueType::boolean) {
        cursor.take(count * fixed, where);
        return;
    }
    const size_t first = cursor.position();
    for (uint64_t i = 0; i < count; ++i) {
        if (checkpoints && i % checkpoint_every == 0) checkpoints->push_back(cursor.position() - first);
        const Where element = [&] { return where() + "[" + std::to_string(i) + "]"; };
        check_value(cursor, element_type, depth + 1, element, nullptr);
    }
}

// Past the value of `type` at `p`, already checked.
const std::byte* skip_checked(GgufValueType type, const std::byte* p) {
    if (type == GgufValueType::string) return p + 8 + load<uint64_t>(p);
    if (type != GgufValueType::array) return p + gguf_fixed_bytes(type);
    const auto element_type = static_cast<GgufValueType>(load<uint32_t>(p));
    const auto count = load<uint64_t>(p + 4);
    p += 12;
    if (const uint64_t fixed = gguf_fixed_bytes(element_type)) return p + count * fixed;
    for (uint64_t i = 0; i < count; ++i) p = skip_checked(element_type, p);
    return p;
}

// The integer at `p`, of an integer type; nullopt where it is negative.
std::optional<uint64_t> integer_at(GgufValueType type, const std::byte* p, int64_t& negative) {
    int64_t value = 0;
    switch (type) {
        case GgufValueType::uint8: return load<uint8_t>(p);
        case GgufValueType::uint16: return load<uint16_t>(p);
        case GgufValueType::uint32: return load<uint32_t>(p);
        case GgufValueType::uint64: return load<uint64_t>(p);
        case GgufValueType::int8: value = load<int8_t>(p); break;
        case GgufValueType::int16: value = load<int16_t>(p); break;
        case GgufValueType::int32: value = load<int32_t>(p); break;
        default: value = load<int64_t>(p); break;
    }
    if (value < 0) {
        negative = value;
        return std::nullopt;
    }
    return static_cast<uint64_t>(value);
}

uint64_t non_negative(GgufValueType type, const std::byte* p, const std::string& where) {
    int64_t negative = 0;
    const std::optional<uint64_t> value = integer_at(type, p, negative);
    if (!value) throw Error(where + " is " + std::to_string(negative) + ", not a whole number from 0 up");
    return *value;
}

double number_at(GgufValueType type, const std::byte* p) {
    if (type == GgufValueType::float32) return load<float>(p);
    if (type == GgufValueType::float64) return load<double>(p);
    int64_t negative = 0;
    const std::optional<uint64_t> value = integer_at(type, p, negative);
    return value ? static_cast<double>(*value) : static_cast<double>(negative);
}

std::string_view string_at(const std::byte* p) { return {reinterpret_cast<const char*>(p + 8), load<uint64_t>(p)}; }

}  // namespace

const char* to_string(GgufValueType type) { return type_names[static_cast<uint32_t>(type)]; }

uint64_t gguf_fixed_bytes(GgufValueType type) {
    constexpr uint64_t bytes[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    return bytes[static_cast<uint32_t>(type)];
}

void GgufFile::parse_metadata(GgufCursor& cursor, uint64_t count) {
    for (uint64_t i = 0; i < count; ++i) {
        const std::string_view key = cursor.string([&] { return "the name of key " + std::to_string(i); });
        if (key.size() > max_key_bytes)
            cursor.fail("key " + std::to_string(i) + ": its name is " + std::to_string(key.size()) +
                        " bytes long, longer than GGUF's 65535");
        const std::string where = "key '" + std::string(key) + "'";
        const auto type_id = cursor.read<uint32_t>([&] { return "the type of " + where; });
        if (!is_type(type_id)) cursor.fail(where + ": value type " + std::to_string(type_id) + " is not a GGUF type");
        const auto type = static_cast<GgufValueType>(type_id);
        Value value{type, cursor.here(), {}};
        check_value(
            cursor, type, 0, [&] { return where; }, &value.checkpoints);
        if (!values_.emplace(key, std::move(value)).second) cursor.fail(where + " appears twice");
        keys_.push_back(key);
    }
}

std::optional<GgufValueType> GgufFile::type(std::string_view key) const {
    const auto it = values_.find(key);
    return it == values_.end() ? std::nullopt : std::optional(it->second.type);
}

const GgufFile::Value* GgufFile::find(std::string_view key, const char* wanted, bool (*accepts)(GgufValueType)) const {
    const auto it = values_.find(key);
    if (it == values_.end()) return nullptr;
    if (!accepts(it->second.type)) {
        std::string found = with_article(it->second.type);
        if (it->second.type == GgufValueType::array)
            found += " of " + std::string(to_string(static_cast<GgufValueType>(load<uint32_t>(it->second.data))));
        throw Error(file_ + ": key '" + std::string(key) + "' is " + found + ", not " + wanted);
    }
    return &it->second;
}

std::optional<uint64_t> GgufFile::integer(std::string_view key) const {
    const Value* value = find(key, "an integer", is_integer);
    if (!value) return std::nullopt;
    return non_negative(value->type, value->data, file_ + ": key '" + std::string(key) + "'");
}

std::optional<double> GgufFile::number(std::string_view key) const {
    const Value* value = find(key, "a number", is_number);
    return value ? std::optional(number_at(value->type, value->data)) : std::nullopt;
}

std::optional<std::string_view> GgufFile::string(std::string_view key) const {
    const Value* value = find(key, "a string", is_string);
    return value ? std::optional(string_at(value->data)) : std::nullopt;
}

std::optional<bool> GgufFile::boolean(std::string_view key) const {
    const Value* value = find(key, "a bool", is_boolean);
    return value ? std::optional(load<uint8_t>(value->data) != 0) : std::nullopt;
}

std::optional<GgufArray> GgufFile::array(std::string_view key) const {
    const Value* value = find(key, "an array", is_array);
    if (!value) return std::nullopt;
    return GgufArray(file_ + ": key '" + std::string(key) + "'", value->data, value->checkpoints);
}

GgufArray::GgufArray(std::string where, const std::byte* header, std::span<const uint64_t> checkpoints)
    : where_(std::move(where)),
      element_type_(static_cast<GgufValueType>(load<uint32_t>(header))),
      size_(load<uint64_t>(header + 4)),
      first_(header + 12),
      checkpoints_(checkpoints) {}

const std::byte* GgufArray::element(uint64_t i, const char* wanted, bool is_wanted) const {
    if (!is_wanted) throw Error(where_ + " is an array of " + to_string(element_type_) + ", not of " + wanted);
    if (i >= size_) throw Error(where_ + ": element " + std::to_string(i) + " of an array of " + std::to_string(size_));
    if (const uint64_t fixed = gguf_fixed_bytes(element_type_)) return first_ + i * fixed;
    uint64_t at = 0;
    const std::byte* p = first_;
    if (!checkpoints_.empty()) {
        at = i / checkpoint_every * checkpoint_every;
        p += checkpoints_[i / checkpoint_every];
    }
    for (; at < i; ++at) p = skip_checked(element_type_, p);
    return p;
}

uint64_t GgufArray::integer(uint64_t i) const {
    const std::byte* p = element(i, "integers", is_integer(element_type_));
    return non_negative(element_type_, p, where_ + ": element " + std::to_string(i));
}

double GgufArray::number(uint64_t i) const {
    return number_at(element_type_, element(i, "numbers", is_number(element_type_)));
}

std::string_view GgufArray::string(uint64_t i) const {
    return string_at(element(i, "strings", is_string(element_type_)));
}

bool GgufArray::boolean(uint64_t i) const { return load<uint8_t>(element(i, "bools", is_boolean(element_type_))) != 0; }

GgufArray GgufArray::array(uint64_t i) const {
    const std::byte* p = element(i, "arrays", is_array(element_type_));
    return GgufArray(where_ + "[" + std::to_string(i) + "]", p, {});
}

}  // namespace headscope
