// headscope-cli's attention formats: see attention_export.h.
#include "headscope/attention_export.h"

#include <charconv>
#include <ostream>

#include "headscope/npy.h"

namespace headscope {

using Json = nlohmann::ordered_json;

std::string dump_json(const Json& json) { return json.dump(-1, ' ', false, Json::error_handler_t::replace); }

Json token_texts(const Tokenizer& tokenizer, const std::vector<int32_t>& ids) {
    Json texts = Json::array();
    for (int32_t id : ids) texts.push_back(tokenizer.token_bytes(id));
    return texts;
}

Json attention_metadata(const Model& model, const std::string& backend, const std::string& backend_reason,
                        const std::vector<std::string>& texts, const std::vector<std::vector<int32_t>>& token_ids,
                        const AttentionResult& result, const AttentionTimings& timings) {
    Json tokens = Json::array(), lengths = Json::array(), fully_masked = Json::array();
    for (const auto& ids : token_ids) {
        tokens.push_back(token_texts(model.tokenizer, ids));
        lengths.push_back(ids.size());
    }
    for (int b = 0; b < result.B; ++b) {
        Json row = Json::array();
        for (int t = 0; t < result.T; ++t)
            row.push_back(result.fully_masked[static_cast<size_t>(b) * result.T + t] != 0);
        fully_masked.push_back(row);
    }
    return {
        {"backend", backend},
        {"backend_reason", backend_reason},
        {"n_layer", model.config.n_layer},
        {"n_head", result.NH},
        {"d_head", result.hs},
        {"n_kv_head", result.NKV},
        {"seq_len", result.T},
        {"layers", result.layers},
        {"texts", texts},
        {"token_ids", token_ids},
        {"tokens", tokens},
        {"lengths", lengths},
        {"fully_masked", fully_masked},
        {"timing_ms", {{"load", timings.load_ms}, {"tokenize", timings.tokenize_ms}, {"forward", timings.forward_ms}}}};
}

void write_attention_json(std::ostream& out, const Json& metadata, const AttentionResult& result) {
    std::string text = dump_json(metadata);
    text.pop_back();  // the closing brace: the attention arrays go last
    out << text << ",\"attention\":";

    const size_t dims[5] = {result.layers.size(), static_cast<size_t>(result.B), static_cast<size_t>(result.NH),
                            static_cast<size_t>(result.T), static_cast<size_t>(result.T)};
    char number[32];
    size_t index[5] = {};
    const size_t total = result.weights.size();
    for (size_t n = 0; n < total; ++n) {
        // Open one bracket per axis that starts here.
        for (int axis = 0; axis < 5; ++axis) {
            bool starts = true;
            for (int inner = axis; inner < 5; ++inner) starts = starts && index[inner] == 0;
            if (starts) out.put('[');
        }
        const auto [end, ec] = std::to_chars(number, number + sizeof number, result.weights[n]);
        out.write(number, end - number);
        // Advance the index, closing a bracket per axis that ends.
        int axis = 4;
        while (axis >= 0 && ++index[axis] == dims[axis]) {
            index[axis] = 0;
            out.put(']');
            --axis;
        }
        if (axis >= 0) out.put(',');
    }
    if (total == 0) out << "[]";
    out << "}\n";
}

void write_attention_npy(std::ostream& out, const AttentionResult& result) {
    write_npy(out, result.weights,
              {static_cast<int64_t>(result.layers.size()), result.B, result.NH, result.T, result.T});
}

}  // namespace headscope
