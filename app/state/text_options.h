// The checks of the text options (--text-pair, --target) against the model
// and the texts, the CLI's and the window's: one line naming the option.
#pragma once
#include <cstddef>
#include <string>

#include "headscope/base/error.h"
#include "headscope/model/model.h"

namespace headscope {

// `texts` texts (or one of --token-ids), `pairs` --text-pair and `targets`
// --target given: pairs only for an encoder, targets only for an
// encoder-decoder, and each one for each text.
inline void check_text_options(const Model& model, size_t texts, size_t pairs, size_t targets) {
    const Config& config = model.config;
    const std::string kind = config.is_encoder()           ? "an encoder"
                             : config.is_encoder_decoder() ? "an encoder-decoder"
                                                           : "a decoder";
    if (pairs && !config.is_encoder())
        throw Error("--text-pair: sentence pairs are for encoders; this model (" + config.architecture + ") is " +
                    kind);
    if (pairs && pairs != texts)
        throw Error("--text-pair: " + std::to_string(pairs) + " given for " + std::to_string(texts) +
                    " texts (one for each --text)");
    if (targets && !config.is_encoder_decoder())
        throw Error("--target: a target is for encoder-decoders; this model (" + config.architecture + ") is " + kind);
    if (targets && targets != texts)
        throw Error("--target: " + std::to_string(targets) + " given for " + std::to_string(texts) +
                    " texts (one for each --text, or none)");
}

}  // namespace headscope
