// Long texts in the window: see long_maps.h.
#include "session/long_maps.h"

#include <algorithm>
#include <exception>
#include <numeric>

#include "headscope/base/clock.h"
#include "headscope/base/error.h"
#include "headscope/compute/forward.h"

namespace headscope {

bool is_long_text(int layers, int heads, int tokens) {
    const double maps_bytes = 4.0 * layers * heads * tokens * static_cast<double>(tokens);
    return tokens >= long_text_tokens || maps_bytes > full_maps_budget;
}

AttentionOptions long_text_options(AttentionOptions options) {
    options.maps = Maps::queries_and_keys;
    options.summaries = true;
    options.lens_k = 0;
    options.contributions = options.capture_outputs = false;
    return options;
}

LiveRequest long_text_request(const Model& model, LiveRequest request) {
    const Config& config = model.config;
    const int heads = request.options.n_head ? request.options.n_head : config.n_head;
    // A text has at most a token a byte, and its template's few: a short text is not tokenized twice.
    size_t bytes = 0;
    for (const std::string& text : request.texts) bytes = std::max(bytes, text.size());
    if (!is_long_text(config.n_layer, heads, static_cast<int>(std::min<size_t>(bytes + 8, 1 << 30)))) return request;
    int tokens = 0;
    for (const std::vector<int32_t>& ids : model.tokenizer.encode_texts(request.texts))
        tokens = std::max(tokens, static_cast<int>(ids.size()));
    if (config.n_positions > 0) tokens = std::min(tokens, config.n_positions);  // cut_long_texts
    if (!is_long_text(config.n_layer, heads, tokens)) return request;
    const AttentionOptions long_options = long_text_options(request.options);
    try {
        check_maps_options(config, long_options);
    } catch (const Error& e) {
        // An encoder-decoder, or the naive split: every map, as for a short text, where they fit.
        const double maps_bytes = 4.0 * config.n_layer * heads * tokens * static_cast<double>(tokens);
        if (maps_bytes <= full_maps_budget) return request;
        throw Error(std::string(e.what()) + "; this text's " + std::to_string(tokens) + " tokens' maps would take " +
                    std::to_string(static_cast<int>(maps_bytes / 1e9 + 0.5)) + " GB: not computed");
    }
    request.options = long_options;
    return request;
}

std::shared_ptr<const KeptMaps> keep_maps(std::shared_ptr<const Model> model, const LiveResult& shown,
                                          const AttentionOptions& options) {
    const AttentionResult& att = shown.attention;
    if (att.maps != Maps::queries_and_keys) return nullptr;
    auto kept = std::make_shared<KeptMaps>();
    kept->batch = Batch{shown.token_ids, model->config.pad_id()};
    kept->model = std::move(model);
    kept->options = long_text_options(options);
    AttentionResult& r = kept->result;
    r.B = att.B, r.T = att.T, r.NH = att.NH, r.hs = att.hs, r.NKV = att.NKV;
    r.layers = att.layers;
    r.maps = att.maps;
    // Shared, not copied: no later keystroke writes the rows it reads (take_kept_rows), its last ones its own.
    r.kept = att.kept, r.tail = att.tail, r.tail_from = att.tail_from;
    return kept;
}

namespace {

// Whether query i sees any key of [col_begin, col_end) under `options`.
bool sees_any(const AttentionOptions& options, int i, int col_begin, int col_end, int length, int T) {
    return std::max(visible_begin(options, i), col_begin) < std::min(visible_end(options, i, length, T), col_end);
}

}  // namespace

MapAnswer compute_map(const KeptMaps& kept, const MapAsk& ask) {
    const auto start = Clock::now();
    const MapRegion& region = ask.region;
    check_region(region, kept.result.T);
    MapAnswer answer{
        ask, {}, (region.rows() + ask.pixels - 1) / ask.pixels, (region.cols() + ask.pixels - 1) / ask.pixels};
    HeatmapImage& image = answer.image;
    image.rows = (region.rows() + answer.step_rows - 1) / answer.step_rows;
    image.cols = (region.cols() + answer.step_cols - 1) / answer.step_cols;
    image.cells.assign(static_cast<size_t>(image.rows) * image.cols, 0.f);
    const int slot = ask.layer, length = static_cast<int>(kept.batch.token_ids.at(ask.b).size());
    const AttentionOptions options = layer_options(kept.model->config, kept.options, kept.result.layers.at(slot));
    // Whole rows of cells at a time, about map_block_rows query rows (what
    // core computes at once), on every core: each group's cells are its own.
    const int cell_rows_at_once = std::max(1, map_block_rows / answer.step_rows);
    const auto pool_group = [&](int first) {
        const int row_begin = region.row_begin + first * answer.step_rows;
        const MapRegion rows{row_begin, std::min(row_begin + cell_rows_at_once * answer.step_rows, region.row_end),
                             region.col_begin, region.col_end};
        const std::vector<float> weights = map_region(kept.kept(), slot, ask.b, ask.head, rows);
        for (int i = 0; i < rows.rows(); ++i) {
            float* cells = image.cells.data() + static_cast<size_t>(first + i / answer.step_rows) * image.cols;
            const float* row = weights.data() + static_cast<size_t>(i) * rows.cols();
            for (int c = 0; c < image.cols; ++c) {
                const float* begin = row + static_cast<size_t>(c) * answer.step_cols;
                const float* end =
                    row + std::min(static_cast<size_t>(c + 1) * answer.step_cols, static_cast<size_t>(rows.cols()));
                cells[c] = ask.pooling == Pooling::max ? std::max(cells[c], *std::max_element(begin, end))
                                                       : std::accumulate(begin, end, cells[c]);
            }
        }
    };
    const int groups = (image.rows + cell_rows_at_once - 1) / cell_rows_at_once;
    std::exception_ptr failure;
    // OpenMP, as core's every_region: within its threads core's products run on one core each.
#pragma omp parallel for schedule(dynamic)
    for (int g = 0; g < groups; ++g) {
        try {
            pool_group(g * cell_rows_at_once);
        } catch (...) {  // bad_alloc: passed on to the caller (the worker's outcome)
#pragma omp critical
            failure = std::current_exception();
        }
    }
    if (failure) std::rethrow_exception(failure);
    for (int r = 0; r < image.rows; ++r) {
        const int row_begin = region.row_begin + r * answer.step_rows,
                  row_end = std::min(row_begin + answer.step_rows, region.row_end);
        for (int c = 0; c < image.cols; ++c) {
            const int col_begin = region.col_begin + c * answer.step_cols,
                      col_end = std::min(col_begin + answer.step_cols, region.col_end);
            bool seen = false;
            for (int i = row_begin; i < row_end && !seen; ++i)
                seen = sees_any(options, i, col_begin, col_end, length, kept.result.T);
            float& cell = image.cells[static_cast<size_t>(r) * image.cols + c];
            if (!seen)
                cell = masked_cell;
            else if (ask.pooling == Pooling::mean)
                cell /= static_cast<float>(row_end - row_begin);
        }
    }
    answer.ms = ms_since(start);
    return answer;
}

std::vector<float> query_row(const KeptMaps& kept, int layer, int head, int b, int i) {
    return map_region(kept.kept(), layer, b, head, {i, i + 1, 0, kept.result.T});
}

}  // namespace headscope
