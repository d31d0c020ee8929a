// The tokenizer's encoder, and GPT-2's files: the byte alphabet, GPT-2's
// pre-tokenizer pattern hand-written over code points (Unicode classes from
// utf8proc), the pipeline's added tokens, normalizers and pre-tokenizers, and
// a merge loop over interned symbol ids that reproduces GPT-2's bpe() exactly.
#include "headscope/tokenize/tokenizer.h"

#include "headscope/base/error.h"
#include "headscope/io/files.h"
#include "headscope/io/json_input.h"
#include "pattern.h"
#include "tokenizer_internal.h"

#include <utf8proc.h>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <nlohmann/json.hpp>
#include <optional>

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

std::string utf8_of(char32_t cp) {
    utf8proc_uint8_t buffer[4];
    const utf8proc_ssize_t length = utf8proc_encode_char(static_cast<utf8proc_int32_t>(cp), buffer);
    return std::string(reinterpret_cast<const char*>(buffer), static_cast<size_t>(length));
}

void check_utf8(std::string_view text) {
    const auto* bytes = reinterpret_cast<const utf8proc_uint8_t*>(text.data());
    for (size_t offset = 0; offset < text.size();) {
        if (bytes[offset] < 0x80) {
            ++offset;
            continue;
        }
        utf8proc_int32_t value = 0;
        const utf8proc_ssize_t length =
            utf8proc_iterate(bytes + offset, static_cast<utf8proc_ssize_t>(text.size() - offset), &value);
        if (length < 0) throw Error("invalid UTF-8 at byte " + std::to_string(offset));
        offset += static_cast<size_t>(length);
    }
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
    const auto* data = reinterpret_cast<const utf8proc_uint8_t*>(token.data());
    for (size_t offset = 0; offset < token.size();) {
        utf8proc_int32_t cp = 0;
        const utf8proc_ssize_t length =
            utf8proc_iterate(data + offset, static_cast<utf8proc_ssize_t>(token.size() - offset), &cp);
        if (length < 0 || static_cast<size_t>(cp) >= byte_of_code_point.size() || byte_of_code_point[cp] < 0) {
            return std::nullopt;
        }
        bytes.push_back(static_cast<char>(byte_of_code_point[cp]));
        offset += static_cast<size_t>(length);
    }
    return bytes;
}

Tokenizer Tokenizer::load(const std::filesystem::path& vocab_json, const std::filesystem::path& merges_txt) {
    const std::string vocab_name = vocab_json.string();
    const nlohmann::json vocab = parse_json(read_file(vocab_json), vocab_name);
    if (!vocab.is_object()) {
        throw Error(vocab_name + ": expected a JSON object of token -> id");
    }

    Tokenizer tokenizer;
    const size_t vocab_size = vocab.size();
    tokenizer.id_to_bytes_.resize(vocab_size);
    std::vector<bool> id_seen(vocab_size, false);
    SymbolIds& symbol_ids = tokenizer.symbol_ids_;
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
        std::optional<std::string> bytes = byte_level_bytes(token);
        if (!bytes) {
            throw Error(vocab_name + ": token " + std::to_string(id) +
                        " has a character outside GPT-2's byte alphabet");
        }
        symbol_ids.emplace(*bytes, static_cast<int32_t>(id));
        tokenizer.id_to_bytes_[static_cast<size_t>(id)] = std::move(*bytes);
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
    return tokenizer;
}

namespace {

// The code point that starts at byte `offset` of valid UTF-8 `text`.
utf8proc_int32_t code_point_at(std::string_view text, size_t offset) {
    utf8proc_int32_t cp = 0;
    utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(text.data()) + offset,
                     static_cast<utf8proc_ssize_t>(text.size() - offset), &cp);
    return cp;
}

// Where the code point that ends at byte `end` of valid UTF-8 `text` starts.
size_t code_point_start_before(std::string_view text, size_t end) {
    size_t start = end - 1;
    while (start > 0 && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) --start;
    return start;
}

bool is_space(utf8proc_int32_t cp) { return is_space(cp, utf8proc_category(cp)); }

