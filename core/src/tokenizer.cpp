// GPT-2's byte-level BPE tokenizer: the byte alphabet, GPT-2's pre-tokenizer
// pattern hand-written over code points (Unicode classes from utf8proc), and
// a merge loop over interned symbol ids that reproduces GPT-2's bpe() exactly.
#include "headscope/tokenizer.h"

#include "headscope/error.h"
#include "headscope/files.h"
#include "headscope/json_input.h"

#include <utf8proc.h>
#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

namespace headscope {

namespace {

enum class CharClass : uint8_t { Letter, Number, Space, Other };

// GPT-2's \s is that of Python's `regex` module: Unicode White_Space, that is
// TAB..CR, U+0085, U+2028, U+2029 and category Zs. (JavaScript's \s, used by
// the test reference, differs in two code points: it adds U+FEFF and lacks
// U+0085.)
bool is_space(utf8proc_int32_t cp, utf8proc_category_t category) {
    return (cp >= 0x09 && cp <= 0x0D) || cp == 0x85 || cp == 0x2028 || cp == 0x2029 || category == UTF8PROC_CATEGORY_ZS;
}

CharClass classify(utf8proc_int32_t cp) {
    const utf8proc_category_t category = utf8proc_category(cp);
    switch (category) {
        case UTF8PROC_CATEGORY_LU:
        case UTF8PROC_CATEGORY_LL:
        case UTF8PROC_CATEGORY_LT:
        case UTF8PROC_CATEGORY_LM:
        case UTF8PROC_CATEGORY_LO: return CharClass::Letter;
        case UTF8PROC_CATEGORY_ND:
        case UTF8PROC_CATEGORY_NL:
        case UTF8PROC_CATEGORY_NO: return CharClass::Number;
        default: return is_space(cp, category) ? CharClass::Space : CharClass::Other;
    }
}

struct CodePoint {
    utf8proc_int32_t value;
    size_t offset;  // of its first byte in the text
    CharClass cls;
};

std::vector<CodePoint> decode_utf8(std::string_view text) {
    std::vector<CodePoint> code_points;
    code_points.reserve(text.size());
    const auto* bytes = reinterpret_cast<const utf8proc_uint8_t*>(text.data());
    for (size_t offset = 0; offset < text.size();) {
        utf8proc_int32_t value = 0;
        // utf8proc rejects overlong forms, surrogates and values past U+10FFFF too.
        const utf8proc_ssize_t length =
            utf8proc_iterate(bytes + offset, static_cast<utf8proc_ssize_t>(text.size() - offset), &value);
        if (length < 0) {
            throw Error("invalid UTF-8 at byte " + std::to_string(offset));
        }
        code_points.push_back({value, offset, classify(value)});
        offset += static_cast<size_t>(length);
    }
    return code_points;
}

size_t run_end(const std::vector<CodePoint>& code_points, size_t i, CharClass cls) {
    while (i < code_points.size() && code_points[i].cls == cls) {
        ++i;
    }
    return i;
}

// Where the leftmost alternative of GPT-2's pattern that matches at `i` ends.
size_t match_end(const std::vector<CodePoint>& code_points, size_t i) {
    const size_t n = code_points.size();
    if (code_points[i].value == '\'' && i + 1 < n) {
        const utf8proc_int32_t a = code_points[i + 1].value;
        if (a == 's' || a == 't' || a == 'm' || a == 'd') {
            return i + 2;
        }
        if (i + 2 < n) {
            const utf8proc_int32_t b = code_points[i + 2].value;
            if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) {
                return i + 3;
            }
        }
    }
    // ` ?\p{L}+`, ` ?\p{N}+` and ` ?[^\s\p{L}\p{N}]+`: only U+0020 may lead a run.
    const size_t start = (code_points[i].value == ' ' && i + 1 < n) ? i + 1 : i;
    if (code_points[start].cls != CharClass::Space) {
        return run_end(code_points, start, code_points[start].cls);
    }
    // `\s+(?!\S)` backs off one code point before a non-space so that the last
    // space can lead the next word; `\s+` then takes a lone space.
    const size_t end = run_end(code_points, i, CharClass::Space);
    return (end < n && end - i >= 2) ? end - 1 : end;
}

std::string utf8_of(char32_t cp) {
    utf8proc_uint8_t buffer[4];
    const utf8proc_ssize_t length = utf8proc_encode_char(static_cast<utf8proc_int32_t>(cp), buffer);
    return std::string(reinterpret_cast<const char*>(buffer), static_cast<size_t>(length));
}

uint64_t pair_key(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}

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

std::vector<std::string_view> pretokenize(std::string_view text) {
    const std::vector<CodePoint> code_points = decode_utf8(text);
    auto offset = [&](size_t i) { return i < code_points.size() ? code_points[i].offset : text.size(); };
    std::vector<std::string_view> pieces;
    for (size_t i = 0; i < code_points.size();) {
        const size_t end = match_end(code_points, i);
        pieces.push_back(text.substr(offset(i), offset(end) - offset(i)));
        i = end;
    }
    return pieces;
}

Tokenizer Tokenizer::load(const std::filesystem::path& vocab_json, const std::filesystem::path& merges_txt) {
    const std::string vocab_name = vocab_json.string();
    const nlohmann::json vocab = parse_json(read_file(vocab_json), vocab_name);
    if (!vocab.is_object()) {
        throw Error(vocab_name + ": expected a JSON object of token -> id");
    }

    std::vector<int> byte_of_code_point;
    for (int b = 0; b < 256; ++b) {
        const size_t cp = byte_to_unicode()[b];
        byte_of_code_point.resize(std::max(byte_of_code_point.size(), cp + 1), -1);
        byte_of_code_point[cp] = b;
    }

    Tokenizer tokenizer;
    const size_t vocab_size = vocab.size();
    tokenizer.id_to_bytes_.resize(vocab_size);
    std::vector<bool> id_seen(vocab_size, false);
    std::unordered_map<std::string, int32_t> symbol_ids;
    symbol_ids.reserve(vocab_size * 2);
    for (const auto& [token, value] : vocab.items()) {
        if (!value.is_number_integer()) {
            throw Error(vocab_name + ": the id of a token is not an integer");
        }
        const int64_t id = value.get<int64_t>();
        // Dense ids keep vocab_size() and the symbol numbering simple; GPT-2's are 0..50256.
        if (id < 0 || static_cast<uint64_t>(id) >= vocab_size || id_seen[static_cast<size_t>(id)]) {
            throw Error(vocab_name + ": token ids must be 0.." + std::to_string(vocab_size - 1) +
                        ", each once; found " + std::to_string(id));
        }
        id_seen[static_cast<size_t>(id)] = true;
        std::string bytes;
        for (const CodePoint& cp : decode_utf8(token)) {
            if (static_cast<size_t>(cp.value) >= byte_of_code_point.size() || byte_of_code_point[cp.value] < 0) {
                throw Error(vocab_name + ": token " + std::to_string(id) +
                            " has a character outside GPT-2's byte alphabet");
            }
            bytes.push_back(static_cast<char>(byte_of_code_point[cp.value]));
        }
        tokenizer.id_to_bytes_[static_cast<size_t>(id)] = std::move(bytes);
        symbol_ids.emplace(token, static_cast<int32_t>(id));
    }

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
        if (symbol_ids.contains(utf8_of(byte_to_unicode()[b]))) continue;
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
        tokenizer.byte_symbol_[b] = intern(utf8_of(byte_to_unicode()[b]));
    }

