// Command-line options the CLI and the window share: those whose value is a
// word core parses (on/off, the scale, the split, the backend, ...), texts,
// taken as written, and ranges of positions (--rows, --cols).
#pragma once
#include <CLI/CLI.hpp>
#include <charconv>
#include <string>
#include <vector>

#include "headscope/base/error.h"

namespace headscope {

// An option whose word core's `parse` turns into `value`. A word it refuses
// fails with core's message, which CLI11 puts after the flag, as it does
// every validator's. `words` stands for the value in the help.
template <typename T, typename Parse>
void add_word_option(CLI::App* sub, const std::string& flag, T& value, const std::string& words, Parse parse,
                     const std::string& help) {
    const CLI::Validator to_value(
        [parse](std::string& word) {
            try {
                word = std::to_string(static_cast<int>(parse(word)));  // as CLI11 reads a bool or an enum
                return std::string();
            } catch (const Error& e) {
                return std::string(e.what());
            }
        },
        "");
    sub->add_option(flag, value, help)->type_name(words)->transform(to_value);
}

// A text option, repeated for several texts: each value taken whole, as
// written. (CLI11 would read "[MASK]" or "[1,2]" as a list of values and
// unwrap or split it.)
inline CLI::Option* add_text_option(CLI::App* sub, const std::string& flag, std::vector<std::string>& texts,
                                    const std::string& help) {
    return sub->add_option(flag, texts, help)->allow_extra_args(false);
}

// "A:B" (A < B, both at least 0) as the range [A, B); anything else fails naming `flag`.
inline void parse_range(const std::string& flag, const std::string& word, int& first, int& end) {
    const size_t colon = word.find(':');
    const auto number = [&](size_t from, size_t to, int& value) {
        const auto [ptr, ec] = std::from_chars(word.data() + from, word.data() + to, value);
        return from < to && ec == std::errc() && ptr == word.data() + to && value >= 0;
    };
    if (colon == std::string::npos || !number(0, colon, first) || !number(colon + 1, word.size(), end) || first >= end)
        throw Error(flag + ": '" + word + "' is not a range FIRST:END of positions with FIRST < END");
}

}  // namespace headscope
