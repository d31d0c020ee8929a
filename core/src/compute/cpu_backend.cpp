// The CPU forward (cpu_forward.h) and the CPU backend that runs it.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "headscope/base/error.h"
#include "headscope/compute/backend.h"
#include "headscope/compute/cpu_forward.h"
#include "headscope/compute/cpu_ops.h"
#include "headscope/compute/matmul.h"

namespace headscope {
namespace {

// Grows `buffer` to at least `n` floats; never shrinks, so steady state allocates nothing.
void reserve_floats(AlignedVector<float>& buffer, size_t n) {
    if (buffer.size() < n) buffer.resize(n);
}

void normalize(const Config& config, const float* x, const float* w, const float* b, float* out, int rows) {
    if (config.norm == Norm::layer_norm)
        ops::layer_norm(x, w, b, out, rows, config.n_embd, config.layer_norm_epsilon);
    else
        ops::rms_norm(x, w, out, rows, config.n_embd, config.layer_norm_epsilon);
}

// Rows of one head with their row stride.
struct HeadBlock {
    float* data;
    int stride;
};

// The tutorials' mha_by_loop for one head, queries [first_query, T) over keys
// [0, T): every score a dot product, every output a weighted sum; the same
// masks and softmax as the batched path. q, y and att hold the queries' rows.
void attention_head_by_loop(const HeadBlock& q, const HeadBlock& k, const HeadBlock& v, const HeadBlock& y, float* att,
                            int first_query, int T, int hs, float scale, const auto& visible) {
    for (int r = 0; r < T - first_query; ++r) {
        float* scores = att + static_cast<size_t>(r) * T;
        for (int j = 0; j < T; ++j) {
            float dot = 0;
            for (int d = 0; d < hs; ++d) dot += q.data[r * q.stride + d] * k.data[j * k.stride + d];
            scores[j] = dot;
        }
        const ops::KeyRange keys = visible(first_query + r);
        ops::masked_softmax_row(scores, keys.begin, keys.end, T, scale);
        for (int d = 0; d < hs; ++d) {
            float sum = 0;
            for (int j = keys.begin; j < keys.end; ++j) sum += scores[j] * v.data[j * v.stride + d];
            y.data[r * y.stride + d] = sum;
        }
    }
}

// Makes `store` hold, for B texts, `layers` layers of at least T rows of
// `width` floats, keeping each text's first keep[b] rows of every layer.
void reserve_kv(PrefixCache& store, int B, int layers, int T, int width, int max_rows, const std::vector<int>& keep) {
    if (store.kv.size() < static_cast<size_t>(B)) store.kv.resize(B);
    const auto floats = [&](int capacity) { return static_cast<size_t>(layers) * capacity * width; };
    if (store.capacity < T) {  // grow by doubling, so that typing does not reallocate at every token
        const int capacity = std::min(std::max(T, 2 * store.capacity), max_rows);
        for (int b = 0; b < B; ++b) {
            AlignedVector<float> grown(floats(capacity));
            for (int l = 0; l < layers && keep[b] > 0; ++l)
                std::copy_n(store.kv[b].data() + floats(store.capacity) / layers * l,
                            static_cast<size_t>(keep[b]) * width, grown.data() + floats(capacity) / layers * l);
            store.kv[b] = std::move(grown);
        }
        store.capacity = capacity;
    }
    for (int b = 0; b < B; ++b) reserve_floats(store.kv[b], floats(store.capacity));
}

// log(sum(exp(logits))) over V, the max subtracted first.
float log_sum_exp(const float* logits, int V) {
    const Eigen::Map<const Eigen::ArrayXf> row(logits, V);
    const float max = row.maxCoeff();
    return max + std::log((row - max).exp().sum());
}

// The k highest of V logits as {id, p = exp(logit - lse)}, by p descending,
// the lower id first on ties: one pass keeping the k best in order.
void top_tokens(const float* logits, int V, float lse, int k, Prediction* out) {
    int kept = 0;
    for (int id = 0; id < V; ++id) {
        const float logit = logits[id];
        if (kept == k && !(logit > out[k - 1].p)) continue;
        int at = kept < k ? kept++ : k - 1;
        for (; at > 0 && out[at - 1].p < logit; --at) out[at] = out[at - 1];
        out[at] = {id, logit};  // p holds the logit until the end
    }
    for (int i = 0; i < k; ++i) out[i].p = std::exp(out[i].p - lse);
}

}  // namespace

void CpuForward::run(const Model& model, const Batch& batch, const AttentionOptions& options, AttentionResult& result,
                     Heads heads, PrefixCache* cache, const Progress& progress) {
    validate_forward(model, batch, options);
    const Config& cfg = model.config;
    const HeadSplit split = head_split(cfg, options.n_head);
    const int B = batch.B(), T = batch.T(), C = cfg.n_embd;
    const bool predicting = options.top_k > 0 || options.lens_k > 0;
    const bool reuse_allowed = prefix_reuse_refusal(options).empty();

    // The rows to compute: those after the rows each text can reuse from the cache.
    begin_.assign(B, 0);
    if (cache && reuse_allowed && cache->model == &model && cache->options == options)
        for (int b = 0; b < B && b < static_cast<int>(cache->token_ids.size()); ++b)
            begin_[b] = reusable_rows(cache->token_ids[b], batch.token_ids[b]);
    first_row_.assign(B + 1, 0);
    for (int b = 0; b < B; ++b) first_row_[b + 1] = first_row_[b] + T - begin_[b];
    rows_ = first_row_[B];

    set_up_result(cfg, batch, options, result);
    if (cache) {
        keep_earlier_rows(*cache, batch, result);
        cache->model = nullptr;  // invalid until this forward completes
    }
    result.reused = begin_;
    result.computed_on = {"cpu", ""};

    const int layers_run = predicting ? cfg.n_layer : result.layers.back() + 1;
    const size_t map_floats = static_cast<size_t>(B) * split.NH * T * T;
    const size_t rows = static_cast<size_t>(rows_), qkv_width = split.q_width() + 2 * split.kv_width();
    const size_t lens_slots = options.lens_k ? result.layers.size() : 0;
    PrefixCache& store = cache ? *cache : own_cache_;
    if (options.split == Split::transpose)
        reserve_kv(store, B, layers_run, T, 2 * split.kv_width(), cfg.n_positions, begin_);
    reserve_floats(x_, rows * C);
    reserve_floats(ln_, std::max(rows, size_t(unembed_chunk)) * C);
    reserve_floats(qkv_, rows * qkv_width);
    if (cfg.qkv_layout == QkvLayout::fused_per_head) reserve_floats(fused_, rows * qkv_width);
    if (options.split == Split::naive_view) reserve_floats(qkv_contiguous_, rows * qkv_width);
    reserve_floats(y_, rows * split.q_width());
    reserve_floats(hidden_, rows * cfg.mlp_size());
    if (cfg.mlp == Mlp::swiglu) reserve_floats(up_, rows * cfg.mlp_size());
    if (result.layers.size() < static_cast<size_t>(layers_run)) reserve_floats(scratch_att_, map_floats);
    if (predicting) reserve_floats(unembed_in_, (lens_slots + 1) * rows * C);

    for (int b = 0; b < B; ++b) embed_text(model, batch, b, begin_[b], x_.data() + first_row_[b] * C);
    size_t slot = 0;
    for (int l = 0; l < layers_run; ++l) {
        report_progress(progress, "computing layers", l, layers_run, ProgressUnit::steps);
        const LayerWeights& w = model.layers[l];
        const bool returned = slot < result.layers.size() && result.layers[slot] == l;
        float* att = returned ? result.weights.data() + slot * map_floats : scratch_att_.data();

        normalize(cfg, x_.data(), w.ln_1_w, w.ln_1_b, ln_.data(), rows_);
        project_qkv(model, w);
        attention(model, batch, options, split, store, l, att, heads);
        if (returned && options.capture_outputs) {
            const size_t Qw = split.q_width();
            for (int b = 0; b < B; ++b)
                std::copy_n(y_.data() + first_row_[b] * Qw, (T - begin_[b]) * Qw,
                            result.outputs.data() + ((slot * B + b) * T + begin_[b]) * Qw);
        }
        if (!predicting && l == layers_run - 1) break;  // everything after this layer's attention is not needed

        // Pythia's parallel residual: both halves read the layer's input x.
        if (cfg.parallel_residual) normalize(cfg, x_.data(), w.ln_2_w, w.ln_2_b, ln_.data(), rows_);
        linear(y_.data(), rows_, w.attn_proj, w.attn_proj_b, x_.data(), C, /*accumulate=*/true);
        if (!cfg.parallel_residual) normalize(cfg, x_.data(), w.ln_2_w, w.ln_2_b, ln_.data(), rows_);
        mlp(cfg, w);
        if (returned && options.lens_k) std::copy_n(x_.data(), rows * C, unembed_in_.data() + slot * rows * C);
        slot += returned;
    }
    if (predicting) {
        std::copy_n(x_.data(), rows * C, unembed_in_.data() + lens_slots * rows * C);
        predict(model, batch, options, result);
    }
    if (cache && reuse_allowed) {
        cache->model = &model;
        cache->options = options;
        cache->token_ids = batch.token_ids;
        cache->result = result;
    } else if (cache) {
        cache->clear();
    }
}

// Copies into `result` the rows [0, begin_b) of each text that the cached
// forward's result already holds: the maps' query rows (their keys
// past the row are masked, so the shorter of the two widths holds them all),
// outputs, predictions and lens. Where a text appends to the cached one, the
// cached last row's logprob_next is then the first new token's, from the
// cached last logits.
void CpuForward::keep_earlier_rows(const PrefixCache& cache, const Batch& batch, AttentionResult& result) const {
    const AttentionResult& cached = cache.result;
    const int T = result.T, cached_T = cached.T, width = std::min(T, cached_T);
    const size_t Qw = static_cast<size_t>(result.NH) * result.hs;
    for (int b = 0; b < result.B; ++b) {
        const int kept = begin_[b];
        for (size_t slot = 0; slot < result.layers.size(); ++slot) {
            for (int h = 0; h < result.NH; ++h)
                for (int i = 0; i < kept; ++i) {
                    float* row = result.weights.data() + ((slot * result.B + b) * result.NH + h) * T * T +
                                 static_cast<size_t>(i) * T;
                    std::fill(std::copy_n(cached.row(static_cast<int>(slot), b, h, i), width, row), row + T, 0.f);
                }
            if (!result.outputs.empty())
                std::copy_n(cached.outputs.data() + (slot * cached.B + b) * cached_T * Qw, kept * Qw,
                            result.outputs.data() + (slot * result.B + b) * T * Qw);
            for (int t = 0; t < kept && result.lens_k; ++t)
                std::copy_n(cached.lens_at(static_cast<int>(slot), b, t), result.lens_k,
                            result.lens.data() + ((slot * result.B + b) * T + t) * result.lens_k);
        }
        for (int t = 0; t < kept && result.top_k; ++t) {
            std::copy_n(cached.predictions_at(b, t), result.top_k,
                        result.predictions.data() + (static_cast<size_t>(b) * T + t) * result.top_k);
            result.logprob_next[static_cast<size_t>(b) * T + t] =
                cached.logprob_next[static_cast<size_t>(b) * cached_T + t];
        }
        // Every cached row reused (the text only grew): the cached last row's
        // logprob_next (NaN, its text ended there) is the first new token's.
        const bool every_cached_row = kept > 0 && kept == static_cast<int>(cache.token_ids[b].size());
        if (result.top_k && every_cached_row) {
            const float* logits = cached.last_logits.data() + static_cast<size_t>(b) * result.V;
            result.logprob_next[static_cast<size_t>(b) * T + kept - 1] =
                logits[batch.token_ids[b][kept]] - log_sum_exp(logits, result.V);
        }
    }
}

// ln_ (R, C) -> qkv_ (R, Qw + 2 KVw) as [Q | K | V] in the model's own
// heads, qk-normed (Qwen 3) over each head's hs values.
void CpuForward::project_qkv(const Model& model, const LayerWeights& w) {
    const Config& cfg = model.config;
    const int rows = rows_;
    const int hs = cfg.head_size(), Qw = cfg.n_head * hs, KVw = cfg.kv_heads() * hs, width = Qw + 2 * KVw;
    if (cfg.qkv_layout == QkvLayout::separate) {
        linear(ln_.data(), rows, w.q, w.q_b, qkv_.data(), width);
        linear(ln_.data(), rows, w.k, w.k_b, qkv_.data() + Qw, width);
        linear(ln_.data(), rows, w.v, w.v_b, qkv_.data() + Qw + KVw, width);
    } else if (cfg.qkv_layout == QkvLayout::fused) {
        linear(ln_.data(), rows, w.attn, w.attn_b, qkv_.data(), width);  // already [Q | K | V]
    } else {
        // Fused per head [q k v] (NH, 3, hs): reorder to [Q | K | V].
        linear(ln_.data(), rows, w.attn, w.attn_b, fused_.data(), width);
#pragma omp parallel for schedule(static)
        for (int r = 0; r < rows; ++r) {
            const float* in = fused_.data() + static_cast<size_t>(r) * width;
            float* out = qkv_.data() + static_cast<size_t>(r) * width;
            for (int h = 0; h < cfg.n_head; ++h)
                for (int part = 0; part < 3; ++part)
                    std::copy_n(in + (3 * h + part) * hs, hs, out + part * Qw + h * hs);
        }
    }
    if (cfg.qk_norm) {
#pragma omp parallel for schedule(static)
        for (int r = 0; r < rows; ++r) {
            float* row = qkv_.data() + static_cast<size_t>(r) * width;
            ops::rms_norm(row, w.q_norm, row, Qw / hs, hs, cfg.layer_norm_epsilon);
            ops::rms_norm(row + Qw, w.k_norm, row + Qw, KVw / hs, hs, cfg.layer_norm_epsilon);
        }
    }
}

// From qkv_ (the R rows): this layer's keys and values into `store`, att
// (B, NH, T, T) weights of the computed query rows and y_ (R, Qw), heads
// merged.
// transpose: head h of Q is the (rows, hs) block at column h*hs of qkv_,
// read in place; RoPE rotates each new row of Q and K by its position; K and
// V rows go to the store, whose T rows per text (the reused ones included)
// the heads read, key/value head h / group at column kv*hs. y for head h
// goes to columns h*hs of y_ (the transpose back and the contiguous copy in
// one write).
// naive-view (every row computed, so R = B * T): Q, K, V are copied out
// contiguous; head h is then the flat floats [h*T*hs, (h+1)*T*hs) of a text,
// whatever tokens they belong to, RoPE rotating its row r by position r, and
// y (B, NH, T, hs) is read back as (B, T, Qw) unchanged.
void CpuForward::attention(const Model& model, const Batch& batch, const AttentionOptions& options,
                           const HeadSplit& split, PrefixCache& store, int layer, float* att, Heads heads) {
    const Config& cfg = model.config;
    const int B = batch.B(), T = batch.T(), NH = split.NH, NKV = split.NKV, hs = split.hs;
    const int Qw = split.q_width(), KVw = split.kv_width(), width = Qw + 2 * KVw;
    const float scale = score_scale(options.scale, cfg.n_embd, hs);
    const bool naive = options.split == Split::naive_view;
    const RopeTable table = cfg.positions == Positions::rotary ? rope_table(cfg.rope, hs, T) : RopeTable{};
    const size_t text_rows = static_cast<size_t>(T);
    HeadBlock q_part{qkv_.data(), width}, k_part{nullptr, 0}, v_part{nullptr, 0}, y_part{y_.data(), Qw};
    // Head h's rows of text b in a part: its columns h*hs, or in the naive view its floats from h*T*hs on.
    const auto block = [&](const HeadBlock& part, int b, int h) {
        if (naive) return HeadBlock{part.data + b * text_rows * part.stride + static_cast<size_t>(h) * T * hs, hs};
        return HeadBlock{part.data + static_cast<size_t>(first_row_[b]) * part.stride + h * hs, part.stride};
    };
    if (naive) {  // (B, T, Qw), then (B, T, KVw) for K and for V
        const size_t BT = static_cast<size_t>(B) * T;
        q_part = {qkv_contiguous_.data(), Qw};
        k_part = {q_part.data + BT * Qw, KVw};
        v_part = {k_part.data + BT * KVw, KVw};
        for (int part = 0; part < 3; ++part) {
            const HeadBlock& to = part == 0 ? q_part : part == 1 ? k_part : v_part;
            ops::StridedMap<float>(to.data, B * T, to.stride, Eigen::OuterStride<>(to.stride)) =
                ops::ConstStridedMap<float>(qkv_.data() + (part == 0 ? 0 : Qw + (part - 1) * KVw), B * T, to.stride,
                                            Eigen::OuterStride<>(width));
        }
        if (!table.cos.empty()) {
#pragma omp parallel for collapse(2) schedule(static)
            for (int b = 0; b < B; ++b)
                for (int h = 0; h < NH + NKV; ++h) {
                    const HeadBlock x = h < NH ? block(q_part, b, h) : block(k_part, b, h - NH);
                    apply_rope(table, x.data, 0, T, x.stride);
                }
        }
    } else {
        // RoPE on the new rows of Q and K (K at column Qw of qkv_), then K and V into the store.
        HeadBlock k_new{qkv_.data() + Qw, width};
        if (!table.cos.empty()) {
#pragma omp parallel for collapse(2) schedule(static)
            for (int b = 0; b < B; ++b)
                for (int h = 0; h < NH + NKV; ++h) {
                    const HeadBlock x = h < NH ? block(q_part, b, h) : block(k_new, b, h - NH);
                    apply_rope(table, x.data, begin_[b], T - begin_[b], x.stride);
                }
        }
        const size_t layer_floats = static_cast<size_t>(store.capacity) * 2 * KVw;
        for (int b = 0; b < B; ++b) {
            float* kv = store.kv[b].data() + layer * layer_floats;
            for (int t = begin_[b]; t < T; ++t)
                std::copy_n(qkv_.data() + static_cast<size_t>(first_row_[b] + t - begin_[b]) * width + Qw, 2 * KVw,
                            kv + static_cast<size_t>(t) * 2 * KVw);
        }
        // Every text's keys and values from the store, rows [0, T): block() reads row 0 of text b there.
        k_part = {nullptr, 2 * KVw};
        v_part = {nullptr, 2 * KVw};
    }

#pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; ++b) {
        for (int h = 0; h < NH; ++h) {
            const int length = static_cast<int>(batch.token_ids[b].size()), first = begin_[b];
            const int kv = h / split.group();
            const HeadBlock q = block(q_part, b, h);
            HeadBlock k, v;
            if (naive) {
                k = block(k_part, b, kv);
                v = block(v_part, b, kv);
            } else {
                float* stored = store.kv[b].data() + layer * static_cast<size_t>(store.capacity) * 2 * KVw;
                k = {stored + kv * hs, 2 * KVw};
                v = {stored + KVw + kv * hs, 2 * KVw};
            }
            const HeadBlock y = block(y_part, b, h);
            const auto visible = [&](int i) {
                return ops::KeyRange{visible_begin(options, i), visible_end(options, i, length, T)};
            };
            float* att_rows = att + ((static_cast<size_t>(b) * NH + h) * T + first) * T;
            if (heads == Heads::loop) {
                attention_head_by_loop(q, k, v, y, att_rows, first, T, hs, scale, visible);
            } else {
                ops::attention_head(q.data, q.stride, k.data, k.stride, v.data, v.stride, y.data, y.stride, att_rows,
                                    first, T, hs, scale, visible);
            }
        }
    }
}

