// Texts as a forward reads them: the one path from texts to a Batch, for the
// window's live forward and headscope-cli. Each text alone, or with the
// second text of its pair (an encoder's, by the tokenizer's pair template),
// or as an encoder–decoder's source with its target after the decoder's
// start token.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "headscope/compute/attention.h"
#include "headscope/compute/forward.h"
#include "headscope/model/model.h"

namespace headscope {

struct BatchTexts {
    std::vector<std::string> texts;
    // An encoder's second text of each pair ("": none); empty, or all "": no pairs.
    std::vector<std::string> text_pairs = {};
    // An encoder–decoder's target of each text (model.h's decoder_input_ids; "" or missing: none).
    std::vector<std::string> targets = {};
    // The texts' ids given instead of the texts (already checked against the vocabulary); empty: none.
    std::vector<std::vector<int32_t>> ids = {};
    bool special = true;  // the tokenizer's special tokens around a text without a pair
    // Texts past the model's positions cut to them (forward.h's cut_to_context), which the forward refuses.
    bool cut_long_texts = false;
};

struct TextBatch {
    // What the forward reads. A model with one token type (RoBERTa) is given
    // none, as transformers does.
    Batch batch;
    std::vector<std::vector<int32_t>> token_types;  // the tokenizer's, as batch.token_ids, with pairs; else empty
    std::vector<int> second_starts;                 // (B) with pairs: where each pair's second text starts, -1: none
    std::vector<TextCut> cuts;                      // with cut_long_texts: what was cut
};

// Throws Error naming the text for one the tokenizer refuses (an empty text, invalid UTF-8).
TextBatch text_batch(const Model& model, const BatchTexts& texts);

}  // namespace headscope
