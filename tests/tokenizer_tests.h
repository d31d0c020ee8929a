// Test support for the tokenizer.json tests: sentences to compare with the
// reference, and a file the loader must refuse in one line.
#pragma once
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "headscope/base/error.h"
#include "headscope/tokenize/tokenizer.h"
#include "process.h"

namespace headscope::test {

// `count` sentences of 1 to 12 of `words`, each followed by a space, a
// punctuation mark, an apostrophe, two spaces or a tab, drawn with `seed`.
inline std::vector<std::string> generated_sentences(const std::vector<std::string>& words, unsigned seed,
                                                    int count = 200) {
    const std::vector<std::string> glue = {" ", " ", " ", ", ", ". ", "! ", "? ", " - ", "'", "  ", "\t"};
    std::mt19937 rng(seed);
    std::vector<std::string> out;
    for (int n = 0; n < count; ++n) {
        std::string s;
        for (int w = 0, length = 1 + static_cast<int>(rng() % 12); w < length; ++w)
            s += words[rng() % words.size()] + glue[rng() % glue.size()];
        out.push_back(s);
    }
    return out;
}

// What the reference (tests/reference/encode_hf.js, transformers' tokenizers
// in JavaScript) gives for `request` ({"texts": [...]} or {"pairs": [...]})
// on tokenizer.json `file` as transformers' `tokenizer_class`, with special
// tokens as `add_special` says; null when node cannot be run.
inline nlohmann::json reference_encoding(const std::filesystem::path& dir, const std::filesystem::path& file,
                                         const char* tokenizer_class, nlohmann::json request, bool add_special = true) {
    request["tokenizer_json"] = file.string();
    request["tokenizer_config"] = {{"tokenizer_class", tokenizer_class}};
    request["add_special"] = add_special;
    const std::filesystem::path request_file = dir / "request.json";
    std::ofstream(request_file) << request.dump();
    const ProcessRun r = run_program(
        {"node", (std::filesystem::path(HEADSCOPE_TESTS_DIR) / "reference/encode_hf.js").string()}, dir, request_file);
    if (r.status == 127) return nullptr;
    EXPECT_EQ(r.status, 0) << "tests/reference/encode_hf.js failed: " << r.err;
    return r.status == 0 ? nlohmann::json::parse(r.out) : nlohmann::json::array();
}

// `j` written to dir/bad.json and loaded: a failure unless it throws Error,
// in one line that contains `names`.
inline void expect_tokenizer_refused(const std::filesystem::path& dir, const nlohmann::json& j,
                                     const std::string& names) {
    const std::filesystem::path file = dir / "bad.json";
    std::ofstream(file) << j.dump();
    try {
        Tokenizer::load_json(file);
        ADD_FAILURE() << "accepted: " << names;
    } catch (const Error& e) {
        const std::string what = e.what();
        EXPECT_NE(what.find(names), std::string::npos) << what;
        EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    }
}

}  // namespace headscope::test
