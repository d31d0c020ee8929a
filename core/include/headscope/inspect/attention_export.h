// The attention in headscope-cli's output formats: JSON (metadata, then the
// weights as nested arrays) and NumPy .npy. The CLI and the window's export
// both write through these, so the same compute gives the same bytes.
#pragma once
#include <iosfwd>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "headscope/base/aligned.h"
#include "headscope/compute/attention.h"
#include "headscope/compute/attention_maps.h"
#include "headscope/compute/generate.h"
#include "headscope/model/model.h"

namespace headscope {

// JSON text on one line; token bytes that are not valid UTF-8 become U+FFFD.
std::string dump_json(const nlohmann::ordered_json& json);

// The token texts of `ids` (raw bytes, see dump_json).
nlohmann::ordered_json token_texts(const Tokenizer& tokenizer, const std::vector<int32_t>& ids);

struct AttentionTimings {
    double load_ms = 0, tokenize_ms = 0, forward_ms = 0;
};

// {id, token, p} of a prediction.
nlohmann::ordered_json prediction_json(const Tokenizer& tokenizer, const Prediction& prediction);

// Everything of the JSON but the weights: backend, backend_reason, n_layer,
// n_head, d_head, n_kv_head, seq_len, layers, texts, token_ids, tokens, lengths,
// fully_masked, timing_ms; with result.top_k, predictions ([b][t] arrays of
// top_k prediction_json at each text's positions), logprob_next ([b][t], null
// at its last) and loss ([b], null for one token); with result.lens_k, lens
// ([layer][b][t] the top-1 prediction_json); with result.ablated and
// result.ablated_experts, ablated ([layer, head]) and ablation, and
// ablated_experts ([layer, expert]); with a mixture of experts, router
// ([layer][b][t] the router's choices {expert, weight} by falling weight, []
// at a dense layer).
nlohmann::ordered_json attention_metadata(const Model& model, const std::string& backend,
                                          const std::string& backend_reason, const std::vector<std::string>& texts,
                                          const std::vector<std::vector<int32_t>>& token_ids,
                                          const AttentionResult& result, const AttentionTimings& timings);

// The row summaries' fields (RowSummaries) by the names the JSON and the
// .npy files give them, in order.
struct SummaryField {
    const char* name;
    std::vector<float> RowSummaries::*values;
};
inline constexpr SummaryField summary_fields[] = {{"entropy", &RowSummaries::entropy},
                                                  {"first_key", &RowSummaries::first_key},
                                                  {"previous_key", &RowSummaries::previous_key},
                                                  {"max", &RowSummaries::max},
                                                  {"distance", &RowSummaries::distance}};

// An "attention" array other than the forward's maps, computed on demand
// from its queries and keys (attention_maps.h): (layers, B, NH, rows, cols),
// a region of every map or every map pooled.
struct MapsOnDemand {
    AlignedVector<float> values;
    size_t rows = 0, cols = 0;
};
// From a forward that kept its queries and keys: `region` of every map
// (every_region), with "maps": "region" and its "rows" and "cols" [first,
// end) added to `metadata`; or every map pooled to at most n x n cells
// (every_pooled_map), with "maps": "pooled" and "pool" {cells, step, mode}.
MapsOnDemand region_on_demand(const KeptForward& kept, const MapRegion& region, nlohmann::ordered_json& metadata);
MapsOnDemand pooled_on_demand(const KeptForward& kept, int n, Pooling pooling, nlohmann::ordered_json& metadata);

// `metadata` with "attention" last: the (layers, B, NH, T, T) weights as
// nested arrays, streamed (as json values they would take many times the
// tensor's memory), and a newline. An encoder–decoder's, in its place:
// "encoder_attention" (L_enc, B, NH, S, S), "cross_attention" (layers, B, NH,
// T, S) and "decoder_attention" (layers, B, NH, T, T). With `on_demand`,
// "attention" is that array instead; without it and without maps
// (Maps::full), there is none. With the summaries, then "summaries": each
// summary_fields name's [layer][b][head][query]. The caller checks `out`
// for errors (write_file_atomically does).
void write_attention_json(std::ostream& out, const nlohmann::ordered_json& metadata, const AttentionResult& result,
                          const MapsOnDemand* on_demand = nullptr);

// headscope-cli generate's JSON: `metadata` (backend, backend_reason), then
// n_head, layers, source_ids (an encoder–decoder's), prompt_ids, token_ids,
// text (the tokens' bytes), stop, timing_ms {prompt, step_median, step_max}
// and, last, steps: per generated token {id, token, p, top:
// [prediction_json], timing_ms, cross_attention (an encoder–decoder's):
// [layer][head][source token], attention: [layer][head][key]}, the attention
// streamed. Then a newline.
void write_generation_json(std::ostream& out, const nlohmann::ordered_json& metadata, const Tokenizer& tokenizer,
                           const Generation& generation);

// The weights as one float32 .npy of shape (layers, B, NH, T, T), or
// `on_demand`'s (layers, B, NH, rows, cols).
void write_attention_npy(std::ostream& out, const AttentionResult& result, const MapsOnDemand* on_demand = nullptr);
// A summary's values (summary_fields of AttentionResult::row_summaries) as one float32 .npy of shape (layers, B, NH,
// T).
void write_summary_npy(std::ostream& out, const AttentionResult& result, const std::vector<float>& values);

}  // namespace headscope
