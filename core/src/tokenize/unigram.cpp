// Unigram models (Tokenizer::unigram_pieces) and SentencePiece's nmt_nfkc
// normalizer, as Hugging Face's tokenizers has them for T5's and XLM-R's
// tokenizer.json.
#include <limits>
#include <vector>

#include "headscope/tokenize/tokenizer.h"
#include "tokenizer_internal.h"
#include "unicode.h"

namespace headscope {

std::string nmt_nfkc_normalized(std::string_view text) {
    const std::string cleaned = each_code_point(text, [](char32_t cp, std::string& out) {
        const bool control = (cp >= 0x01 && cp <= 0x08) || cp == 0x0B || (cp >= 0x0E && cp <= 0x1F) || cp == 0x7F ||
                             cp == 0x8F || cp == 0x9F;
        const bool space = cp == 0x09 || cp == 0x0A || cp == 0x0C || cp == 0x0D || cp == 0xA0 || cp == 0x1680 ||
                           (cp >= 0x2000 && cp <= 0x200F) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F ||
                           cp == 0x205F || cp == 0x2581 || cp == 0x3000 || cp == 0xFEFF || cp == 0xFFFD;
        if (!control) out += space ? std::string(" ") : utf8_of(cp);
    });
    // Each stretch between fullwidth tildes (U+FF5E, which NFKC would make "~") on its own.
    const std::string_view tilde = "\xEF\xBD\x9E";
    std::string out;
    for (size_t begin = 0;;) {
        const size_t end = cleaned.find(tilde, begin);
        out += to_nfkc(std::string_view(cleaned).substr(begin, end == std::string::npos ? end : end - begin));
        if (end == std::string::npos) return out;
        out += tilde;
        begin = end + tilde.size();
    }
}

void Tokenizer::unigram_pieces(std::string_view piece, std::vector<int32_t>& out) const {
    // best[e]: the highest score of a split of the piece's first e bytes, the
    // token ending that split and where it starts; at character boundaries only.
    struct Best {
        double score = -std::numeric_limits<double>::infinity();
        int32_t id = -1;
        size_t start = 0;
    };
    std::vector<Best> best(piece.size() + 1);
    best[0].score = 0;
    for (size_t start = 0; start < piece.size(); start += utf8_length(piece[start])) {
        const size_t first_char = utf8_length(piece[start]);
        bool char_covered = false;
        // Every token starting here, along the trie: as far as one goes.
        int32_t node = TokenTrie::root;
        for (size_t end = start + 1; end <= piece.size(); ++end) {
            node = token_trie_.child(node, static_cast<uint8_t>(piece[end - 1]));
            if (node == TokenTrie::none) break;
            const int32_t id = token_trie_.id(node);
            if (id < 0) continue;
            char_covered |= end - start == first_char;
            const double score = best[start].score + unigram_scores_[static_cast<size_t>(id)];
            if (score > best[end].score) best[end] = {score, id, start};  // on a tie, the earlier start
        }
        if (!char_covered) {  // the character alone as the unknown token
            const double score = best[start].score + unknown_score_;
            if (score > best[start + first_char].score) best[start + first_char] = {score, unk_id_, start};
        }
    }
    std::vector<int32_t> ids;
    for (size_t end = piece.size(); end > 0; end = best[end].start) ids.push_back(best[end].id);
    for (auto it = ids.rbegin(); it != ids.rend(); ++it)
        if (*it != unk_id_ || out.empty() || out.back() != unk_id_ || it == ids.rbegin()) out.push_back(*it);
}

}  // namespace headscope
