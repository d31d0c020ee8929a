// The BPE model: a piece's first symbols (its bytes, or its characters with
// byte fallback and the unknown token), then a merge loop over interned
// symbol ids that reproduces GPT-2's bpe() exactly.
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

}  // namespace headscope
