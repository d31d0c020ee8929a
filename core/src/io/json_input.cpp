// Bounded JSON reading: see json_input.h.
#include "headscope/io/json_input.h"

#include <algorithm>

#include "headscope/base/error.h"
#include "headscope/io/files.h"

namespace headscope {

using json = nlohmann::json;

namespace {

// The checking pass: counts nodes and depth as the parser reads, and stops
// it at the first past a limit or at a syntax error, saying why.
class LimitsCheck : public nlohmann::json_sax<json> {
public:
    explicit LimitsCheck(size_t max_nodes) : max_nodes_(max_nodes) {}

    bool null() override { return node(); }
    bool boolean(bool) override { return node(); }
    bool number_integer(number_integer_t) override { return node(); }
    bool number_unsigned(number_unsigned_t) override { return node(); }
    bool number_float(number_float_t, const string_t&) override { return node(); }
    bool string(string_t&) override { return node(); }
    bool binary(binary_t&) override { return node(); }
    bool key(string_t&) override { return node(); }
    bool start_object(std::size_t) override { return open(); }
    bool start_array(std::size_t) override { return open(); }
    bool end_object() override { return --depth_, true; }
    bool end_array() override { return --depth_, true; }
    bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
        // nlohmann quotes the last token read, which can be a whole long string.
        std::string reason = e.what();
        if (reason.size() > 200) reason = reason.substr(0, 197) + "...";
        refusal_ = "not valid JSON: " + reason;
        return false;
    }

    const std::string& refusal() const { return refusal_; }

private:
    bool node() {
        if (++nodes_ <= max_nodes_) return true;
        refusal_ = "more than " + std::to_string(max_nodes_) + " JSON values, more than this file may have";
        return false;
    }
    bool open() {
        if (++depth_ > max_json_depth) {
            refusal_ = "JSON nested deeper than " + std::to_string(max_json_depth) + " levels";
            return false;
        }
        return node();
    }

    size_t max_nodes_, nodes_ = 0;
    int depth_ = 0;
    std::string refusal_;
};

}  // namespace

json parse_json(std::string_view text, const std::string& file, const JsonLimits& limits) {
    LimitsCheck check(limits.max_nodes);
    if (!json::sax_parse(text.begin(), text.end(), &check)) throw Error(file + ": " + check.refusal());
    try {
        return json::parse(text.begin(), text.end());
    } catch (const json::exception& e) {  // the check has seen the same text: not expected
        throw Error(file + ": not valid JSON: " + e.what());
    }
}

json read_json_file(const std::filesystem::path& path, const JsonLimits& limits, const std::string& what) {
    return parse_json(read_file(path, what, limits.max_bytes), path.string(), limits);
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
