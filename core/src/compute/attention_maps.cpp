// Long texts: score rules, row summaries and maps on demand (attention_maps.h).
#include "headscope/compute/attention_maps.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "headscope/base/error.h"
#include "headscope/compute/cpu_ops.h"
#include "headscope/compute/forward.h"

namespace headscope {

ops::KeyRange ScoreRule::visible(int i, int length, int T) const {
    return {visible_begin(options, i), visible_end(options, i, length, T)};
}

float ScoreRule::sink(int head) const { return sinks ? sinks[head] : -std::numeric_limits<float>::infinity(); }

ScoreRule score_rule(const Model& model, const AttentionOptions& options, int layer, int hs) {
    const Config& cfg = model.config;
    return {layer_options(cfg, options, layer), score_scale(options.scale, cfg, hs), cfg.attention_softcap,
            model.layers[layer].sinks};
}

void check_maps_options(const Config& config, const AttentionOptions& options) {
    if (options.maps == Maps::full) return;
    if (options.split != Split::transpose)
        throw Error(
            "a forward that keeps no maps needs the view + transpose split (the queries and keys kept are "
            "its heads')");
    if (options.contributions)
        throw Error("the contributions are computed from every map: a forward without maps has none");
    if (config.is_encoder_decoder())
        throw Error("an encoder–decoder's forward keeps every map (its cross-attention's too)");
}

RowSummary summarize_row(const float* w, int begin, int end, int i) {
    if (begin >= end) return {};
    const Eigen::Map<const Eigen::ArrayXf> seen(w + begin, end - begin);
    RowSummary s;
    // A weight that underflowed to 0 adds 0 ln(min) = 0, as 0 ln 0 does.
    s.entropy = -(seen * seen.max(std::numeric_limits<float>::min()).log()).sum();
    s.first_key = begin == 0 ? w[0] : 0.f;
    s.previous_key = i > begin && i - 1 < end ? w[i - 1] : 0.f;
    s.max = seen.maxCoeff();
    // q - k for k = begin, begin + 1, ...: whole numbers, exact in float32 below 2^24.
    s.distance =
        (seen * Eigen::ArrayXf::LinSpaced(end - begin, static_cast<float>(i - begin), static_cast<float>(i - end + 1)))
            .sum();
    return s;
}

void check_region(const MapRegion& region, int T) {
    const auto in_map = [T](int first, int last) { return 0 <= first && first < last && last <= T; };
    if (!in_map(region.row_begin, region.row_end) || !in_map(region.col_begin, region.col_end))
        throw Error("the region rows " + std::to_string(region.row_begin) + ":" + std::to_string(region.row_end) +
                    ", keys " + std::to_string(region.col_begin) + ":" + std::to_string(region.col_end) +
                    " is not a non-empty part of the " + std::to_string(T) + " x " + std::to_string(T) + " map");
}

Pooling parse_pooling(std::string_view word) { return parse_choice(pooling_choices, word); }

namespace {

// Recomputes rows [first, first + rows) of one head's map from the kept
// queries and keys, each over keys [0, keys) (keys: the most the rows see),
// as the forward built them.
class MapRows {
public:
    MapRows(const KeptForward& kept, int slot, int b, int h) : kept_(kept), slot_(slot), b_(b), h_(h) {
        const AttentionResult& r = kept.result;
        if (r.maps != Maps::queries_and_keys || !r.keeps_queries())
            throw Error("the maps are recomputed from a forward that kept its queries and keys");
        rule_ = score_rule(kept.model, kept.options, r.layers.at(slot), r.hs);
        length_ = static_cast<int>(kept.batch.token_ids.at(b).size());
        own_from_ = r.tail ? r.tail_from.at(static_cast<size_t>(b)) : r.T;
        const KeptRows& shared = *r.kept;
        q_ = shared.queries.data() + shared.row(static_cast<size_t>(slot), b, 0) * shared.shape.Qw +
             static_cast<size_t>(h) * r.hs;
        k_ = shared.keys.data() + shared.row(static_cast<size_t>(slot), b, 0) * shared.shape.KVw +
             static_cast<size_t>(h / (r.NH / r.NKV)) * r.hs;
    }
    // The keys rows [first, first + rows) see, at most: the row width to compute.
    int keys(int first, int rows) const {
        int keys = 0;
        for (int i = first; i < first + rows; ++i) keys = std::max(keys, rule_.visible(i, length_, T()).end);
        return keys;
    }
    void compute(int first, int rows, int keys, float* att) const {
        const AttentionResult& r = kept_.result;
        const auto visible = [&](int i) {
            const ops::KeyRange seen = rule_.visible(i, length_, T());
            return ops::KeyRange{std::min(seen.begin, keys), std::min(seen.end, keys)};
        };
        const float *q = q_ + static_cast<size_t>(first) * r.NH * r.hs, *k = k_;
        int q_stride = r.NH * r.hs, k_stride = r.NKV * r.hs;
        AlignedVector<float> own_q, own_k;
        if (std::max(first + rows, keys) > own_from_) {  // rows of the result's own last ones: gathered
            own_q = gather(first, rows, true), own_k = gather(0, keys, false);
            q = own_q.data(), k = own_k.data(), q_stride = k_stride = r.hs;
        }
        ops::attention_weights(q, q_stride, k, k_stride, att, first, rows, keys, r.hs, rule_.scale, visible,
                               static_cast<const float*>(nullptr), rule_.softcap, rule_.sink(h_));
    }
    int T() const { return kept_.result.T; }

private:
    // This head's query (else key) rows [first, first + n), hs floats each, wherever each is kept.
    AlignedVector<float> gather(int first, int n, bool queries) const {
        const AttentionResult& r = kept_.result;
        const size_t slot = static_cast<size_t>(slot_), hs = static_cast<size_t>(r.hs);
        const size_t column = (queries ? static_cast<size_t>(h_) : static_cast<size_t>(h_ / (r.NH / r.NKV))) * hs;
        AlignedVector<float> rows(static_cast<size_t>(n) * hs);
        for (int i = 0; i < n; ++i)
            std::copy_n((queries ? r.query(slot, b_, first + i) : r.key(slot, b_, first + i)) + column, hs,
                        rows.data() + static_cast<size_t>(i) * hs);
        return rows;
    }

