// What one Tokenizer::encode reuses from piece to piece (private to core):
// the BPE merge loop's arrays, merged pieces, the pre-tokenizers' pieces and
// rewritten text, and PCRE2's match data. encode.cpp, pre_tokenizers.cpp and
// bpe.cpp share it.
#pragma once
#include "headscope/tokenize/tokenizer.h"
#include "pattern.h"

#include <deque>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace headscope {

struct Tokenizer::Scratch {
    struct Candidate {
        int32_t rank;
        int32_t pos;  // of the left symbol; positions keep their left-to-right order
        int32_t result;
    };
    std::vector<int32_t> symbol;  // -1 once merged into the symbol on its left
    std::vector<int32_t> prev;
    std::vector<int32_t> next;
    std::vector<Candidate> heap;
    bool last_unknown = false;                      // the last symbol stands for characters without a token
    static constexpr size_t max_cached_piece = 64;  // bytes; longer pieces seldom recur
    std::unordered_map<std::string, std::vector<int32_t>, StringHash, std::equal_to<>> merged;  // piece -> ids

    std::vector<Section> parts, pieces, next_pieces;
    std::deque<std::string> owned;  // rewritten text the sections view; a deque never moves its strings
    std::vector<Match> matches;
    std::optional<MatchScratch> patterns;  // made at the first pattern an encode runs
};

}  // namespace headscope
