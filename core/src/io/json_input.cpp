// Bounded JSON reading: see json_input.h.
#include "headscope/io/json_input.h"

#include <algorithm>

#include "headscope/base/error.h"

namespace headscope {

using json = nlohmann::json;

json parse_json(std::string_view text, const std::string& file) {
    // Called at every value with its depth: the parser stops at the first one too deep.
    const json::parser_callback_t limit_depth = [&](int depth, json::parse_event_t event, json&) {
        if (depth > max_json_depth &&
            (event == json::parse_event_t::object_start || event == json::parse_event_t::array_start))
            throw Error(file + ": JSON nested deeper than " + std::to_string(max_json_depth) + " levels");
        return true;
    };
    try {
        return json::parse(text.begin(), text.end(), limit_depth);
    } catch (const json::exception& e) {  // parse_error, out_of_range (1e999), ...: the whole family
        // nlohmann quotes the last token read, which can be a whole long string.
        std::string reason = e.what();
        if (reason.size() > 200) reason = reason.substr(0, 197) + "...";
        throw Error(file + ": not valid JSON: " + reason);
    }
}

std::string describe_json(const json& value) {
    // A short list of scalars ([2,-2], [0]) is quoted whole; anything larger by its size.
    const bool short_list = value.is_array() && value.size() <= 8 &&
                            std::none_of(value.begin(), value.end(), [](const json& v) { return v.is_structured(); });
    if (value.is_array() && !short_list) return "an array of " + std::to_string(value.size()) + " values";
    if (value.is_object()) return "an object of " + std::to_string(value.size()) + " keys";
    const std::string text = value.dump(-1, ' ', false, json::error_handler_t::replace);
    return text.size() > 40 ? text.substr(0, 37) + "..." : text;
}

}  // namespace headscope