// ln_ (R, C) -> x_ += the MLP's output.
void CpuForward::mlp(const Config& cfg, const LayerWeights& w) {
    const int C = cfg.n_embd, F = cfg.mlp_size(), rows = rows_;
    const size_t hidden = static_cast<size_t>(rows) * F;
    if (cfg.mlp == Mlp::swiglu) {
        linear(ln_.data(), rows, w.gate, nullptr, hidden_.data(), F);
        linear(ln_.data(), rows, w.fc, w.fc_b, up_.data(), F);
        ops::silu_times(hidden_.data(), up_.data(), hidden);
    } else {
        linear(ln_.data(), rows, w.fc, w.fc_b, hidden_.data(), F);
        if (cfg.mlp == Mlp::gelu_exact)
            ops::gelu_exact(hidden_.data(), hidden_.data(), hidden);
        else
            ops::gelu(hidden_.data(), hidden_.data(), hidden);
    }
    linear(hidden_.data(), rows, w.fc_proj, w.fc_proj_b, x_.data(), C, /*accumulate=*/true);
}

// unembed_in_'s rows (the residual after each lens layer, then after the
// last layer), through the final norm and the output embedding, in chunks of
// unembed_chunk rows: a keystroke's few rows of every lens layer read the
// output embedding once, and a long text's logits stay within (chunk, V).
// Per row: the lens's or the predictions' top tokens, logprob_next, and at a
// text's last token its logits.
void CpuForward::predict(const Model& model, const Batch& batch, const AttentionOptions& options,
                         AttentionResult& result) {
    const Config& cfg = model.config;
    const int C = cfg.n_embd, V = cfg.vocab_size, T = result.T, R = rows_;
    const int lens_slots = options.lens_k ? static_cast<int>(result.layers.size()) : 0;
    const int total = (lens_slots + (options.top_k ? 1 : 0)) * R;
    reserve_floats(logits_, static_cast<size_t>(std::min(total, unembed_chunk)) * V);
    for (int start = 0; start < total; start += unembed_chunk) {
        const int n = std::min(unembed_chunk, total - start);
        normalize(cfg, unembed_in_.data() + static_cast<size_t>(start) * C, model.ln_f_w, model.ln_f_b, ln_.data(), n);
        linear(ln_.data(), n, model.lm_head, nullptr, logits_.data(), V);
#pragma omp parallel for schedule(static)
        for (int r = 0; r < n; ++r) {
            const int row = start + r, slot = row / R, text_row = row % R;
            const int b = static_cast<int>(std::upper_bound(first_row_.begin(), first_row_.end(), text_row) -
                                           first_row_.begin()) -
                          1;
            const int t = begin_[b] + text_row - first_row_[b];
            const std::vector<int32_t>& ids = batch.token_ids[b];
            const int length = static_cast<int>(ids.size());
            const float* logits = logits_.data() + static_cast<size_t>(r) * V;
            const size_t at = static_cast<size_t>(b) * T + t;
            const bool lens = slot < lens_slots;
            const int k = lens ? result.lens_k : result.top_k;
            Prediction* top = lens ? result.lens.data() + (static_cast<size_t>(slot) * result.B * T + at) * k
                                   : result.predictions.data() + at * k;
            if (t >= length) {  // a padded position
                std::fill_n(top, k, Prediction{});
                if (!lens) result.logprob_next[at] = std::nanf("");
                continue;
            }
            const float lse = log_sum_exp(logits, V);
            top_tokens(logits, V, lse, k, top);
            if (lens) continue;
            result.logprob_next[at] = t + 1 < length ? logits[ids[t + 1]] - lse : std::nanf("");
            if (t == length - 1) std::copy_n(logits, V, result.last_logits.data() + static_cast<size_t>(b) * V);
        }
    }
}

namespace {

class CpuBackend final : public Backend {
public:
    std::string name() const override { return "cpu"; }

    void load_weights(const Model& model) override { model_ = &model; }

    void forward(const Batch& batch, const AttentionOptions& options, AttentionResult& result, PrefixCache* cache,
                 const Progress& progress) override {
        if (!model_) throw Error("no model loaded");
        forward_.run(*model_, batch, options, result, CpuForward::Heads::batched, cache, progress);
    }

private:
    const Model* model_ = nullptr;
    CpuForward forward_;
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend() { return std::make_unique<CpuBackend>(); }

}  // namespace headscope
