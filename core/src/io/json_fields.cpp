// Reading checked fields of a JSON file: see json_fields.h.
#include "headscope/io/json_fields.h"

#include <cstdio>

#include "headscope/base/error.h"
#include "headscope/io/json_input.h"

namespace headscope {

namespace {

std::string format(double value) {
    char text[32];
    std::snprintf(text, sizeof text, "%g", value);
    return text;
}

}  // namespace

void JsonFields::fail(const std::string& field, const std::string& problem) const {
    throw Error(file_ + ": " + (field.empty() ? "" : field + ": ") + problem);
}

const JsonFields::json* JsonFields::optional(const json& object, const std::string& field,
                                             const std::string& key) const {
    expect(object, json::value_t::object, field, "an object");
    const auto it = object.find(key);
    return it == object.end() || it->is_null() ? nullptr : &*it;
}

const JsonFields::json& JsonFields::required(const json& object, const std::string& field,
                                             const std::string& key) const {
    const json* value = optional(object, field, key);
    if (!value) fail(join(field, key), "missing");
    return *value;
}

const JsonFields::json& JsonFields::required(const json& object, const std::string& field, const std::string& key,
                                             json::value_t type, const char* type_name) const {
    const json& value = required(object, field, key);
    expect(value, type, join(field, key), type_name);
    return value;
}

std::string JsonFields::string(const json& object, const std::string& field, const std::string& key) const {
    return required(object, field, key, json::value_t::string, "a string").get<std::string>();
}

std::string JsonFields::string(const json& object, const std::string& field, const std::string& key,
                               const std::string& fallback) const {
    return optional(object, field, key) ? string(object, field, key) : fallback;
}

bool JsonFields::boolean(const json& object, const std::string& field, const std::string& key) const {
    return required(object, field, key, json::value_t::boolean, "true or false").get<bool>();
}

bool JsonFields::boolean(const json& object, const std::string& field, const std::string& key, bool fallback) const {
    return optional(object, field, key) ? boolean(object, field, key) : fallback;
}

int64_t JsonFields::integer(const json& object, const std::string& field, const std::string& key, int64_t min,
                            int64_t max) const {
    const json& value = required(object, field, key);
    // An unsigned value past int64's range is no integer we read.
    const bool fits = value.is_number_unsigned() ? value.get<uint64_t>() <= static_cast<uint64_t>(max)
                                                 : value.is_number_integer() && value.get<int64_t>() <= max;
    if (!fits || value.get<int64_t>() < min)
        fail(join(field, key),
             describe_json(value) + " is not an integer from " + std::to_string(min) + " to " + std::to_string(max));
    return value.get<int64_t>();
}

int64_t JsonFields::integer(const json& object, const std::string& field, const std::string& key, int64_t min,
                            int64_t max, int64_t fallback) const {
    return optional(object, field, key) ? integer(object, field, key, min, max) : fallback;
}

double JsonFields::number(const json& object, const std::string& field, const std::string& key, double above,
                          double below) const {
    const json& value = required(object, field, key);
    if (!value.is_number() || !(value.get<double>() > above) || !(value.get<double>() < below))
        fail(join(field, key),
             describe_json(value) + " is not a number between " + format(above) + " and " + format(below));
    return value.get<double>();
}

double JsonFields::number(const json& object, const std::string& field, const std::string& key, double above,
                          double below, double fallback) const {
    return optional(object, field, key) ? number(object, field, key, above, below) : fallback;
}

int32_t JsonFields::id(const json& value, const std::string& field, size_t bound) const {
    if (!value.is_number_integer()) fail(field, "expected an integer id, got " + describe_json(value));
    const int64_t id = value.get<int64_t>();
    if (id < 0 || static_cast<uint64_t>(id) >= bound)
        fail(field, "id " + std::to_string(id) + " is out of range (must be below " + std::to_string(bound) + ")");
    return static_cast<int32_t>(id);
}

void JsonFields::expect(const json& value, json::value_t type, const std::string& field, const char* type_name) const {
    const bool matches = value.type() == type || (type == json::value_t::number_integer && value.is_number_integer());
    if (!matches) fail(field, std::string("expected ") + type_name + ", got " + describe_json(value));
}

}  // namespace headscope
