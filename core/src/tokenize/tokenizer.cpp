// What the Tokenizer's parts leave: load_directory choosing between the
// loaders (gpt2_files.cpp, tokenizer_json.cpp and sentencepiece.cpp), a
// vocab.json's ids, token_bytes and token_text, and the string
// replacement the normalizers, pre-tokenizers and loader share.
#include "headscope/tokenize/tokenizer.h"

#include <cstdio>

#include <nlohmann/json.hpp>
#include "headscope/base/error.h"
#include "headscope/io/files.h"
#include "headscope/io/json_input.h"
#include "tokenizer_internal.h"

namespace headscope {

namespace fs = std::filesystem;

Tokenizer Tokenizer::load_directory(const fs::path& dir, VocabFilesStyle style) {
    auto exists = [](const fs::path& p) { return path_kind(p) != PathKind::missing; };
    const fs::path json_file = dir / "tokenizer.json";
    if (exists(json_file)) return load_json(json_file);
    // Marian's checkpoints keep SentencePiece models and a vocab.json of their pieces, no merges.
    if (exists(dir / "source.spm")) return load_marian(dir);
    const fs::path vocab = dir / "vocab.json", merges = dir / "merges.txt";
    if (exists(vocab) && exists(merges)) return load(vocab, merges, style);
    const std::string missing = exists(vocab)    ? "merges.txt"
                                : exists(merges) ? "vocab.json"
                                                 : "vocab.json and merges.txt";
    throw Error(dir.string() + ": no tokenizer: tokenizer.json missing, and " + missing + " missing");
}

std::string Tokenizer::token_bytes(int32_t id) const {
    if (id < 0 || id >= vocab_size()) {
        throw Error("token id " + std::to_string(id) + " is out of range [0, " + std::to_string(vocab_size()) + ")");
    }
    return id_to_bytes_[static_cast<size_t>(id)];
}

void for_each_dense_id(const nlohmann::json& vocab, const std::string& file,
                       const std::function<void(const std::string&, int32_t)>& add) {
    if (!vocab.is_object()) throw Error(file + ": expected a JSON object of token -> id");
    // Dense ids keep vocab_size() and the symbol numbering simple; GPT-2's are 0..50256.
    std::vector<bool> id_seen(vocab.size(), false);
    for (const auto& [token, value] : vocab.items()) {
        if (!value.is_number_integer())
            throw Error(file + ": the id of " + describe_json(token) + " is not an integer: " + describe_json(value));
        // The JSON reader keeps a non-negative integer unsigned, and the message prints it as the file has it.
        if (!value.is_number_unsigned() || value.get<uint64_t>() >= vocab.size() || id_seen[value.get<size_t>()]) {
            throw Error(file + ": token ids must be 0.." + std::to_string(vocab.size() - 1) + ", each once; found " +
                        value.dump() + " for " + describe_json(token));
        }
        const auto id = value.get<size_t>();
        id_seen[id] = true;
        add(token, static_cast<int32_t>(id));
    }
}

std::string byte_fallback_token(int byte) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", byte);
    return name;
}

std::string Tokenizer::shown_bytes(const std::string& symbol, const std::string& space_symbol) const {
    if (byte_level_) return symbol;
    // "<0xAB>", as byte_fallback_token writes it.
    if (byte_fallback_ && symbol.size() == 6 && symbol.starts_with("<0x") && symbol.ends_with('>')) {
        unsigned byte = 0;
        char rest = 0;
        if (std::sscanf(symbol.c_str() + 3, "%2X%c", &byte, &rest) == 2 && rest == '>' &&
            symbol == byte_fallback_token(static_cast<int>(byte))) {
            return std::string(1, static_cast<char>(byte));
        }
    }
    return space_symbol.empty() ? symbol : replace_all(symbol, space_symbol, " ");
}

std::string replace_all(std::string_view text, std::string_view pattern, std::string_view replacement) {
    std::string out;
    out.reserve(text.size());
    for (size_t i = 0;;) {
        const size_t found = text.find(pattern, i);
        out.append(text.substr(i, found - i));
        if (found == std::string_view::npos) return out;
        out.append(replacement);
        i = found + pattern.size();
    }
}

std::string token_text(const Tokenizer& tokenizer, int32_t id) {
    return id < tokenizer.vocab_size() ? tokenizer.token_bytes(id) : std::string();
}

}  // namespace headscope
