// GPT-2's own files, vocab.json and merges.txt (RoBERTa's and BART's too,
// with their special tokens), and its byte alphabet: the 256 code points that
// stand for bytes in the tokens of every byte-level BPE (tokenizer.json's
// too), and the raw bytes a token written in them stands for.
#include "headscope/base/error.h"
#include "headscope/io/files.h"
#include "headscope/io/json_input.h"
#include "headscope/tokenize/tokenizer.h"
#include "tokenizer_internal.h"
#include "unicode.h"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>

namespace headscope {

namespace {

constexpr size_t max_merges_bytes = 16 << 20;

// Splits a merges.txt line on spaces and tabs.
std::vector<std::string_view> fields_of(std::string_view line) {
    std::vector<std::string_view> fields;
    size_t i = 0;
    while (i < line.size()) {
        const size_t start = line.find_first_not_of(" \t", i);
        if (start == std::string_view::npos) {
            break;
        }
        const size_t end = std::min(line.find_first_of(" \t", start), line.size());
        fields.push_back(line.substr(start, end - start));
        i = end;
    }
    return fields;
}

}  // namespace

const std::array<char32_t, 256>& byte_to_unicode() {
    static const std::array<char32_t, 256> table = [] {
        std::array<char32_t, 256> t{};
        // Printable Latin-1 bytes stand for themselves; the others take the
        // code points from 256 up, in byte order, so no token shows a space or
        // control character.
        char32_t next = 256;
        for (int b = 0; b < 256; ++b) {
            const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
            t[b] = printable ? static_cast<char32_t>(b) : next++;
        }
        return t;
    }();
    return table;
}

std::optional<std::string> byte_level_bytes(std::string_view token) {
    static const std::vector<int> byte_of_code_point = [] {
        std::vector<int> table;
        for (int b = 0; b < 256; ++b) {
            const size_t cp = byte_to_unicode()[b];
            table.resize(std::max(table.size(), cp + 1), -1);
            table[cp] = b;
        }
        return table;
    }();
    std::string bytes;
    for (size_t offset = 0; offset < token.size();) {
        const CodePointAt cp = code_point_at(token, offset);
        if (cp.length == 0 || cp.value >= byte_of_code_point.size() || byte_of_code_point[cp.value] < 0) {
            return std::nullopt;
        }
        bytes.push_back(static_cast<char>(byte_of_code_point[cp.value]));
        offset += cp.length;
    }
    return bytes;
}

void Tokenizer::add_roberta_special_tokens(const std::string& file) {
    // As RobertaTokenizer and BartTokenizer make them: AddedTokens, only <mask> with lstrip.
    const auto id_of = [&](const std::string& token) {
        const auto it = symbol_ids_.find(token);
        return it == symbol_ids_.end() || it->second >= vocab_size() ? -1 : it->second;
    };
    for (const char* token : {"<s>", "<pad>", "</s>", "<unk>", "<mask>"})
        if (const int32_t id = id_of(token); id >= 0)
            added_.add(token, {id, std::string_view(token) == "<mask>", false, false});
    const int32_t cls = id_of("<s>"), sep = id_of("</s>");
    if (cls < 0 || sep < 0)
        throw Error(file + ": no " + (cls < 0 ? "<s>" : "</s>") +
                    " token, which a RoBERTa or BART tokenizer puts around every text");
    post_ = PostProcessor::roberta(cls, sep);
}

Tokenizer Tokenizer::load(const std::filesystem::path& vocab_json, const std::filesystem::path& merges_txt,
                          VocabFilesStyle style) {
    const std::string vocab_name = vocab_json.string();
    const nlohmann::json vocab = read_json_file(vocab_json, vocab_limits);

    Tokenizer tokenizer;
    const size_t vocab_size = vocab.size();
    tokenizer.id_to_bytes_.resize(vocab_size);
    SymbolIds& symbol_ids = tokenizer.symbol_ids_;
    symbol_ids.reserve(vocab_size * 2);
    for_each_dense_id(vocab, vocab_name, [&](const std::string& token, int32_t id) {
        std::optional<std::string> bytes = byte_level_bytes(token);
        if (!bytes) {
            throw Error(vocab_name + ": token " + std::to_string(id) +
                        " has a character outside GPT-2's byte alphabet");
        }
        symbol_ids.emplace(*bytes, id);
        tokenizer.id_to_bytes_[static_cast<size_t>(id)] = std::move(*bytes);
    });

    auto intern = [&](std::string symbol) {
        const auto [it, added] =
            symbol_ids.try_emplace(symbol, static_cast<int32_t>(vocab_size + tokenizer.merge_only_symbols_.size()));
        if (added) {
            tokenizer.merge_only_symbols_.push_back(std::move(symbol));
        }
        return it->second;
    };
    // Every byte needs its token: BPE starts from them, and any text may hold any byte.
    int missing_bytes = 0, first_missing = -1;
    for (int b = 0; b < 256; ++b) {
        if (symbol_ids.contains(std::string(1, static_cast<char>(b)))) continue;
        if (missing_bytes++ == 0) first_missing = b;
    }
    if (missing_bytes) {
        char first[8];
        std::snprintf(first, sizeof first, "0x%02x", first_missing);
        throw Error(vocab_name + ": no token for " + std::to_string(missing_bytes) +
                    " of the 256 bytes (the first is " + first + ", '" + utf8_of(byte_to_unicode()[first_missing]) +
                    "'): a byte-level BPE vocabulary has one for every byte");
    }
    for (int b = 0; b < 256; ++b) {
        tokenizer.byte_symbol_[b] = symbol_ids.at(std::string(1, static_cast<char>(b)));
    }

    const std::string merges_name = merges_txt.string();
    const std::string merges = read_file(merges_txt, "", max_merges_bytes);
    std::string_view rest = merges;
    int32_t rank = 0;
    for (size_t line_number = 1; !rest.empty(); ++line_number) {
        const size_t newline = rest.find('\n');
        std::string_view line = rest.substr(0, newline);
        rest = newline == std::string_view::npos ? std::string_view() : rest.substr(newline + 1);
        if (!line.empty() && line.back() == '\r') {
            line.remove_suffix(1);
        }
        if (line.empty() || (line_number == 1 && line.starts_with("#version"))) {
            continue;
        }
        const std::vector<std::string_view> fields = fields_of(line);
        if (fields.size() != 2) {
            throw Error(merges_name + ":" + std::to_string(line_number) + ": expected \"left right\"");
        }
        const int32_t merge_rank = rank++;
        // Symbols are raw bytes; one written outside the byte alphabet can never take part.
        const auto left_bytes = byte_level_bytes(fields[0]), right_bytes = byte_level_bytes(fields[1]);
        if (!left_bytes || !right_bytes) continue;
        const int32_t left = intern(*left_bytes);
        const int32_t right = intern(*right_bytes);
        const int32_t result = intern(*left_bytes + *right_bytes);
        // A repeated pair takes its last rank, as GPT-2's dict(zip(merges, range(n))) does.
        tokenizer.merges_[pair_key(left, right)] = Merge{merge_rank, result};
    }
    if (rank == 0) throw Error(merges_name + ": no merges (a BPE tokenizer needs at least one \"left right\" line)");
    tokenizer.pre_tokenizers_.push_back({.kind = PreTokenizer::Kind::gpt2});
    if (style == VocabFilesStyle::roberta) tokenizer.add_roberta_special_tokens(vocab_name);
    return tokenizer;
}

}  // namespace headscope
