// The tokenizer.json tests' small hand-written files (test_tokenizer_json.cpp,
// test_tokenizer_json_bad.cpp): byte-level and character-level BPE files,
// added tokens, and the fixture that loads a file and reads its one-line Error.
#pragma once
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "headscope/base/error.h"
#include "headscope/io/files.h"
#include "headscope/tokenize/tokenizer.h"
#include "model_writer.h"

namespace headscope::test::tokenizer_json {

namespace fs = std::filesystem;
using nlohmann::json;

inline std::string quoted(const std::string& s) { return json(s).dump(-1, ' ', true); }

inline void write_file(const fs::path& path, const std::string& contents) {
    std::ofstream(path, std::ios::binary) << contents;
}

// A code point below U+0800 as UTF-8 (all of GPT-2's byte alphabet is).
inline std::string utf8_of(char32_t cp) {
    if (cp < 0x80) return std::string(1, static_cast<char>(cp));
    return {static_cast<char>(0xC0 | (cp >> 6)), static_cast<char>(0x80 | (cp & 0x3F))};
}

// A byte in GPT-2's byte alphabet.
inline std::string byte_char(int byte) { return utf8_of(headscope::byte_to_unicode()[byte]); }

// A byte-level BPE tokenizer.json: the 256 byte tokens (id = the byte),
// `tokens` from id 256 on, `merges` as given, GPT-2's pre-tokenizer.
inline json byte_level(const std::vector<std::string>& tokens, const json& merges) {
    json vocab = json::object();
    for (int b = 0; b < 256; ++b) vocab[byte_char(b)] = b;
    for (size_t i = 0; i < tokens.size(); ++i) vocab[tokens[i]] = 256 + i;
    return {{"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merges}}},
            {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
            {"added_tokens", json::array()}};
}

// A character-level BPE tokenizer.json (SentencePiece-style, as Llama 2's):
// `tokens` with ids in order, `merges` as given, no normalizer or pre-tokenizer.
inline json char_level(const std::vector<std::string>& tokens, const json& merges) {
    json vocab = json::object();
    for (size_t i = 0; i < tokens.size(); ++i) vocab[tokens[i]] = i;
    return {{"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merges}}}, {"added_tokens", json::array()}};
}

inline json added_token(int id, const std::string& content, json options = json::object()) {
    json token = {{"id", id},        {"content", content},  {"single_word", false}, {"lstrip", false},
                  {"rstrip", false}, {"normalized", false}, {"special", true}};
    token.update(options);
    return token;
}

class TokenizerJsonFile : public ::testing::Test {
protected:
    // The tokenizer `j` (or `text`) describes, through a file.
    Tokenizer load(const json& j) { return load_text(j.dump()); }
    Tokenizer load_text(const std::string& text) {
        write_file(path(), text);
        return Tokenizer::load_json(path());
    }
    // The one-line Error loading it gives.
    std::string load_error(const json& j) { return load_error_text(j.dump()); }
    std::string load_error_text(const std::string& text) {
        try {
            load_text(text);
        } catch (const Error& e) {
            const std::string message = e.what();
            EXPECT_EQ(message.rfind(path().string() + ": ", 0), 0u) << message;
            EXPECT_EQ(message.find('\n'), std::string::npos) << message;
            return message;
        }
        ADD_FAILURE() << "no error for " << text.substr(0, 200);
        return "";
    }
    fs::path path() const { return dir_.path / "tokenizer.json"; }

    // A file `change` spoils, and the message its Error must hold after "<file>: ".
    struct BadFile {
        std::string what;
        std::function<void(json&)> change;
        std::string message;
    };
    // Each of `cases` applied to a good file (byte-level, one merge) is one line naming the file, the field and
    // the problem.
    void expect_one_line_errors(const std::vector<BadFile>& cases) {
        const json good = byte_level({"ab"}, json::array({"a b"}));
        for (const BadFile& c : cases) {
            json j = good;
            c.change(j);
            EXPECT_NE(load_error(j).find(c.message), std::string::npos)
                << c.what << ": expected \"" << c.message << "\"";
        }
    }

    TempDir dir_;
};

}  // namespace headscope::test::tokenizer_json
