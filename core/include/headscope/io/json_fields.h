// The one way Headscope reads the fields of a JSON file it was handed
// (config.json, tokenizer.json, the shard index, the settings): each getter
// checks the field's type and range, and each error is one line naming the
// file and the field, e.g. "tokenizer.json: model.merges[7]: expected a
// string, got 3". A field is addressed as (object, field, key): the object,
// its own path in the file ("" for the root), and the member's key.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

namespace headscope {

class JsonFields {
public:
    using json = nlohmann::json;

    // `file` names the file in messages, with what it should be where that helps:
    // "examples.json: not a list of examples (title, texts, look_for)".
    explicit JsonFields(std::string file) : file_(std::move(file)) {}

    const std::string& file() const { return file_; }

    // Throws Error "<file>: <field>: <problem>" ("<file>: <problem>" for the root).
    [[noreturn]] void fail(const std::string& field, const std::string& problem) const;

    // Member `key` of the object at `field`, nullptr when absent or null;
    // `object` not being an object is an error.
    const json* optional(const json& object, const std::string& field, const std::string& key) const;
    const json& required(const json& object, const std::string& field, const std::string& key) const;
    // Required, and of `type` (number_integer takes unsigned too, as nlohmann's is_number_integer).
    const json& required(const json& object, const std::string& field, const std::string& key, json::value_t type,
                         const char* type_name) const;

    std::string string(const json& object, const std::string& field, const std::string& key) const;
    std::string string(const json& object, const std::string& field, const std::string& key,
                       const std::string& fallback) const;
    bool boolean(const json& object, const std::string& field, const std::string& key) const;
    bool boolean(const json& object, const std::string& field, const std::string& key, bool fallback) const;
    // An integer in [min, max].
    int64_t integer(const json& object, const std::string& field, const std::string& key, int64_t min,
                    int64_t max) const;
    int64_t integer(const json& object, const std::string& field, const std::string& key, int64_t min, int64_t max,
                    int64_t fallback) const;
    // A number in the open interval (above, below).
    double number(const json& object, const std::string& field, const std::string& key, double above,
                  double below) const;
    double number(const json& object, const std::string& field, const std::string& key, double above, double below,
                  double fallback) const;
    // A token id: an integer in [0, bound).
    int32_t id(const json& value, const std::string& field, size_t bound) const;
    // The "type" of the object at `field` (tokenizer.json's steps).
    std::string type(const json& object, const std::string& field) const { return string(object, field, "type"); }

    static std::string join(const std::string& field, const std::string& key) {
        return field.empty() ? key : field + "." + key;
    }
    static std::string at(const std::string& field, size_t index) { return field + "[" + std::to_string(index) + "]"; }

private:
    void expect(const json& value, json::value_t type, const std::string& field, const char* type_name) const;

    std::string file_;
};

}  // namespace headscope