// A word character as Hugging Face's single_word sees one (Rust's \w): a
// letter, mark, decimal digit or letter number, connector punctuation, or a
// zero-width (non-)joiner.
bool is_word_char(utf8proc_int32_t cp) {
    switch (utf8proc_category(cp)) {
        case UTF8PROC_CATEGORY_LU:
        case UTF8PROC_CATEGORY_LL:
        case UTF8PROC_CATEGORY_LT:
        case UTF8PROC_CATEGORY_LM:
        case UTF8PROC_CATEGORY_LO:
        case UTF8PROC_CATEGORY_MN:
        case UTF8PROC_CATEGORY_MC:
        case UTF8PROC_CATEGORY_ME:
        case UTF8PROC_CATEGORY_ND:
        case UTF8PROC_CATEGORY_NL:
        case UTF8PROC_CATEGORY_PC: return true;
        default: return cp == 0x200C || cp == 0x200D;
    }
}

// Rust's char::is_numeric, which the Digits pre-tokenizer splits on.
bool is_numeric(utf8proc_int32_t cp) {
    const utf8proc_category_t category = utf8proc_category(cp);
    return category == UTF8PROC_CATEGORY_ND || category == UTF8PROC_CATEGORY_NL || category == UTF8PROC_CATEGORY_NO;
}

}  // namespace

void Tokenizer::AddedTokens::add(std::string_view content, const Token& token) {
    if (nodes.empty()) nodes.emplace_back();
    int32_t node = 0;
    for (const char c : content) {
        const auto byte = static_cast<unsigned char>(c);
        auto& next = nodes[node].next;
        const auto it =
            std::lower_bound(next.begin(), next.end(), byte,
                             [](const std::pair<unsigned char, int32_t>& e, unsigned char b) { return e.first < b; });
        if (it != next.end() && it->first == byte) {
            node = it->second;
        } else {
            const auto child = static_cast<int32_t>(nodes.size());
            next.insert(it, {byte, child});
            nodes.emplace_back();  // after the insert: it reallocates `nodes`
            node = child;
        }
    }
    nodes[node].token = static_cast<int32_t>(tokens.size());
    tokens.push_back(token);
}

void Tokenizer::AddedTokens::split(const Section& section, std::vector<Section>& out) const {
    const std::string_view text = section.text;
    auto child = [&](int32_t node, char c) {
        const auto& next = nodes[node].next;
        const auto byte = static_cast<unsigned char>(c);
        const auto it =
            std::lower_bound(next.begin(), next.end(), byte,
                             [](const std::pair<unsigned char, int32_t>& e, unsigned char b) { return e.first < b; });
        return it != next.end() && it->first == byte ? it->second : -1;
    };
    size_t emitted = 0;  // the text before this is in `out`
    for (size_t i = 0; i < text.size();) {
        // The longest token that starts at i.
        int32_t found = -1;
        size_t end = i;
        int32_t node = 0;
        for (size_t j = i; j < text.size() && (node = child(node, text[j])) >= 0; ++j) {
            if (nodes[node].token >= 0) {
                found = nodes[node].token;
                end = j + 1;
            }
        }
        if (found < 0) {
            ++i;
            continue;
        }
        const Token& token = tokens[static_cast<size_t>(found)];
        size_t start = i;
        // The search goes on after a match whether or not it is kept, as in Hugging Face's tokenizers.
        i = end;
        if (token.single_word &&
            ((start > 0 && is_word_char(code_point_at(text, code_point_start_before(text, start)))) ||
             (end < text.size() && is_word_char(code_point_at(text, end))))) {
            continue;
        }
        if (token.lstrip) {
            while (start > emitted && is_space(code_point_at(text, code_point_start_before(text, start)))) {
                start = code_point_start_before(text, start);
            }
        }
        if (token.rstrip) {
            while (end < text.size() && is_space(code_point_at(text, end))) {
                end += static_cast<size_t>(utf8proc_utf8class[static_cast<unsigned char>(text[end])]);
            }
            i = end;
        }
        if (start > emitted)
            out.push_back({text.substr(emitted, start - emitted), -1, section.at_text_start && emitted == 0});
        out.push_back({text.substr(start, end - start), token.id, false});
        emitted = end;
    }
    if (emitted < text.size()) out.push_back({text.substr(emitted), -1, section.at_text_start && emitted == 0});
}

struct Tokenizer::Scratch {
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
    bool last_unknown = false;                      // the last symbol stands for characters without a token
    static constexpr size_t max_cached_piece = 64;  // bytes; longer pieces seldom recur
    std::unordered_map<std::string, std::vector<int32_t>, StringHash, std::equal_to<>> merged;  // piece -> ids