    const KeptForward& kept_;
    int slot_, b_, h_;
    ScoreRule rule_;
    int length_ = 0, own_from_ = 0;
    const float *q_ = nullptr, *k_ = nullptr;
};

}  // namespace

std::vector<float> map_region(const KeptForward& kept, int slot, int b, int h, const MapRegion& region) {
    const MapRows map(kept, slot, b, h);
    check_region(region, map.T());
    std::vector<float> out(static_cast<size_t>(region.rows()) * region.cols(), 0.f);
    AlignedVector<float> att;
    for (int first = region.row_begin; first < region.row_end; first += map_block_rows) {
        const int rows = std::min(map_block_rows, region.row_end - first), keys = map.keys(first, rows);
        att.resize(static_cast<size_t>(rows) * keys);
        map.compute(first, rows, keys, att.data());
        // Keys past `keys` are masked for every row: they stay 0.
        const int cols = std::clamp(keys - region.col_begin, 0, region.cols());
        for (int r = 0; r < rows; ++r)
            std::copy_n(att.data() + static_cast<size_t>(r) * keys + region.col_begin, cols,
                        out.data() + static_cast<size_t>(first - region.row_begin + r) * region.cols());
    }
    return out;
}

PooledMap pooled_map(const KeptForward& kept, int slot, int b, int h, int n, Pooling pooling) {
    if (n < 1) throw Error("a map is pooled to at least 1 x 1 cells, not " + std::to_string(n));
    const MapRows map(kept, slot, b, h);
    const int T = map.T();
    PooledMap pooled;
    pooled.step = (T + n - 1) / n;
    pooled.cells = (T + pooled.step - 1) / pooled.step;
    pooled.values.assign(static_cast<size_t>(pooled.cells) * pooled.cells, 0.f);
    AlignedVector<float> att;
    // Blocks of whole cell rows, so that each cell row is finished in one block.
    const int rows_at_once = std::max(1, map_block_rows / pooled.step) * pooled.step;
    for (int first = 0; first < T; first += rows_at_once) {
        const int rows = std::min(rows_at_once, T - first), keys = map.keys(first, rows);
        att.resize(static_cast<size_t>(rows) * keys);
        map.compute(first, rows, keys, att.data());
        for (int r = 0; r < rows; ++r) {
            float* cells = pooled.values.data() + static_cast<size_t>((first + r) / pooled.step) * pooled.cells;
            const float* row = att.data() + static_cast<size_t>(r) * keys;
            for (int j = 0; j < keys; ++j) {
                float& cell = cells[j / pooled.step];
                cell = pooling == Pooling::max ? std::max(cell, row[j]) : cell + row[j];
            }
        }
    }
    if (pooling == Pooling::mean)
        for (int r = 0; r < pooled.cells; ++r)
            for (int c = 0; c < pooled.cells; ++c) {
                const int height = std::min(pooled.step, T - r * pooled.step);
                const int width = std::min(pooled.step, T - c * pooled.step);
                pooled.values[static_cast<size_t>(r) * pooled.cells + c] /= static_cast<float>(height) * width;
            }
    return pooled;
}

namespace {

// `each` (slot, b, h, out) for every returned layer, text and head, in
// parallel, each into its `size` floats of the (layers, B, NH, size) result.
template <typename Each>
AlignedVector<float> every_head(const AttentionResult& result, size_t size, Each each) {
    const int heads = static_cast<int>(result.layers.size()) * result.B * result.NH;
    AlignedVector<float> all(static_cast<size_t>(heads) * size);
    std::string failure;
#pragma omp parallel for schedule(dynamic)
    for (int n = 0; n < heads; ++n) {
        try {
            each(n / (result.B * result.NH), n / result.NH % result.B, n % result.NH, all.data() + n * size);
        } catch (const Error& e) {
#pragma omp critical
            failure = e.what();
        }
    }
    if (!failure.empty()) throw Error(failure);
    return all;
}

}  // namespace

AlignedVector<float> every_region(const KeptForward& kept, const MapRegion& region) {
    check_region(region, kept.result.T);
    const size_t size = static_cast<size_t>(region.rows()) * region.cols();
    return every_head(kept.result, size, [&](int slot, int b, int h, float* out) {
        const std::vector<float> part = map_region(kept, slot, b, h, region);
        std::copy(part.begin(), part.end(), out);
    });
}

AlignedVector<float> every_pooled_map(const KeptForward& kept, int n, Pooling pooling, int& cells) {
    if (n < 1) throw Error("a map is pooled to at least 1 x 1 cells, not " + std::to_string(n));
    const int T = kept.result.T, step = (T + n - 1) / n;
    cells = (T + step - 1) / step;
    return every_head(kept.result, static_cast<size_t>(cells) * cells, [&](int slot, int b, int h, float* out) {
        const PooledMap pooled = pooled_map(kept, slot, b, h, n, pooling);
        std::copy(pooled.values.begin(), pooled.values.end(), out);
    });
}

}  // namespace headscope
