// Option words shared by the CLI and the window, and batch helpers.
#include "headscope/attention.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "headscope/error.h"

namespace headscope {

int Batch::T() const {
    size_t longest = 0;
    for (const auto& ids : token_ids) longest = std::max(longest, ids.size());
    return static_cast<int>(longest);
}

int32_t Batch::padded_id(int b, int t) const {
    const std::vector<int32_t>& ids = token_ids[b];
    return t < static_cast<int>(ids.size()) ? ids[t] : pad_id;
}

bool causal_allows(const AttentionOptions& options, int i, int j) { return !options.causal || j <= i; }

bool padding_allows(const AttentionOptions& options, int j, int length) { return !options.padding_mask || j < length; }

int visible_end(const AttentionOptions& options, int i, int length, int T) {
    if (!padding_allows(options, i, length)) return 0;  // a pad query
    // Both masks allow a prefix of the keys: j < i + 1 and j < length.
    return std::min(options.causal ? i + 1 : T, options.padding_mask ? length : T);
}

float score_scale(Scale scale, int C, int NH) {
    switch (scale) {
        case Scale::head: return 1.f / std::sqrt(static_cast<float>(C / NH));
        case Scale::model: return 1.f / std::sqrt(static_cast<float>(C));
        case Scale::none: return 1.f;
    }
    return 1.f;
}

bool parse_on_off(std::string_view flag, std::string_view word) {
    if (word == "on") return true;
    if (word == "off") return false;
    throw Error(std::string(flag) + ": expected on or off, got '" + std::string(word) + "'");
}

Scale parse_scale(std::string_view word) {
    if (word == "head") return Scale::head;
    if (word == "model") return Scale::model;
    if (word == "none") return Scale::none;
    throw Error("unknown scale '" + std::string(word) + "' (expected head, model or none)");
}

Split parse_split(std::string_view word) {
    if (word == "transpose") return Split::transpose;
    if (word == "naive-view") return Split::naive_view;
    throw Error("unknown split '" + std::string(word) + "' (expected transpose or naive-view)");
}

const char* to_string(Scale scale) {
    switch (scale) {
        case Scale::head: return "head";
        case Scale::model: return "model";
        case Scale::none: return "none";
    }
    return "?";
}

const char* to_string(Split split) {
    switch (split) {
        case Split::transpose: return "transpose";
        case Split::naive_view: return "naive-view";
    }
    return "?";
}

}  // namespace headscope