    std::vector<Section> parts, pieces, next_pieces;
    std::deque<std::string> owned;  // rewritten text the sections view; a deque never moves its strings
    std::vector<Match> matches;
    std::optional<MatchScratch> patterns;  // made at the first pattern an encode runs
};

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special) const {
    check_utf8(text);
    std::vector<int32_t> ids;
    if (add_special) ids = prefix_ids_;
    Scratch scratch;
    std::vector<Section> sections;
    const Section whole{text, -1, true};
    if (added_.empty()) {
        sections.push_back(whole);
    } else {
        added_.split(whole, sections);
    }
    for (const Section& section : sections) {
        if (section.id >= 0) {
            ids.push_back(section.id);
        } else {
            encode_section(section, scratch, ids);
        }
    }
    if (add_special) ids.insert(ids.end(), suffix_ids_.begin(), suffix_ids_.end());
    return ids;
}

void Tokenizer::encode_section(const Section& section, Scratch& scratch, std::vector<int32_t>& ids) const {
    scratch.owned.clear();
    // Hugging Face normalizes each stretch between added tokens on its own (a
    // Prepend normalizer prepends to each), then finds the normalized added
    // tokens in it.
    Section normalized = section;
    if (!normalizers_.empty()) normalized.text = scratch.owned.emplace_back(normalize(section.text));
    scratch.parts.clear();
    if (normalized_added_.empty()) {
        scratch.parts.push_back(normalized);
    } else {
        normalized_added_.split(normalized, scratch.parts);
    }
    for (const Section& part : scratch.parts) {
        if (part.id >= 0) {
            ids.push_back(part.id);
            continue;
        }
        pre_tokenize(part, scratch);
        for (const Section& piece : scratch.pieces) encode_piece(piece.text, scratch, ids);
    }
}

std::string Tokenizer::normalize(std::string_view text) const {
    // Normalizers may lengthen a text (Llama 2's ▁ for each space makes it up
    // to three times longer), but a hostile file's never without bound.
    const size_t max_size = 16 * text.size() + 4096;
    auto check_size = [&](size_t size) {
        if (size > max_size) throw Error("the tokenizer's normalizers make this text over 16 times longer");
    };
    std::string out(text);
    for (const Normalizer& n : normalizers_) {
        switch (n.kind) {
            case Normalizer::Kind::nfc: {
                // ASCII text is in NFC already.
                if (std::all_of(out.begin(), out.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; })) {
                    break;
                }
                utf8proc_uint8_t* composed = nullptr;
                const utf8proc_ssize_t length = utf8proc_map(
                    reinterpret_cast<const utf8proc_uint8_t*>(out.data()), static_cast<utf8proc_ssize_t>(out.size()),
                    &composed, static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
                if (length < 0) throw Error(std::string("NFC normalization failed: ") + utf8proc_errmsg(length));
                out.assign(reinterpret_cast<const char*>(composed), static_cast<size_t>(length));
                std::free(composed);
                check_size(out.size());
                break;
            }
            case Normalizer::Kind::prepend:
                if (out.empty()) break;
                check_size(out.size() + n.content.size());
                out.insert(0, n.content);
                break;
            case Normalizer::Kind::replace: {
                size_t count = 0;
                for (size_t at = out.find(n.pattern); at != std::string::npos;
                     at = out.find(n.pattern, at + n.pattern.size())) {
                    ++count;
                }
                if (n.content.size() > n.pattern.size())
                    check_size(out.size() + count * (n.content.size() - n.pattern.size()));
                out = replace_all(out, n.pattern, n.content);
                break;
            }
        }
    }
    return out;
}

void Tokenizer::split_at(const Section& piece, const std::vector<Match>& matches, SplitBehavior behavior,
                         std::vector<Section>& out) {
    struct Segment {
        size_t start, end;
        bool is_match;
    };
    std::vector<Segment> segments;
    size_t at = 0;
    for (const Match& m : matches) {
        if (m.start > at) segments.push_back({at, m.start, false});
        segments.push_back({m.start, m.end, true});
        at = m.end;
    }
    if (at < piece.text.size()) segments.push_back({at, piece.text.size(), false});

    std::vector<Segment> kept;
    switch (behavior) {
        case SplitBehavior::removed:
            for (const Segment& s : segments)
                if (!s.is_match) kept.push_back(s);
            break;
        case SplitBehavior::isolated: kept = segments; break;
        case SplitBehavior::merged_with_previous:
            // A match joins the text before it.
            for (size_t i = 0; i < segments.size(); ++i) {
                if (segments[i].is_match && i > 0 && !segments[i - 1].is_match) {
                    kept.back().end = segments[i].end;
                } else {
                    kept.push_back(segments[i]);
                }
            }
            break;
        case SplitBehavior::merged_with_next:
            // A match joins the text after it.
            for (size_t i = segments.size(); i-- > 0;) {
                if (segments[i].is_match && i + 1 < segments.size() && !segments[i + 1].is_match) {
                    kept.back().start = segments[i].start;
                } else {
                    kept.push_back(segments[i]);
                }
            }
            std::reverse(kept.begin(), kept.end());
            break;
        case SplitBehavior::contiguous:
            // Adjacent matches become one.
            for (size_t i = 0; i < segments.size(); ++i) {
                if (segments[i].is_match && i > 0 && segments[i - 1].is_match) {
                    kept.back().end = segments[i].end;
                } else {
                    kept.push_back(segments[i]);
                }
            }
            break;
    }
    for (const Segment& s : kept) {
        out.push_back({piece.text.substr(s.start, s.end - s.start), -1, piece.at_text_start && s.start == 0});
    }
}

