// headscope-cli's attention formats: see attention_export.h.
#include "headscope/inspect/attention_export.h"

#include <algorithm>
#include <charconv>
#include <ostream>

#include "headscope/compute/matmul.h"
#include "headscope/inspect/heatmap.h"
#include "headscope/io/npy.h"

namespace headscope {

using Json = nlohmann::ordered_json;

std::string dump_json(const Json& json) { return json.dump(-1, ' ', false, Json::error_handler_t::replace); }

Json token_texts(const Tokenizer& tokenizer, const std::vector<int32_t>& ids) {
    Json texts = Json::array();
    for (int32_t id : ids) texts.push_back(token_text(tokenizer, id));
    return texts;
}

Json prediction_json(const Tokenizer& tokenizer, const Prediction& prediction) {
    return {{"id", prediction.id}, {"token", token_text(tokenizer, prediction.id)}, {"p", prediction.p}};
}

namespace {

// [layer][batch][head][query]: each held row's learned sink weight (heatmap.h).
Json learned_sink_weights(const AttentionResult& result) {
    Json weights = Json::array();
    for (size_t slot = 0; slot < result.layers.size(); ++slot) {
        Json layer = Json::array();
        for (int b = 0; b < result.B; ++b) {
            Json heads = Json::array();
            for (int h = 0; h < result.NH; ++h) {
                Json rows = Json::array();
                for (int i = result.first_row; i < result.T; ++i)
                    rows.push_back(learned_sink_weight(result, static_cast<int>(slot), b, h, i));
                heads.push_back(rows);
            }
            layer.push_back(heads);
        }
        weights.push_back(layer);
    }
    return weights;
}

// [layer][batch][position]: each returned layer's routes at each text's
// positions, {expert, weight} by falling weight; [] where the layer is dense.
Json router_json(const AttentionResult& result, const std::vector<std::vector<int32_t>>& token_ids) {
    Json router = Json::array();
    for (int l : result.layers) {
        Json layer = Json::array();
        for (int b = 0; b < result.B; ++b) {
            Json text = Json::array();
            for (size_t t = 0; t < token_ids[b].size(); ++t) {
                Json choices = Json::array();
                const size_t at = result.router_at(l, b, static_cast<int>(t));
                for (int i = 0; i < result.router_k; ++i)
                    if (result.router_experts[at + i] >= 0)
                        choices.push_back(
                            {{"expert", result.router_experts[at + i]}, {"weight", result.router_weights[at + i]}});
                text.push_back(choices);
            }
            layer.push_back(text);
        }
        router.push_back(layer);
    }
    return router;
}

}  // namespace

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
    Json metadata = {
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
    if (result.L > 0) {  // options.contributions: what logit_parts' entries are
        Json parts = {"embeddings"};
        for (const char* part : {" attention bias", " MLP"})
            for (int l = 0; l < result.L; ++l) {
                std::string name = "L";  // appended: GCC 12 warns, wrongly, on "L" + std::to_string(l)
                name += std::to_string(l);
                parts.push_back(name += part);
            }
        parts.push_back("final norm shift");
        metadata["logit_part_names"] = parts;
    }
    metadata["maps"] = to_string(result.maps);
    if (backend == "cpu") metadata["prompt_products"] = prompt_products_status();  // the tiles' or float32 (matmul.h)
    // Each head's sink mass (heatmap.h): the weight its rows give key 0 (without maps: summaries' first_key).
    Json sinks = Json::array();
    for (size_t slot = 0; slot < result.layers.size() && result.maps == Maps::full; ++slot) {
        Json layer = Json::array();
        for (int b = 0; b < result.B; ++b) {
            Json heads = Json::array();
            for (int h = 0; h < result.NH; ++h)
                heads.push_back(sink_mass(result, static_cast<int>(slot), b, h, static_cast<int>(token_ids[b].size())));
            layer.push_back(heads);
        }
        sinks.push_back(layer);
    }
    if (result.maps == Maps::full) {
        metadata["sink_mass"] = sinks;
        if (model.config.attention_sinks) metadata["sink_weight"] = learned_sink_weights(result);
    }
    if (!result.ablated.empty()) {
        Json heads = Json::array();
        for (const HeadRef& h : result.ablated) heads.push_back({h.layer, h.head});
        metadata["ablated"] = heads;
        metadata["ablation"] = to_string(result.ablation);
    }
    if (!result.ablated_experts.empty()) {
        Json experts = Json::array();
        for (const ExpertRef& e : result.ablated_experts) experts.push_back({e.layer, e.expert});
        metadata["ablated_experts"] = experts;
    }
    if (result.router_k > 0) metadata["router"] = router_json(result, token_ids);
    const Tokenizer& tokenizer = model.tokenizer;
    if (result.top_k > 0) {
        Json predictions = Json::array(), logprob_next = Json::array(), loss = Json::array();
        for (int b = 0; b < result.B; ++b) {
            Json text_predictions = Json::array(), text_logprobs = Json::array();
            for (size_t t = 0; t < token_ids[b].size(); ++t) {
                Json top = Json::array();
                const Prediction* p = result.predictions_at(b, static_cast<int>(t));
                for (int k = 0; k < result.top_k; ++k) top.push_back(prediction_json(tokenizer, p[k]));
                text_predictions.push_back(top);
                const float logprob = result.logprob_next[static_cast<size_t>(b) * result.T + t];
                text_logprobs.push_back(t + 1 < token_ids[b].size() ? Json(logprob) : Json(nullptr));
            }
            predictions.push_back(text_predictions);
            logprob_next.push_back(text_logprobs);
            loss.push_back(token_ids[b].size() > 1 ? Json(result.loss(b)) : Json(nullptr));
        }
        metadata["predictions"] = predictions;
        metadata["logprob_next"] = logprob_next;
        metadata["loss"] = loss;
    }
    if (result.lens_k > 0) {
        Json lens = Json::array();
        for (size_t slot = 0; slot < result.layers.size(); ++slot) {
            Json layer = Json::array();
            for (int b = 0; b < result.B; ++b) {
                Json text = Json::array();
                for (size_t t = 0; t < token_ids[b].size(); ++t)
                    text.push_back(
                        prediction_json(tokenizer, *result.lens_at(static_cast<int>(slot), b, static_cast<int>(t))));
                layer.push_back(text);
            }
            lens.push_back(layer);
        }
        metadata["lens"] = lens;
    }
    return metadata;
}

namespace {

// `data` (dims[0], ..., dims[rank - 1]) as nested arrays, each float as
// to_chars writes it (the shortest that reads back the same).
void write_nested(std::ostream& out, const float* data, const size_t* dims, int rank) {
    size_t total = 1;
    for (int axis = 0; axis < rank; ++axis) total *= dims[axis];
    if (total == 0) {
        out << "[]";
        return;
    }
    char number[32];
    std::vector<size_t> index(rank, 0);
    for (size_t n = 0; n < total; ++n) {
        // Open one bracket per axis that starts here.
        for (int axis = 0; axis < rank; ++axis) {
            bool starts = true;
            for (int inner = axis; inner < rank; ++inner) starts = starts && index[inner] == 0;
            if (starts) out.put('[');
        }
        const auto [end, ec] = std::to_chars(number, number + sizeof number, data[n]);
        out.write(number, end - number);
        // Advance the index, closing a bracket per axis that ends.
        int axis = rank - 1;
        while (axis >= 0 && ++index[axis] == dims[axis]) {
            index[axis] = 0;
            out.put(']');
            --axis;
        }
        if (axis >= 0) out.put(',');
    }
}

// `json` without its closing brace, for fields streamed after it.
std::string open_object(const Json& json) {
    std::string text = dump_json(json);
    text.pop_back();
    return text;
}

double median(std::vector<double> values) {
    if (values.empty()) return 0;
    const size_t half = values.size() / 2;
    std::nth_element(values.begin(), values.begin() + half, values.end());
    if (values.size() % 2) return values[half];
    return (values[half] + *std::max_element(values.begin(), values.begin() + half)) / 2;
}

}  // namespace

void write_attention_json(std::ostream& out, const Json& metadata, const AttentionResult& result,
                          const MapsOnDemand* on_demand) {
    const size_t dims[5] = {result.layers.size(), static_cast<size_t>(result.B), static_cast<size_t>(result.NH),
                            static_cast<size_t>(result.T - result.first_row), static_cast<size_t>(result.T)};
    out << open_object(metadata);  // the attention arrays go last
    if (const AttentionResult* encoder = result.encoder.get()) {
        const size_t source[5] = {encoder->layers.size(), dims[1], dims[2], static_cast<size_t>(encoder->T),
                                  static_cast<size_t>(encoder->T)};
        const size_t cross[5] = {dims[0], dims[1], dims[2], dims[3], static_cast<size_t>(result.S)};
        out << ",\"encoder_attention\":";
        write_nested(out, encoder->weights.data(), source, 5);
        out << ",\"cross_attention\":";
        write_nested(out, result.cross_weights.data(), cross, 5);
        out << ",\"decoder_attention\":";
        write_nested(out, result.weights.data(), dims, 5);
    } else if (on_demand) {
        const size_t shown[5] = {dims[0], dims[1], dims[2], on_demand->rows, on_demand->cols};
        out << ",\"attention\":";
        write_nested(out, on_demand->values.data(), shown, 5);
    } else if (result.maps == Maps::full) {
        out << ",\"attention\":";
        write_nested(out, result.weights.data(), dims, 5);
    }
    if (result.has_summaries()) {
        const size_t rows[4] = {dims[0], dims[1], dims[2], static_cast<size_t>(result.T)};
        const RowSummaries summaries = result.row_summaries();
        out << ",\"summaries\":{";
        for (const SummaryField& field : summary_fields) {
            out << (field.values == summary_fields[0].values ? "\"" : ",\"") << field.name << "\":";
            write_nested(out, (summaries.*field.values).data(), rows, 4);
        }
        out << '}';
    }
    if (!result.rollout.empty()) {  // options.contributions
        const size_t B = result.B, T = result.T, NH = result.NH, L = result.L;
        out << ",\"value_weighted\":";
        write_nested(out, result.value_weighted.data(), dims, 5);
        out << ",\"rollout\":";
        const size_t rollout[3] = {B, T, T};
        write_nested(out, result.rollout.data(), rollout, 3);
        out << ",\"head_logit_attribution\":";
        const size_t heads[4] = {L, B, NH, T};
        write_nested(out, result.head_logit_attribution.data(), heads, 4);
        out << ",\"logit_parts\":";
        const size_t parts[3] = {B, T, static_cast<size_t>(result.parts())};
        write_nested(out, result.part_logit_attribution.data(), parts, 3);
        out << ",\"attributed_logit\":";
        const size_t logits[2] = {B, T};
        write_nested(out, result.attributed_logit.data(), logits, 2);
    }
    out << "}\n";
}

void write_generation_json(std::ostream& out, const Json& metadata, const Tokenizer& tokenizer,
                           const Generation& generation) {
    std::string text;
    for (int32_t id : generation.token_ids) text += token_text(tokenizer, id);
    std::vector<double> step_ms;
    for (const GenerationStep& step : generation.steps) step_ms.push_back(step.timing_ms);
    Json head = metadata;
    head["n_head"] = generation.NH;
    head["layers"] = generation.layers;
    if (!generation.source_ids.empty()) head["source_ids"] = generation.source_ids;
    head["prompt_ids"] = generation.prompt_ids;
    head["token_ids"] = generation.token_ids;
    head["text"] = text;
    head["stop"] = to_string(generation.stop);
    head["timing_ms"] = {{"prompt", generation.prompt_ms},
                         {"step_median", median(step_ms)},
                         {"step_max", step_ms.empty() ? 0 : *std::max_element(step_ms.begin(), step_ms.end())}};
    out << open_object(head) << ",\"steps\":[";
    for (size_t s = 0; s < generation.steps.size(); ++s) {
        const GenerationStep& step = generation.steps[s];
        Json top = Json::array();
        for (const Prediction& p : step.top) top.push_back(prediction_json(tokenizer, p));
        const Json fields = {{"id", step.id},
                             {"token", step.token},
                             {"p", step.p},
                             {"forced", step.forced},
                             {"top", top},
                             {"device", step.computed_on.device},
                             {"timing_ms", step.timing_ms}};
        out << (s ? "," : "") << open_object(fields);
        const size_t S = generation.source_ids.size();
        if (S) {
            const size_t cross[3] = {generation.layers.size(), static_cast<size_t>(generation.NH), S};
            out << ",\"cross_attention\":";
            write_nested(out, step.cross_attention.data(), cross, 3);
        }
        out << ",\"attention\":";
        const size_t dims[3] = {generation.layers.size(), static_cast<size_t>(generation.NH),
                                static_cast<size_t>(step.keys)};
        write_nested(out, step.attention.data(), dims, 3);
        out << '}';
    }
    out << "]}\n";
}

void write_attention_npy(std::ostream& out, const AttentionResult& result, const MapsOnDemand* on_demand) {
    const auto layers = static_cast<int64_t>(result.layers.size());
    if (on_demand)
        return write_npy(out, on_demand->values,
                         {layers, result.B, result.NH, static_cast<int64_t>(on_demand->rows),
                          static_cast<int64_t>(on_demand->cols)});
    write_npy(out, result.weights, {layers, result.B, result.NH, result.T - result.first_row, result.T});
}

void write_summary_npy(std::ostream& out, const AttentionResult& result, const std::vector<float>& values) {
    write_npy(out, values, {static_cast<int64_t>(result.layers.size()), result.B, result.NH, result.T});
}

MapsOnDemand region_on_demand(const KeptForward& kept, const MapRegion& region, nlohmann::ordered_json& metadata) {
    MapsOnDemand shown{every_region(kept, region), static_cast<size_t>(region.rows()),
                       static_cast<size_t>(region.cols())};
    metadata["maps"] = "region";
    metadata["rows"] = {region.row_begin, region.row_end};
    metadata["cols"] = {region.col_begin, region.col_end};
    return shown;
}

MapsOnDemand pooled_on_demand(const KeptForward& kept, int n, Pooling pooling, nlohmann::ordered_json& metadata) {
    int cells = 0;
    MapsOnDemand shown;
    shown.values = every_pooled_map(kept, n, pooling, cells);
    shown.rows = shown.cols = static_cast<size_t>(cells);
    metadata["maps"] = "pooled";
    metadata["pool"] = {
        {"cells", cells}, {"step", (kept.result.T + n - 1) / n}, {"mode", word_of(pooling_choices, pooling)}};
    return shown;
}

}  // namespace headscope
