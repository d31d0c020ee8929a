// The BPE model: a piece's first symbols (its bytes, or its characters with
// byte fallback and the unknown token), then Hugging Face's merge loop over
// interned symbol ids.
#include "encode_scratch.h"
#include "headscope/base/error.h"
#include "headscope/tokenize/tokenizer.h"
#include "tokenizer_internal.h"
#include "unicode.h"

#include <algorithm>
#include <cstdio>

namespace headscope {

void Tokenizer::encode_piece(std::string_view piece, Scratch& s, std::vector<int32_t>& out) const {
    if (word_piece_) return word_pieces(piece, out);
    if (unigram_) return unigram_pieces(piece, out);
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
        const size_t length = byte_level_ ? 1 : utf8_length(piece[i]);
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
            std::snprintf(shown, sizeof shown, "U+%04X", static_cast<unsigned>(code_point_at(unit, 0).value));
        }
        throw Error(std::string("no token for ") + shown + ", and the tokenizer has no unknown token");
    }
    if (!(fuse_unk_ && s.last_unknown)) s.symbol.push_back(unk_id_);
    s.last_unknown = true;
}

// Hugging Face's BPE: candidates wait in a min-heap by (rank, position) and
// merge one at a time, so a pair that a merge makes and that ranks before
// the rest merges next (Gemma 3's runs of spaces: "▁" x 30 + "▁" ranks
// first). A candidate is stale once the pair at its position no longer makes
// its result. GPT-2's bpe() merges each rank everywhere at once, the same
// order wherever no merge makes a pair ranked before itself.
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
    // The merge of the symbol at `pos` with the one after it, if any.
    auto merge_at = [&](int32_t pos) -> const Merge* {
        const int32_t right = s.next[pos];
        if (s.symbol[pos] < 0 || right < 0) return nullptr;
        const auto it = merges_.find(pair_key(s.symbol[pos], s.symbol[right]));
        return it != merges_.end() ? &it->second : nullptr;
    };
    auto add_candidate = [&](int32_t pos) {
        if (const Merge* merge = merge_at(pos)) {
            s.heap.push_back({merge->rank, pos, merge->result});
            std::push_heap(s.heap.begin(), s.heap.end(), later);
        }
    };
    for (int32_t i = 0; i + 1 < n; ++i) {
        add_candidate(i);
    }

    while (!s.heap.empty()) {
        std::pop_heap(s.heap.begin(), s.heap.end(), later);
        const Scratch::Candidate c = s.heap.back();
        s.heap.pop_back();
        const Merge* merge = merge_at(c.pos);
        if (merge == nullptr || merge->result != c.result) {
            continue;
        }
        const int32_t right = s.next[c.pos];
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

}  // namespace headscope
