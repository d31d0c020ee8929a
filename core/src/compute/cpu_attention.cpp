// The CPU forward's attention (cpu_forward.h): Q, K and V split into heads,
// rotated, stored for the prefix cache, and each head's scores, masked
// softmax and weighted values, batched or by the tutorials' loop, held as
// maps or block by block (long texts), with each row's summary.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "headscope/base/error.h"
#include "headscope/compute/attention_maps.h"
#include "headscope/compute/cpu_forward.h"
#include "headscope/compute/cpu_ops.h"
#include "headscope/compute/matmul.h"

namespace headscope {
namespace {

// Rows of one head with their row stride.
struct HeadBlock {
    float* data;
    int stride;
};

// The tutorials' mha_by_loop for one head, `rows` queries from position
// first_query over `keys` keys: every score a dot product (plus T5's
// position bias, centred as in ops::attention_head), every output a weighted
// sum; the same masks and softmax as the batched path. q, y and att hold the
// queries' rows.
void attention_head_by_loop(const HeadBlock& q, const HeadBlock& k, const HeadBlock& v, const HeadBlock& y, float* att,
                            int first_query, int rows, int keys, int hs, float scale, const auto& visible,
                            const float* bias, float softcap, float sink) {
    for (int r = 0; r < rows; ++r) {
        float* scores = att + static_cast<size_t>(r) * keys;
        const int i = first_query + r;
        for (int j = 0; j < keys; ++j) {
            float dot = 0;
            for (int d = 0; d < hs; ++d) dot += q.data[r * q.stride + d] * k.data[j * k.stride + d];
            scores[j] = bias ? dot + bias[j - i] : dot;
        }
        const ops::KeyRange range = visible(i);
        ops::masked_softmax_row(scores, range.begin, range.end, keys, scale, softcap, sink);
        for (int d = 0; d < hs; ++d) {
            float sum = 0;
            for (int j = range.begin; j < range.end; ++j) sum += scores[j] * v.data[j * v.stride + d];
            y.data[r * y.stride + d] = sum;
        }
    }
}

// What one head's attention over a text reads: its queries and outputs from
// row `first` on, all its keys and values, the layer's score rule.
struct HeadInputs {
    HeadBlock q, k, v, y;
    int first, T, hs, length, head;
    const ScoreRule& rule;
    const float* bias;  // T5's, centred (ops::attention_head), or null
    CpuForward::Heads heads;
};

// Rows [first, T) of one head: its weights into `att` (the map's rows from
// `first`), or where null block by block into a scratch of a few rows' keys,
// so that no T x T map is held; its output into y; with `summaries`, each
// row's summary at summary_at + its row, while the row is in hand.
void attend_head(const HeadInputs& in, float* att, RowSummaries* summaries, size_t summary_at) {
    const auto rows_of = [&](float* weights, int first_query, int rows, int keys, const auto& visible) {
        const size_t skip = static_cast<size_t>(first_query - in.first);
        const HeadBlock q{in.q.data + skip * in.q.stride, in.q.stride}, y{in.y.data + skip * in.y.stride, in.y.stride};
        const float sink = in.rule.sink(in.head);
        if (in.heads == CpuForward::Heads::loop)
            attention_head_by_loop(q, in.k, in.v, y, weights, first_query, rows, keys, in.hs, in.rule.scale, visible,
                                   in.bias, in.rule.softcap, sink);
        else
            ops::attention_head(q.data, q.stride, in.k.data, in.k.stride, in.v.data, in.v.stride, y.data, y.stride,
                                weights, first_query, rows, keys, in.hs, in.rule.scale, visible, in.bias,
                                in.rule.softcap, sink);
        for (int r = 0; r < rows && summaries; ++r) {
            const int i = first_query + r;
            const ops::KeyRange seen = visible(i);
            summaries->put(summary_at + i,
                           summarize_row(weights + static_cast<size_t>(r) * keys, seen.begin, seen.end, i));
        }
    };
    const auto visible = [&](int i) { return in.rule.visible(i, in.length, in.T); };
    if (att) return rows_of(att, in.first, in.T - in.first, in.T, visible);
    AlignedVector<float> block;
    for (int first = in.first; first < in.T; first += map_block_rows) {
        const int rows = std::min(map_block_rows, in.T - first);
        int keys = 0;  // the most any of the rows sees: the later keys are masked for all of them
        for (int i = first; i < first + rows; ++i) keys = std::max(keys, visible(i).end);
        block.resize(static_cast<size_t>(rows) * keys);
        rows_of(block.data(), first, rows, keys, [&](int i) {
            const ops::KeyRange seen = visible(i);
            return ops::KeyRange{std::min(seen.begin, keys), std::min(seen.end, keys)};
        });
    }
}

// The naive view's contiguous Q (B, T, Qw), then K and V (B, T, KVw) each, in `contiguous`.
struct NaiveParts {
    HeadBlock q, k, v;
};
NaiveParts naive_parts(float* contiguous, int B, int T, const HeadSplit& split) {
    const size_t BT = static_cast<size_t>(B) * T;
    const int Qw = split.q_width(), KVw = split.kv_width();
    return {{contiguous, Qw}, {contiguous + BT * Qw, KVw}, {contiguous + BT * (Qw + KVw), KVw}};
}

// Head h's rows of text b in a part: its columns h*hs from the text's first
// computed row, or in the naive view its floats from h*T*hs on.
HeadBlock head_block(const HeadBlock& part, int b, int h, bool naive, int T, int hs, int first_row) {
    if (naive)
        return HeadBlock{part.data + static_cast<size_t>(b) * T * part.stride + static_cast<size_t>(h) * T * hs, hs};
    return HeadBlock{part.data + static_cast<size_t>(first_row) * part.stride + h * hs, part.stride};
}

}  // namespace

// qkv_'s Q and K of the computed rows rotated by RoPE (rotary positions
// only). transpose: each new row of Q and K (K at column Qw) by its
// position, in place. naive-view: Q, K, V first copied out contiguous
// (qkv_contiguous_, NaiveParts), head h then the flat floats
// [h*T*hs, (h+1)*T*hs) of a text, whatever tokens they belong to, RoPE
// rotating its row r by position r.
void CpuForward::rotate(const Config& cfg, const Batch& batch, const AttentionOptions& options, const HeadSplit& split,
                        int layer) {
    const int B = batch.B(), T = batch.T(), NH = split.NH, NKV = split.NKV, hs = split.hs;
    const int Qw = split.q_width(), KVw = split.kv_width(), width = Qw + 2 * KVw;
    const bool naive = options.split == Split::naive_view;
    const int first = naive ? 0 : *std::min_element(begin_.begin(), begin_.end());  // the first row computed
    const RopeTable table = cfg.positions == Positions::rotary
                                ? rope_table(layer_rope(cfg, layer), hs, T, first, text_length_)
                                : RopeTable{};
    HeadBlock q_part{qkv_.data(), width}, k_part{qkv_.data() + Qw, width};
    if (naive) {
        const NaiveParts parts = naive_parts(qkv_contiguous_.data(), B, T, split);
        for (int part = 0; part < 3; ++part) {
            const HeadBlock& to = part == 0 ? parts.q : part == 1 ? parts.k : parts.v;
            ops::StridedMap<float>(to.data, B * T, to.stride, Eigen::OuterStride<>(to.stride)) =
                ops::ConstStridedMap<float>(qkv_.data() + (part == 0 ? 0 : Qw + (part - 1) * KVw), B * T, to.stride,
                                            Eigen::OuterStride<>(width));
        }
        q_part = parts.q, k_part = parts.k;
    }
    if (table.cos.empty()) return;
#pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; ++b)
        for (int h = 0; h < NH + NKV; ++h) {
            const HeadBlock x = h < NH ? head_block(q_part, b, h, naive, T, hs, first_row_[b])
                                       : head_block(k_part, b, h - NH, naive, T, hs, first_row_[b]);
            apply_rope(table, x.data, naive ? 0 : begin_[b], naive ? T : T - begin_[b], x.stride);
        }
}

// From qkv_ (the R rows, rotated): this layer's keys and values into
// `store`, at.att (B, NH, T, T) weights of the computed query rows (none
// where it is null: blocks of rows, AttentionOptions::maps), each row's
// summary where asked (into kept_rows_), and y_ (R, Qw), heads merged.
// transpose: head h of Q is the (rows, hs) block at column h*hs of qkv_,
// read in place; K and V rows go to the store, whose T rows per text (the
// reused ones included) the heads read, key/value head h / group at column
// kv*hs. y for head h goes to columns h*hs of y_ (the transpose back and the
// contiguous copy in one write).
// naive-view (every row computed, so R = B * T): head h is the flat floats
// [h*T*hs, (h+1)*T*hs) of a text in qkv_contiguous_ (rotate), and y
// (B, NH, T, hs) is read back as (B, T, Qw) unchanged.
void CpuForward::attention(const Model& model, const Batch& batch, const AttentionOptions& options,
                           const HeadSplit& split, PrefixCache& store, const LayerAt& at, Heads heads) {
    const int layer = at.layer, B = batch.B(), T = batch.T(), NH = split.NH, hs = split.hs;
    const int Qw = split.q_width(), KVw = split.kv_width(), width = Qw + 2 * KVw;
    const bool naive = options.split == Split::naive_view;
    HeadBlock q_part{qkv_.data(), width}, k_part{nullptr, 0}, v_part{nullptr, 0}, y_part{y_.data(), Qw};
    const auto block = [&](const HeadBlock& part, int b, int h) {
        return head_block(part, b, h, naive, T, hs, first_row_[b]);
    };
    if (naive) {
        const NaiveParts parts = naive_parts(qkv_contiguous_.data(), B, T, split);
        q_part = parts.q, k_part = parts.k, v_part = parts.v;
    } else {
        const size_t layer_floats = static_cast<size_t>(store.capacity) * 2 * KVw;
        for (int b = 0; b < B; ++b) {
            float* kv = store.kv[b].data() + stored_layer(layer) * layer_floats;
            for (int t = begin_[b]; t < T; ++t)
                std::copy_n(qkv_.data() + static_cast<size_t>(first_row_[b] + t - begin_[b]) * width + Qw, 2 * KVw,
                            kv + static_cast<size_t>(t) * 2 * KVw);
        }
        // Every text's keys and values from the store, rows [0, T): block() reads row 0 of text b there.
        k_part = {nullptr, 2 * KVw};
        v_part = {nullptr, 2 * KVw};
    }

    const ScoreRule rule = score_rule(model, options, layer, hs);
    RowSummaries* summaries = at.slot >= 0 && options.summaries ? &kept_rows_->summaries : nullptr;
#pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; ++b) {
        for (int h = 0; h < NH; ++h) {
            const int length = static_cast<int>(batch.token_ids[b].size()), first = begin_[b];
            const int kv = h / split.group();
            HeadBlock k, v;
            if (naive) {
                k = block(k_part, b, kv);
                v = block(v_part, b, kv);
            } else {
                float* stored =
                    store.kv[b].data() + stored_layer(layer) * static_cast<size_t>(store.capacity) * 2 * KVw;
                k = {stored + kv * hs, 2 * KVw};
                v = {stored + KVw + kv * hs, 2 * KVw};
            }
            const float* bias = position_bias_.empty() ? nullptr : position_bias_.data() + h * (2 * T - 1) + T - 1;
            const HeadInputs in{
                block(q_part, b, h), k, v, block(y_part, b, h), first, T, hs, length, h, rule, bias, heads};
            float* att_rows =
                at.att ? at.att + ((static_cast<size_t>(b) * NH + h) * (T - first_held_) + first - first_held_) * T
                       : nullptr;
            attend_head(in, att_rows, summaries, summaries ? kept_rows_->summary_row(at.slot, b, h, 0) : 0);
        }
    }
}

