// Reads a config.json's keys for the families' readers (family_configs.h):
// each error one line naming the file and the key with its value
// ("n_layer is 0, not a positive integer").
#pragma once
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "headscope/base/error.h"
#include "headscope/io/json_fields.h"
#include "headscope/io/json_input.h"

namespace headscope {

class ConfigReader {
public:
    using json = nlohmann::json;

    ConfigReader(const json& j, const std::string& file, std::string field = "")
        : j_(j), fields_(file), field_(std::move(field)) {}

    const json* find(const std::string& key) const { return fields_.optional(j_, field_, key); }

    int positive_int(const std::string& key) const {
        const json* v = find(key);
        if (!v) refuse(key + " missing");
        return checked_positive(key, *v);
    }
    int positive_int(const std::string& key, int fallback) const {
        const json* v = find(key);
        return v ? checked_positive(key, *v) : fallback;
    }
    // A token id below vocab_size, or -1; a list (Llama 3's several EOS ids) gives its first (more_token_ids the rest).
    int token_id(const std::string& key, int vocab_size, int fallback) const {
        const json* v = find(key);
        if (!v) return fallback;
        return checked_token_id(key, *v, v->is_array() && !v->empty() ? v->front() : *v, vocab_size);
    }
    // The ids after the first of a list of token ids, each checked as token_id's; none for a single id.
    std::vector<int> more_token_ids(const std::string& key, int vocab_size) const {
        const json* v = find(key);
        std::vector<int> ids;
        for (size_t n = 1; v && v->is_array() && n < v->size(); ++n)
            ids.push_back(checked_token_id(key, *v, (*v)[n], vocab_size));
        return ids;
    }
    float epsilon(const std::string& key, float fallback) const {
        const json* v = find(key);
        if (!v) return fallback;
        if (!v->is_number() || !(v->get<double>() > 0) || !(v->get<double>() < 1))
            refuse(key + " " + describe_json(*v) + " is not a small positive number");
        return as_float(key, *v);
    }
    float positive_number(const std::string& key, float fallback) const {
        const json* v = find(key);
        if (!v) return fallback;
        if (!v->is_number() || !(v->get<double>() > 0) || !(v->get<double>() < 1e12))
            refuse(key + " " + describe_json(*v) + " is not a positive number");
        return as_float(key, *v);
    }
    bool flag(const std::string& key, bool fallback) const {
        const json* v = find(key);
        if (!v) return fallback;
        if (!v->is_boolean()) refuse(key + " " + describe_json(*v) + " is not true or false");
        return v->get<bool>();
    }
    std::string word(const std::string& key, const std::string& fallback) const {
        const json* v = find(key);
        if (!v) return fallback;
        if (!v->is_string()) refuse(key + " " + describe_json(*v) + " is not a string");
        return v->get<std::string>();
    }
    // The reader of the object at `key`.
    ConfigReader object(const std::string& key) const {
        const json& value = fields_.required(j_, field_, key, json::value_t::object, "an object");
        return ConfigReader(value, fields_.file(), JsonFields::join(field_, key));
    }
    [[noreturn]] void refuse(const std::string& what) const { fields_.fail(field_, what); }

private:
    // `id`, of `key`'s value `whole`, as a token id below vocab_size; refused otherwise.
    int checked_token_id(const std::string& key, const json& whole, const json& id, int vocab_size) const {
        if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= vocab_size)
            refuse(key + " " + describe_json(whole) + (whole.is_array() ? " holds an id that is" : " is") +
                   " not a token id below vocab_size");
        return id.get<int>();
    }
    // A positive number as the engine computes with it: in float32, where
    // 1e-50 is 0 and 1e-40 subnormal (a norm's epsilon, RoPE's theta).
    float as_float(const std::string& key, const json& v) const {
        const float f = v.get<float>();
        if (!std::isnormal(f))
            refuse(key + " " + describe_json(v) + " is " + (f == 0 ? "0" : "subnormal") +
                   " in float32, the type the engine computes in");
        return f;
    }
    int checked_positive(const std::string& key, const json& v) const {
        // Any integer type: a parsed file gives unsigned, a config built in code signed.
        if (!v.is_number_integer() || v.get<int64_t>() <= 0 || v.get<int64_t>() > std::numeric_limits<int>::max())
            refuse(key + " is " + describe_json(v) + ", not a positive integer");
        return v.get<int>();
    }

    const json& j_;
    JsonFields fields_;
    std::string field_;
};

}  // namespace headscope
