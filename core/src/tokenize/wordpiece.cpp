// BERT's tokenizer pieces, as Hugging Face's tokenizers defines them: the
// BertNormalizer, and the WordPiece model's greedy longest-match split; and
// where llama.cpp's WPM tokenizer (a GGUF bert vocabulary) differs.
#include "headscope/tokenize/tokenizer.h"
#include "tokenizer_internal.h"
#include "unicode.h"

namespace headscope {

namespace {

// The CJK Unified Ideographs blocks BERT spaces out (tokenizers' is_chinese_char).
bool is_cjk_ideograph(char32_t cp) {
    return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) || (cp >= 0x20000 && cp <= 0x2A6DF) ||
           (cp >= 0x2A700 && cp <= 0x2B73F) || (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B920 && cp <= 0x2CEAF) ||
           (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

}  // namespace

std::string bert_normalized(std::string_view text, bool clean_text, bool chinese_chars, bool strip_accents,
                            bool accents_as_llama_cpp, bool lowercase) {
    std::string out(text);
    if (clean_text) {
        // NUL, U+FFFD and controls (but tab, line feed and carriage return) go; whitespace becomes a space.
        out = each_code_point(out, [](char32_t cp, std::string& o) {
            const bool whitespace = cp == '\t' || cp == '\n' || cp == '\r' || is_white_space(cp);
            if (cp == 0 || cp == 0xFFFD || (!whitespace && is_other(cp))) return;
            o += whitespace ? std::string(" ") : utf8_of(cp);
        });
    }
    if (chinese_chars) {
        out = each_code_point(out, [](char32_t cp, std::string& o) {
            const bool spaced = is_cjk_ideograph(cp);
            if (spaced) o += ' ';
            o += utf8_of(cp);
            if (spaced) o += ' ';
        });
    }
    if (strip_accents && accents_as_llama_cpp) {
        out = each_code_point(out, [](char32_t cp, std::string& o) {
            const char32_t base = nfd_first_code_point(cp);
            if (!is_mark(base)) o += utf8_of(base);
        });
    } else if (strip_accents) {
        out = each_code_point(to_nfd(out), [](char32_t cp, std::string& o) {
            if (!is_nonspacing_mark(cp)) o += utf8_of(cp);
        });
    }
    if (lowercase) out = each_code_point(out, [](char32_t cp, std::string& o) { o += utf8_of(to_lower(cp)); });
    return out;
}

void Tokenizer::word_pieces(std::string_view word, std::vector<int32_t>& out) const {
    std::string prefixed;
    if (!word_prefix_.empty()) word = prefixed.assign(word_prefix_).append(word);
    size_t characters = 0;
    for (size_t at = 0; at < word.size(); at += utf8_length(word[at])) ++characters;
    const size_t first = out.size();
    for (size_t start = 0; characters <= max_word_chars_ && start < word.size();) {
        // The longest token (after the first, with the continuing prefix)
        // starting here and ending at a character's end, along the trie.
        int32_t found = -1, node = start > 0 ? continuing_node_ : TokenTrie::root;
        size_t found_end = start;
        for (size_t end = start; node != TokenTrie::none && end < word.size();) {
            node = token_trie_.child(node, static_cast<uint8_t>(word[end++]));
            const bool char_ends = end == word.size() || !is_continuation_byte(word[end]);
            if (node != TokenTrie::none && char_ends && token_trie_.id(node) >= 0)
                found = token_trie_.id(node), found_end = end;
        }
        if (found < 0) break;  // no token starts the rest: the whole word is unknown
        out.push_back(found);
        start = found_end;
        if (start == word.size()) return;
    }
    out.resize(first);
    out.push_back(unk_id_);
}

}  // namespace headscope