    const std::string merges_name = merges_txt.string();
    const std::string merges = read_file(merges_txt);
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
        const int32_t left = intern(std::string(fields[0]));
        const int32_t right = intern(std::string(fields[1]));
        const int32_t result = intern(std::string(fields[0]) + std::string(fields[1]));
        // A repeated pair takes its last rank, as GPT-2's dict(zip(merges, range(n))) does.
        tokenizer.merges_[pair_key(left, right)] = Merge{rank++, result};
    }
    if (rank == 0) throw Error(merges_name + ": no merges (a BPE tokenizer needs at least one \"left right\" line)");
    return tokenizer;
}

struct Tokenizer::BpeScratch {
    struct Candidate {
        int32_t rank;
        int32_t pos;  // of the left symbol; positions keep their left-to-right order
        int32_t left;
        int32_t right;
        int32_t result;
    };
    std::vector<int32_t> symbol;  // -1 once merged into the symbol on its left
    std::vector<int32_t> prev;
    std::vector<int32_t> next;
    std::vector<Candidate> heap;
    std::vector<Candidate> round;
};

// GPT-2's bpe() repeatedly takes the lowest-ranked adjacent pair and merges
// all its non-overlapping occurrences left to right. Candidates wait in a
// min-heap by (rank, position); taking every candidate of the lowest rank as
// one round keeps that order exactly (a merge never recreates its own pair)
// while long pieces stay O(n log n) instead of one full scan per merge.
void Tokenizer::bpe(std::string_view piece, BpeScratch& s, std::vector<int32_t>& out) const {
    const auto n = static_cast<int32_t>(piece.size());
    s.symbol.resize(piece.size());
    s.prev.resize(piece.size());
    s.next.resize(piece.size());
    s.heap.clear();
    for (int32_t i = 0; i < n; ++i) {
        s.symbol[i] = byte_symbol_[static_cast<unsigned char>(piece[i])];
        s.prev[i] = i - 1;
        s.next[i] = i + 1 < n ? i + 1 : -1;
    }
    auto later = [](const BpeScratch::Candidate& a, const BpeScratch::Candidate& b) {
        return a.rank != b.rank ? a.rank > b.rank : a.pos > b.pos;
    };
    auto add_candidate = [&](int32_t pos) {
        const int32_t right = s.next[pos];
        if (right < 0) {
            return;
        }
        const auto it = merges_.find(pair_key(s.symbol[pos], s.symbol[right]));
        if (it != merges_.end()) {
            s.heap.push_back({it->second.rank, pos, s.symbol[pos], s.symbol[right], it->second.result});
            std::push_heap(s.heap.begin(), s.heap.end(), later);
        }
    };
    for (int32_t i = 0; i + 1 < n; ++i) {
        add_candidate(i);
    }

    while (!s.heap.empty()) {
        const int32_t rank = s.heap.front().rank;
        s.round.clear();
        while (!s.heap.empty() && s.heap.front().rank == rank) {
            std::pop_heap(s.heap.begin(), s.heap.end(), later);
            s.round.push_back(s.heap.back());
            s.heap.pop_back();
        }
        for (const BpeScratch::Candidate& c : s.round) {
            // Stale when an earlier merge has taken either symbol.
            const int32_t right = s.next[c.pos];
            if (s.symbol[c.pos] != c.left || right < 0 || s.symbol[right] != c.right) {
                continue;
            }
            s.symbol[c.pos] = c.result;
            s.symbol[right] = -1;
            s.next[c.pos] = s.next[right];
            if (s.next[c.pos] >= 0) {
                s.prev[s.next[c.pos]] = c.pos;
            }
            if (s.prev[c.pos] >= 0) {
                add_candidate(s.prev[c.pos]);
            }
            add_candidate(c.pos);
        }
    }

    for (int32_t i = 0; i >= 0; i = s.next[i]) {
        if (s.symbol[i] >= vocab_size()) {
            throw Error("BPE produced \"" + merge_only_symbols_[static_cast<size_t>(s.symbol[i] - vocab_size())] +
                        "\", which merges.txt makes but the vocab lacks");
        }
        out.push_back(s.symbol[i]);
    }
}

std::vector<int32_t> Tokenizer::encode(std::string_view text) const {
    std::vector<int32_t> ids;
    BpeScratch scratch;
    for (std::string_view piece : pretokenize(text)) {
        bpe(piece, scratch, ids);
    }
    return ids;
}

std::string Tokenizer::token_bytes(int32_t id) const {
    if (id < 0 || id >= vocab_size()) {
        throw Error("token id " + std::to_string(id) + " is out of range [0, " + std::to_string(vocab_size()) + ")");
    }
    return id_to_bytes_[static_cast<size_t>(id)];
}

std::vector<std::vector<int32_t>> Tokenizer::encode_texts(const std::vector<std::string>& texts) const {
    std::vector<std::vector<int32_t>> ids;
    for (size_t i = 0; i < texts.size(); ++i) {
        if (texts[i].empty()) throw Error("text " + std::to_string(i + 1) + " is empty");
        try {
            ids.push_back(encode(texts[i]));
        } catch (const Error& e) {
            throw Error("text " + std::to_string(i + 1) + ": " + e.what());
        }
    }
    return ids;
}

}  // namespace headscope
