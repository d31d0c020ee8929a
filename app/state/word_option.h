// Command-line options the CLI and the window share: those whose value is a
// word core parses (on/off, the scale, the split, the backend, ...), and
// texts, taken as written.
#pragma once
#include <CLI/CLI.hpp>
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

}  // namespace headscope
