// The families' tensor names as Hugging Face's modeling_*.py save them, each
// list in its files' order (model_description.cpp's `families` table names
// each family's).
#pragma once
#include <utility>
#include <vector>

#include "headscope/model/model_description.h"

namespace headscope {

struct Named {
    Weight weight;
    const char* name;  // after the layer's prefix for a layer's weight; an expert's '*' is its index
    // Where one role has a name per variant (T5's wi or wi_0 and wi_1): the
    // variant this name is for; null: every model of the family.
    bool (*applies)(const Config&) = nullptr;
};

// Hugging Face's names of one stack's tensors.
struct TensorNames {
    const char* optional_prefix;  // found with or without it
    std::vector<Named> before_layers;
    const char* layer_prefix;  // + the layer's index + "."
    std::vector<Named> layer;
    std::vector<Named> after_layers;
    // Older saves' prefixes for names that start with another: {now, then}
    // (a gemma3 checkpoint's "language_model.model." for "model.language_model.").
    std::vector<std::pair<const char*, const char*>> older_prefixes = {};
};

extern const TensorNames gpt2_names, llama_names, mixtral_names, gpt_oss_names, olmo2_names, phi3_names, gemma_names,
    gemma3_names, gpt_neox_names, bert_names, roberta_names, distilbert_names, modernbert_names;
// Encoder–decoders: each stack's names.
extern const TensorNames t5_encoder_names, t5_decoder_names, bart_encoder_names, bart_decoder_names;

}  // namespace headscope
