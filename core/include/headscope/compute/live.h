// The live forward: what the window computes for every keystroke, run as a
// Worker job (worker.h) so typing never waits for it.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "headscope/compute/backend.h"
#include "headscope/compute/forward.h"
#include "headscope/compute/prefix_cache.h"

namespace headscope {

struct LiveRequest {
    std::vector<std::string> texts;  // the batch, one text per entry
    AttentionOptions options;
    // An encoder's second text of each pair ("": none), as texts; empty: no pairs.
    std::vector<std::string> text_pairs = {};
    // An encoder–decoder's target of each text (the decoder's input after its
    // start token, model.h's decoder_input_ids), as texts; the texts are its sources.
    std::vector<std::string> targets = {};
    // Texts past the model's positions cut to them (forward.h's cut_to_context), not refused.
    bool cut_long_texts = false;
};

struct LiveResult {
    std::vector<std::vector<int32_t>> token_ids;    // an encoder–decoder's: the decoder's inputs
    std::vector<std::vector<int32_t>> source_ids;   // an encoder–decoder's sources; else empty
    std::vector<std::vector<int32_t>> token_types;  // as token_ids, with pairs; else empty
    std::vector<int> second_starts;                 // (B) with pairs: where each pair's second text starts, -1: none
    std::vector<TextCut> cuts;                      // the texts cut to the model's positions (cut_long_texts)
    AttentionResult attention;
    double compute_ms = 0;   // tokenizing and the forward
    double tokenize_ms = 0;  // the tokenizing part of compute_ms
};

// Tokenizes the texts (each with its pair, by the tokenizer's pair template)
// and runs the forward on `backend`, which has `model`'s
// weights loaded, reusing what `cache` holds of the last request's token
// prefixes (prefix_cache.h; the window keeps one across keystrokes), telling
// `progress` of each layer (Backend::forward). Throws Error for a request the
// model refuses (an empty text, too many tokens, a head count that does not
// divide C, ...), and Cancelled when `progress` throws it.
LiveResult compute_live(Backend& backend, const Model& model, const LiveRequest& request, PrefixCache* cache = nullptr,
                        const Progress& progress = {});

}  // namespace headscope
