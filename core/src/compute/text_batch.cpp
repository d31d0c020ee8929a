// Texts as a forward reads them: see text_batch.h.
#include "headscope/compute/text_batch.h"

#include <algorithm>

namespace headscope {

namespace {

// The texts' ids into `out`, uncut.
void encode_texts(const Model& model, const BatchTexts& texts, TextBatch& out) {
    Batch& batch = out.batch;
    const bool pairs = std::any_of(texts.text_pairs.begin(), texts.text_pairs.end(),
                                   [](const std::string& pair) { return !pair.empty(); });
    if (pairs) {
        for (size_t b = 0; b < texts.texts.size(); ++b) {
            const std::string& second = b < texts.text_pairs.size() ? texts.text_pairs[b] : std::string();
            Tokenizer::Pair pair = second.empty() ? Tokenizer::Pair{model.tokenizer.encode(texts.texts[b]), {}}
                                                  : model.tokenizer.encode_pair(texts.texts[b], second);
            pair.types.resize(pair.ids.size(), 0);
            out.second_starts.push_back(pair.second_start);
            batch.token_ids.push_back(std::move(pair.ids));
            out.token_types.push_back(std::move(pair.types));
        }
        // A model of one type is given them too, and refuses a second text's type 1 as
        // transformers does; one of none (DistilBERT, ModernBERT) takes no types.
        if (model.config.type_vocab_size > 0) batch.token_types = out.token_types;
        return;
    }
    std::vector<std::vector<int32_t>> ids =
        texts.ids.empty() ? model.tokenizer.encode_texts(texts.texts, texts.special) : texts.ids;
    if (!model.config.is_encoder_decoder()) {
        batch.token_ids = std::move(ids);
        return;
    }
    batch.source_ids = std::move(ids);
    for (size_t b = 0; b < batch.source_ids.size(); ++b)
        batch.token_ids.push_back(decoder_input_ids(model, b < texts.targets.size() ? texts.targets[b] : ""));
}

}  // namespace

TextBatch text_batch(const Model& model, const BatchTexts& texts) {
    TextBatch out{Batch{{}, model.config.pad_id()}, {}, {}, {}};
    encode_texts(model, texts, out);
    if (!texts.cut_long_texts) return out;
    out.cuts = cut_to_context(model.config, out.batch);
    for (const TextCut& cut : out.cuts)
        if (!cut.source && static_cast<size_t>(cut.index) < out.token_types.size())
            out.token_types[cut.index].resize(cut.kept);
    return out;
}

}  // namespace headscope