void CpuForward::read_cached_rows(const Model& model, const Batch& batch, const AttentionOptions& options,
                                  const HeadSplit& split, const ForwardRequest::CachedRows& cached, PrefixCache& store,
                                  int layer) const {
    const int width = 2 * split.kv_width();
    float* kv = store.kv[0].data() + stored_layer(layer) * static_cast<size_t>(store.capacity) * width;
    if (!copy_cached_rows(*cached.from, model, options, batch.token_ids[0], begin_[0], text_length_, layer, width, kv))
        throw RowsGone();
}

void CpuForward::keep_queries_keys(const HeadSplit& split, size_t slot, AttentionResult& result) const {
    const size_t Qw = split.q_width(), KVw = split.kv_width(), width = Qw + 2 * KVw;
    for (int b = 0; b < result.B; ++b)
        for (int r = first_row_[b]; r < first_row_[b + 1]; ++r) {  // text b's rows from begin_[b]
            const float* row = qkv_.data() + r * width;
            const size_t at = kept_rows_->row(slot, b, begin_[b] + (r - first_row_[b]));
            std::copy_n(row, Qw, kept_rows_->queries.data() + at * Qw);
            std::copy_n(row + Qw, KVw, kept_rows_->keys.data() + at * KVw);
        }
}

// Queries from ln_x(x) (pre-norm) or x (post-norm) into the first Qw
// columns of qkv_; keys and values from sources_.cross_kv, text b's S rows
// at (l, b); key/value head h / group at column kv * hs. Every query row of
// text b sees the source's own tokens (cross_visible_end); the maps go to
// the result's cross_weights where the layer is returned. The request's
// cross-attention patches apply, and its heads' outputs are kept where it asks.
void CpuForward::cross_attend(const Model& model, const Batch& batch, const AttentionOptions& options,
                              const HeadSplit& split, const LayerAt& at, Heads heads, const ForwardRequest& request,
                              AttentionResult& result) {
    const Config& cfg = model.config;
    const LayerWeights& w = model.layers[at.layer];
    const int B = batch.B(), T = batch.T(), S = batch.S(), C = cfg.n_embd, NH = split.NH, hs = split.hs;
    const int Qw = split.q_width(), KVw = split.kv_width();
    const float* in = x_.data();
    if (!cfg.post_norm) {
        normalize(cfg, x_.data(), w.ln_x_w, w.ln_x_b, ln_.data(), rows_);
        in = ln_.data();
    }
    linear(in, rows_, w.cross_q, w.cross_q_b, qkv_.data(), Qw);
    const float scale = score_scale(options.scale, cfg, hs);
    const size_t map_floats = static_cast<size_t>(B) * NH * (T - first_held_) * S;
    float* maps = at.slot >= 0 ? result.cross_weights.data() + at.slot * map_floats : scratch_cross_.data();
#pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; ++b) {
        for (int h = 0; h < NH; ++h) {
            const int target = static_cast<int>(batch.token_ids[b].size());
            const int source = static_cast<int>(batch.source_ids[b].size()), first = begin_[b];
            float* kv = sources_.cross_kv.data() + (static_cast<size_t>(at.layer) * B + b) * S * 2 * KVw +
                        h / split.group() * hs;
            const HeadBlock q{qkv_.data() + static_cast<size_t>(first_row_[b]) * Qw + h * hs, Qw};
            const HeadBlock k{kv, 2 * KVw}, v{kv + KVw, 2 * KVw};
            const HeadBlock y{y_.data() + static_cast<size_t>(first_row_[b]) * Qw + h * hs, Qw};
            const auto visible = [&](int i) {
                return ops::KeyRange{0, cross_visible_end(options, i, target, source, S)};
            };
            float* att_rows = maps + ((static_cast<size_t>(b) * NH + h) * (T - first_held_) + first - first_held_) * S;
            if (heads == Heads::loop)
                attention_head_by_loop(q, k, v, y, att_rows, first, T - first, S, hs, scale, visible, nullptr, 0.f,
                                       -std::numeric_limits<float>::infinity());
            else
                ops::attention_head(q.data, q.stride, k.data, k.stride, v.data, v.stride, y.data, y.stride, att_rows,
                                    first, T - first, S, hs, scale, visible);
        }
    }
    patch_cross(request, split, at.layer, B, S, maps);
    if (request.cross_outputs)
        std::copy_n(y_.data(), static_cast<size_t>(rows_) * Qw,
                    request.cross_outputs + static_cast<size_t>(at.layer) * rows_ * Qw);
    if (!ops::all_finite(y_.data(), static_cast<size_t>(rows_) * Qw))
        throw Error("layer " + std::to_string(at.layer) +
                    ": the cross-attention is not finite (a value past float32's range, from weights too large)");
    linear(y_.data(), rows_, w.cross_proj, w.cross_proj_b, x_.data(), C, /*accumulate=*/true);
    if (cfg.post_norm) normalize(cfg, x_.data(), w.ln_x_w, w.ln_x_b, x_.data(), rows_);
    check_residual(at.layer, C, "the cross-attention");
}

}  // namespace headscope