void Tokenizer::pre_tokenize(const Section& part, Scratch& s) const {
    s.pieces.assign(1, part);
    for (const PreTokenizer& step : pre_tokenizers_) {
        s.next_pieces.clear();
        for (const Section& piece : s.pieces) pre_tokenize_piece(step, piece, s);
        std::swap(s.pieces, s.next_pieces);
    }
}

void Tokenizer::pre_tokenize_piece(const PreTokenizer& step, const Section& piece, Scratch& s) const {
    auto split_by_pattern = [&](const Section& on, SplitBehavior behavior) {
        if (!s.patterns) s.patterns.emplace();
        s.matches.clear();
        step.pattern->find_all(on.text, *s.patterns, s.matches);
        split_at(on, s.matches, behavior, s.next_pieces);
    };
    switch (step.kind) {
        case PreTokenizer::Kind::gpt2:
            for (const std::string_view p : pretokenize(piece.text)) {
                s.next_pieces.push_back({p, -1, piece.at_text_start && p.data() == piece.text.data()});
            }
            return;
        case PreTokenizer::Kind::split: return split_by_pattern(piece, step.behavior);
        case PreTokenizer::Kind::byte_level: {
            Section spaced = piece;
            if (step.add_prefix_space && !piece.text.starts_with(' ')) {
                spaced.text = s.owned.emplace_back(" " + std::string(piece.text));
            }
            if (step.pattern) return split_by_pattern(spaced, SplitBehavior::isolated);
            s.next_pieces.push_back(spaced);
            return;
        }
        case PreTokenizer::Kind::metaspace: {
            std::string text = replace_all(piece.text, " ", step.replacement);
            const bool prepend =
                step.prepend == PrependScheme::always || (step.prepend == PrependScheme::first && piece.at_text_start);
            if (prepend && !text.starts_with(step.replacement)) text.insert(0, step.replacement);
            const Section replaced{s.owned.emplace_back(std::move(text)), -1, piece.at_text_start};
            if (!step.split) {
                s.next_pieces.push_back(replaced);
                return;
            }
            s.matches.clear();
            for (size_t at = replaced.text.find(step.replacement); at != std::string_view::npos;
                 at = replaced.text.find(step.replacement, at + step.replacement.size())) {
                s.matches.push_back({at, at + step.replacement.size()});
            }
            return split_at(replaced, s.matches, SplitBehavior::merged_with_next, s.next_pieces);
        }
        case PreTokenizer::Kind::digits: {
            s.matches.clear();
            for (size_t at = 0; at < piece.text.size();) {
                const auto length = static_cast<size_t>(utf8proc_utf8class[static_cast<unsigned char>(piece.text[at])]);
                if (is_numeric(code_point_at(piece.text, at))) s.matches.push_back({at, at + length});
                at += length;
            }
            const SplitBehavior behavior = step.individual_digits ? SplitBehavior::isolated : SplitBehavior::contiguous;
            return split_at(piece, s.matches, behavior, s.next_pieces);
        }
    }
}

void Tokenizer::encode_piece(std::string_view piece, Scratch& s, std::vector<int32_t>& out) const {
    if (ignore_merges_) {
        const auto it = symbol_ids_.find(piece);
        if (it != symbol_ids_.end()) {
            out.push_back(it->second);
            return;
        }
    }
    // Words recur: each distinct short piece is merged once per encode, as
    // Hugging Face's BPE caches them.
    const bool cache = piece.size() <= Scratch::max_cached_piece;
    if (cache) {
        if (const auto it = s.merged.find(piece); it != s.merged.end()) {
            out.insert(out.end(), it->second.begin(), it->second.end());
            return;
        }
    }
    const size_t first = out.size();
    s.symbol.clear();
    s.last_unknown = false;
    for (size_t i = 0; i < piece.size();) {
        // A byte, or a character.
        const size_t length =
            byte_level_ ? 1 : static_cast<size_t>(utf8proc_utf8class[static_cast<unsigned char>(piece[i])]);
        const std::string_view unit = piece.substr(i, length);
        int32_t symbol = -1;
        if (byte_level_) {
            symbol = byte_symbol_[static_cast<unsigned char>(piece[i])];
        } else if (const auto it = symbol_ids_.find(unit); it != symbol_ids_.end()) {
            symbol = it->second;
        }
        if (symbol >= 0) {
            s.symbol.push_back(symbol);
            s.last_unknown = false;
        } else {
            add_missing_symbol(unit, s);
        }
        i += length;
    }
    bpe(s, out);
    if (cache) s.merged.emplace(piece, std::vector<int32_t>(out.begin() + static_cast<ptrdiff_t>(first), out.end()));
}

void Tokenizer::add_missing_symbol(std::string_view unit, Scratch& s) const {
    if (byte_fallback_ && std::all_of(unit.begin(), unit.end(),
                                      [&](char c) { return byte_fallback_ids_[static_cast<unsigned char>(c)] >= 0; })) {
        for (const char c : unit) s.symbol.push_back(byte_fallback_ids_[static_cast<unsigned char>(c)]);
        s.last_unknown = false;
        return;
    }
    if (unk_id_ < 0) {
        char shown[32];
        if (byte_level_) {
            std::snprintf(shown, sizeof shown, "the byte 0x%02X", static_cast<unsigned char>(unit[0]));
        } else {
            std::snprintf(shown, sizeof shown, "U+%04X", static_cast<unsigned>(code_point_at(unit, 0)));
        }
        throw Error(std::string("no token for ") + shown + ", and the tokenizer has no unknown token");
    }
    if (!(fuse_unk_ && s.last_unknown)) s.symbol.push_back(unk_id_);
    s.last_unknown = true;
}

// GPT-2's bpe() repeatedly takes the lowest-ranked adjacent pair and merges
// all its non-overlapping occurrences left to right. Candidates wait in a
// min-heap by (rank, position); taking every candidate of the lowest rank as
// one round keeps that order exactly (a merge never recreates its own pair)
// while long pieces stay O(n log n) instead of one full scan per merge.
// Hugging Face's BPE merges one (rank, position) at a time, the same order
// wherever a merge never makes a pair ranked before itself, as in every
// trained vocabulary.
void Tokenizer::bpe(Scratch& s, std::vector<int32_t>& out) const {
    const auto n = static_cast<int32_t>(s.symbol.size());
    if (n == 0) return;
    s.prev.resize(s.symbol.size());
    s.next.resize(s.symbol.size());
    s.heap.clear();
    for (int32_t i = 0; i < n; ++i) {
        s.prev[i] = i - 1;
        s.next[i] = i + 1 < n ? i + 1 : -1;
    }
    auto later = [](const Scratch::Candidate& a, const Scratch::Candidate& b) {
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
        for (const Scratch::Candidate& c : s.round) {
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
            std::string shown;  // in the byte alphabet, as merges.txt writes it
            for (const char c : merge_only_symbols_[static_cast<size_t>(s.symbol[i] - vocab_size())]) {
                shown += utf8_of(byte_to_unicode()[static_cast<unsigned char>(c)]);
            }
            throw Error("BPE produced \"" + shown + "\", which merges.txt makes but the vocab lacks");
        }
        out.push_back(s.symbol[i]);
    }
}

std::string Tokenizer::token_bytes(int32_t id) const {
    if (id < 0 || id >= vocab_size()) {
        throw Error("token id " + std::to_string(id) + " is out of range [0, " + std::to_string(vocab_size()) + ")");
    }
    return id_to_bytes_[static_cast<size_t>(id)];
}

std::vector<std::vector<int32_t>> Tokenizer::encode_texts(const std::vector<std::string>& texts,
                                                          bool add_special) const {
    std::vector<std::vector<int32_t>> ids;
    for (size_t i = 0; i < texts.size(); ++i) {
        if (texts[i].empty()) throw Error("text " + std::to_string(i + 1) + " is empty");
        try {
            ids.push_back(encode(texts[i], add_special));
        } catch (const Error& e) {
            throw Error("text " + std::to_string(i + 1) + ": " + e.what());
        }
    }
    return ids;
}

}  // namespace headscope
