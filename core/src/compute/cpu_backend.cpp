// The CPU forward (cpu_forward.h) and the CPU backend that runs it.
#include <algorithm>
#include <cmath>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <utility>
#include <vector>

#include "headscope/base/error.h"
#include "headscope/compute/backend.h"
#include "headscope/compute/cpu_forward.h"
#include "headscope/compute/cpu_ops.h"
#include "headscope/compute/matmul.h"

namespace headscope {

// Makes `store` hold, for B texts, `layers` layers of at least T rows of
// `width` floats, keeping each text's first keep[b] rows of every layer.
void CpuForward::reserve_kv(PrefixCache& store, int B, int layers, int T, int width, int max_rows,
                            const std::vector<int>& keep) {
    std::unique_lock hold(store.lock.mutex);  // kv may move
    if (store.kv.size() < static_cast<size_t>(B)) store.kv.resize(B);
    const auto floats = [&](int capacity) { return static_cast<size_t>(layers) * capacity * width; };
    if (store.capacity < T) {
        // A tenth more (16 rows at least), as the kept rows have: typing and
        // generating do not reallocate at every token, and an 8k text's first
        // keystroke past it does not double its cache (half a GB on a 1B model).
        const int capacity = std::min(T + std::max(T / 10, 16), max_rows);
        for (int b = 0; b < B; ++b) {
            AlignedVector<float> grown(floats(capacity));
            for (int l = 0; l < layers && keep[b] > 0; ++l)
                std::copy_n(store.kv[b].data() + floats(store.capacity) / layers * l,
                            static_cast<size_t>(keep[b]) * width, grown.data() + floats(capacity) / layers * l);
            store.kv[b] = std::move(grown);
        }
        store.capacity = capacity;
    }
    for (int b = 0; b < B; ++b)
        if (store.kv[b].size() < floats(store.capacity)) store.kv[b].resize(floats(store.capacity));
}

namespace {

// kept = result, the maps' storage grown by doubling: they gain a row and a
// column a token, and a copy that reallocated each time would map fresh
// memory for all of them at every generated token (a third of a 1B model's
// token with every map kept).
void keep_result(AttentionResult& kept, const AttentionResult& result) {
    for (auto [to, from] :
         {std::pair{&kept.weights, &result.weights}, std::pair{&kept.cross_weights, &result.cross_weights},
          std::pair{&kept.outputs, &result.outputs}})
        if (to->capacity() < from->size()) to->reserve(2 * from->size());
    kept = result;
}

}  // namespace

void CpuForward::reserve_floats(AlignedVector<float>& buffer, size_t n) {
    if (buffer.size() < n) buffer.resize(n);
}

void CpuForward::normalize(const Config& config, const float* x, const float* w, const float* b, float* out, int rows) {
    if (config.norm == Norm::layer_norm)
        ops::layer_norm(x, w, b, out, rows, config.n_embd, config.layer_norm_epsilon);
    else
        ops::rms_norm(x, w, out, rows, config.n_embd, config.layer_norm_epsilon);
}

// Float32 overflows where a checkpoint's weights are finite but huge (BF16
// holds values up to 3.4e38): the first layer (and head) where a value stops
// being finite is named, and the forward stops there, rather than return NaN.
void CpuForward::check_attention(int layer, const float* att, int B, int NH, int T, int hs) const {
    const int Qw = NH * hs;
    for (int b = 0; b < B; ++b)
        for (int h = 0; h < NH; ++h) {
            const size_t rows = static_cast<size_t>(T - begin_[b]);
            const size_t first = (static_cast<size_t>(b) * NH + h) * (T - first_held_) + begin_[b] - first_held_;
            bool finite = !att || ops::all_finite(att + first * T, rows * T);  // null: no map held, its output tells
            for (size_t r = 0; r < rows && finite; ++r)
                finite = ops::all_finite(y_.data() + (first_row_[b] + r) * Qw + h * hs, hs);
            if (!finite)
                throw Error("layer " + std::to_string(layer) + ", head " + std::to_string(h) +
                            ": the attention is not finite (a value past float32's range, from weights too large)");
        }
}

void CpuForward::check_residual(int layer, int C, const char* after) const {
    if (!ops::all_finite(x_.data(), static_cast<size_t>(rows_) * C))
        throw Error("layer " + std::to_string(layer) + ": the residual stream is not finite after " + after +
                    " (a value past float32's range, from weights too large)");
}

// The output of each head of `layer` that options.ablate knocks out, in
// y_: zero, or each text's mean over its real positions, at every position.
// Head h's row r of text b is at columns h * hs of y_'s row (view +
// transpose), or in the naive view at its (T, hs) block from h * T * hs of
// the text's floats. A mean needs every row of the text, which a mean
// ablation always computes (prefix_reuse_refusal).
void CpuForward::knock_out(const AttentionOptions& options, const Batch& batch, const HeadSplit& split, int layer) {
    const size_t Qw = split.q_width(), hs = split.hs, T = batch.T();
    const bool naive = options.split == Split::naive_view;
    for (const HeadRef& knocked : options.ablate) {
        if (knocked.layer != layer) continue;
        for (int b = 0; b < batch.B(); ++b) {
            const auto row = [&](size_t r) {
                return naive ? y_.data() + b * T * Qw + (knocked.head * T + r) * hs
                             : y_.data() + (first_row_[b] + r) * Qw + knocked.head * hs;
            };
            std::vector<double> mean(hs, 0.0);
            if (options.ablation == Ablation::mean) {
                const size_t length = batch.token_ids[b].size();
                for (size_t t = 0; t < length; ++t)
                    for (size_t d = 0; d < hs; ++d) mean[d] += row(t)[d];
                for (double& m : mean) m /= static_cast<double>(length);
            }
            for (int r = 0; r < first_row_[b + 1] - first_row_[b]; ++r)
                for (size_t d = 0; d < hs; ++d) row(r)[d] = static_cast<float>(mean[d]);
        }
    }
}

void CpuForward::run(const Model& model, const Batch& batch, const AttentionOptions& options, AttentionResult& result,
                     Heads heads, PrefixCache* cache, const Progress& progress, const ForwardRequest& request) {
    validate_forward(model, batch, options);
    const Config& cfg = model.config;
    const HeadSplit split = head_split(cfg, options.n_head);
    const int B = batch.B(), T = batch.T(), C = cfg.n_embd;
    const bool predicting = options.top_k > 0 || options.lens_k > 0;
    const bool reuse_allowed = prefix_reuse_refusal(options).empty();
    if (request.text_length != 0 && (request.text_length < T || cache))
        throw Error("a forward of a text's first " + std::to_string(T) + " tokens names a text of " +
                    std::to_string(request.text_length) + (cache ? " and keeps a cache" : ""));
    text_length_ = std::max(request.text_length, T);

    // The rows to compute: those after the rows each text can reuse from the cache, or reads from another's.
    begin_.assign(B, 0);
    if (cache && reuse_allowed && cache->model == &model && cache->options == options &&
        cache->source_ids == batch.source_ids && long_rope(cfg.rope, cache->result.T) == long_rope(cfg.rope, T))
        for (int b = 0; b < B && b < static_cast<int>(cache->token_ids.size()); ++b)
            begin_[b] = reusable_rows(cache->token_ids[b], batch.token_ids[b], cache->whole);
    if (request.cached_rows.from) begin_[0] = checked_cached_rows(batch, options, request.cached_rows, cache);
    first_row_.assign(B + 1, 0);
    for (int b = 0; b < B; ++b) first_row_[b + 1] = first_row_[b] + T - begin_[b];
    rows_ = first_row_[B];

    lens_ = options.lens_k > 0 && options.lens_from < T;  // the rows computed end at T - 1
    first_held_ = options.new_rows_only ? begin_[0] : 0;  // validate_forward: one text
    set_up_result(cfg, batch, options, result, first_held_);
    const std::shared_ptr<KeptRows> kept = take_kept_rows(reuse_allowed ? cache : nullptr, kept_shape(options, result),
                                                          begin_, T, cfg.n_positions, progress);
    result.kept = kept;
    kept_rows_ = kept.get();
    if (cache) {
        keep_earlier_rows(*cache, batch, result);
        // Until this forward completes the cache holds the rows it reuses
        // alone: a forward cancelled part way leaves them to the next.
        if (std::any_of(begin_.begin(), begin_.end(), [](int rows) { return rows > 0; })) {
            cache->keep_rows(begin_);
        } else {
            std::unique_lock hold(cache->lock.mutex);
            cache->model = nullptr;
        }
    }
    result.reused = begin_;
    result.computed_on = {"cpu", ""};
    if (cfg.is_encoder_decoder()) {
        prepare_sources(model, batch, options, split, heads, request);
        result.encoder = sources_.encoded;
    }
    if (cfg.positions == Positions::relative)
        position_bias(model, T, position_bias_);
    else
        position_bias_.clear();

    // The encoder's output needs every layer; predictions too; the maps only up to the last returned layer.
    const bool every_layer = predicting || request.final_states;
    const int layers_run = every_layer ? cfg.n_layer : result.layers.back() + 1;
    const size_t map_floats = static_cast<size_t>(B) * split.NH * (T - first_held_) * T;
    const size_t rows = static_cast<size_t>(rows_);
    const size_t lens_slots = lens_ ? result.layers.size() : 0;
    PrefixCache& store = cache ? *cache : own_cache_;
    one_layer_store_ = !cache && options.maps != Maps::full;
    if (options.split == Split::transpose)
        reserve_kv(store, B, one_layer_store_ ? 1 : layers_run, T, 2 * split.kv_width(), cfg.n_positions,
                   request.cached_rows.from ? std::vector<int>(B, 0) : begin_);  // the rows the store holds
    reserve_buffers(cfg, batch, options, split, layers_run, result.layers.size(), sublayers_apart(cfg, request));

    for (int b = 0; b < B; ++b) embed_text(model, batch, b, begin_[b], x_.data() + first_row_[b] * C);
    if (options.contributions) std::copy_n(x_.data(), rows * C, residuals_.data());
    size_t slot = 0;
    for (int l = 0; l < layers_run; ++l) {
        report_progress(progress, "computing layers", l, layers_run, ProgressUnit::steps);
        const bool returned = slot < result.layers.size() && result.layers[slot] == l;
        float* att = options.maps != Maps::full ? nullptr
                     : returned                 ? result.weights.data() + slot * map_floats
                                                : scratch_att_.data();
        // Everything after the last layer's attention is not needed, but a layer of experts' routes are.
        const bool last = !every_layer && !cfg.has_experts() && l == layers_run - 1;
        run_layer(model, batch, options, split, store, {l, returned ? static_cast<int>(slot) : -1, att, last}, heads,
                  request, result);
        if (last) break;
        slot += returned;
    }
    if (request.final_states) {  // the encoder's output: after its final norm, where it has one
        if (cfg.post_norm)
            std::copy_n(x_.data(), rows * C, request.final_states);
        else
            normalize(cfg, x_.data(), model.ln_f_w, model.ln_f_b, request.final_states, rows_);
    }
    if (predicting) {
        std::copy_n(x_.data(), rows * C, unembed_in_.data() + lens_slots * rows * C);
        predict(model, batch, options, result);
        if (options.contributions) attribute_logits(model, batch, split, result);
    }
    if (cache && reuse_allowed)
        keep_in_cache(model, batch, options, layers_run, result, *cache);
    else if (cache)
        cache->clear();
}

// The forward's state handed into `cache` for the next to reuse, and the kept rows out to `result`.
void CpuForward::keep_in_cache(const Model& model, const Batch& batch, const AttentionOptions& options, int layers_run,
                               AttentionResult& result, PrefixCache& cache) {
    {
        std::unique_lock hold(cache.lock.mutex);
        cache.model = &model;
        cache.options = options;
        cache.token_ids = batch.token_ids;
        cache.source_ids = batch.source_ids;
        cache.layers = layers_run;
        keep_result(cache.result, result);
        cache.whole = true;
        cache.result.kept.reset();  // cache.kept holds them: the cache counts once (take_kept_rows)
    }
    if (kept_rows_) hand_out_kept_rows(*kept_rows_, batch.token_ids, result);
}

// The rows `cached` asks to read rather than compute: one text's, before
// its last token, with no cache of this forward's own and prefix reuse allowed.
int CpuForward::checked_cached_rows(const Batch& batch, const AttentionOptions& options,
                                    const ForwardRequest::CachedRows& cached, const PrefixCache* cache) {
    if (cache || batch.B() != 1 || !prefix_reuse_refusal(options).empty())
        throw Error(
            "rows read from another forward's cache are for one text, without a cache of its own, where "
            "rows can be reused");
    if (cached.rows < 0 || cached.rows >= static_cast<int>(batch.token_ids[0].size()))
        throw Error("the rows read from another forward's cache (" + std::to_string(cached.rows) +
                    ") must leave at least one of the text's " + std::to_string(batch.token_ids[0].size()) +
                    " tokens to compute");
    return cached.rows;
}

// The forward's buffers for this batch and these options, grown where too small (reserve_floats).
void CpuForward::reserve_buffers(const Config& cfg, const Batch& batch, const AttentionOptions& options,
                                 const HeadSplit& split, int layers_run, size_t returned_layers, bool apart) {
    const int B = batch.B(), T = batch.T(), C = cfg.n_embd;
    const bool predicting = options.top_k > 0 || options.lens_k > 0;
    const size_t map_floats = static_cast<size_t>(B) * split.NH * (T - first_held_) * T;
    const size_t rows = static_cast<size_t>(rows_), qkv_width = split.q_width() + 2 * split.kv_width();
    const size_t lens_slots = lens_ ? returned_layers : 0;
    reserve_floats(x_, rows * C);
    reserve_floats(ln_, std::max(rows, size_t(unembed_chunk)) * C);
    reserve_floats(qkv_, rows * qkv_width);
    if (cfg.qkv_layout == QkvLayout::fused_per_head) reserve_floats(fused_, rows * qkv_width);
    if (options.split == Split::naive_view) reserve_floats(qkv_contiguous_, rows * qkv_width);
    reserve_floats(y_, rows * split.q_width());
    if (apart) reserve_floats(out_, rows * C);
    // A dense MLP's chunks of rows (mlp); an expert's rows, as many as R.
    const size_t hidden = std::max(cfg.mlp_size(), cfg.expert_mlp_dim);
    const size_t hidden_rows = cfg.has_experts() ? rows : std::min(rows, static_cast<size_t>(mlp_chunk_rows));
    reserve_floats(hidden_, hidden_rows * hidden);
    if (gated(cfg.mlp)) reserve_floats(up_, hidden_rows * hidden);
    if (cfg.has_experts()) {
        const size_t choices = rows * cfg.experts_per_token;
        reserve_floats(router_logits_, rows * cfg.n_experts);
        if (chosen_experts_.size() < choices) chosen_experts_.resize(choices), chosen_weights_.resize(choices);
        if (expert_choices_.size() < choices) expert_choices_.resize(choices);
        reserve_floats(expert_in_, rows * C);
        reserve_floats(experts_out_, rows * C);
    }
    if (returned_layers < static_cast<size_t>(layers_run) && options.maps == Maps::full) {
        reserve_floats(scratch_att_, map_floats);
        if (cfg.is_encoder_decoder()) reserve_floats(scratch_cross_, map_floats / T * batch.S());
    }
    if (predicting) reserve_floats(unembed_in_, (lens_slots + 1) * rows * C);

    if (options.contributions) {
        reserve_floats(residuals_, (2 * cfg.n_layer + 1) * rows * C);
        reserve_floats(head_outputs_, cfg.n_layer * rows * split.q_width());
    }
}

// Where a sublayer's output goes: added into x_ as it is written, or, where
// the model normalizes each sublayer's output (OLMo 2) or the request reads
// it apart (patching), into out_ for add_sublayer_output.
bool CpuForward::sublayers_apart(const Config& cfg, const ForwardRequest& request) {
    return cfg.output_norms || request.sublayers_apart;
}
float* CpuForward::sublayer_output(bool apart) { return apart ? out_.data() : x_.data(); }

// Where the sublayers' outputs are apart, x_ += out_, normed where the model
// has output norms (x + norm(attn(x)), x + norm(mlp(x))), and each row's
// rms, the scale the norm divides by, into `rms` (R) unless null.
void CpuForward::add_sublayer_output(const Config& cfg, const float* norm_w, float* rms) {
    if (!cfg.output_norms) return ops::add(x_.data(), out_.data(), static_cast<size_t>(rows_) * cfg.n_embd);
    const int C = cfg.n_embd;
    for (int r = 0; r < rows_ && rms; ++r) {
        double squares = 0;
        for (int c = 0; c < C; ++c) squares += static_cast<double>(out_[size_t(r) * C + c]) * out_[size_t(r) * C + c];
        rms[r] = static_cast<float>(std::sqrt(squares / C + cfg.layer_norm_epsilon));
    }
    normalize(cfg, out_.data(), norm_w, nullptr, out_.data(), rows_);
    ops::add(x_.data(), out_.data(), static_cast<size_t>(rows_) * cfg.n_embd);
}

// ln_ (R, C) -> qkv_ (R, Qw + 2 KVw) as [Q | K | V] in the model's own
// heads, qk-normed over each head's hs values (Qwen 3) or over all of Q's
// and all of K's (OLMo 2).
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
            const int q_group = cfg.qk_norm_whole ? Qw : hs, k_group = cfg.qk_norm_whole ? KVw : hs;
            ops::rms_norm(row, w.q_norm, row, Qw / q_group, q_group, cfg.layer_norm_epsilon);
            ops::rms_norm(row + Qw, w.k_norm, row + Qw, KVw / k_group, k_group, cfg.layer_norm_epsilon);
        }
    }
}

void activate(Mlp mlp, float* x, size_t n) {
    switch (mlp) {
        case Mlp::gelu_exact:
        case Mlp::geglu: ops::gelu_exact(x, x, n); break;
        case Mlp::gelu_tanh:
        case Mlp::gated_gelu: ops::gelu(x, x, n); break;
        case Mlp::swiglu:
        case Mlp::silu: ops::silu(x, x, n); break;
        case Mlp::relu: ops::relu(x, x, n); break;
    }
}

// ln_ (R, C) -> the MLP's output, added into x_ (sublayer_output), over
// chunks of mlp_chunk_rows rows: a long text's hidden layer then takes
// mlp_chunk_rows x F floats, not R x F.
void CpuForward::mlp(const Config& cfg, const LayerWeights& w, bool apart) {
    const int C = cfg.n_embd, F = cfg.mlp_size();
    for (int first = 0; first < rows_; first += mlp_chunk_rows) {
        const int rows = std::min(mlp_chunk_rows, rows_ - first);
        const size_t hidden = static_cast<size_t>(rows) * F;
        const float* in = ln_.data() + static_cast<size_t>(first) * C;
        if (gated(cfg.mlp)) {
            linear(in, rows, w.gate, nullptr, hidden_.data(), F);
            linear(in, rows, w.fc, w.fc_b, up_.data(), F);
            activate(cfg.mlp, hidden_.data(), hidden);
            ops::times(hidden_.data(), up_.data(), hidden);
        } else {
            linear(in, rows, w.fc, w.fc_b, hidden_.data(), F);
            activate(cfg.mlp, hidden_.data(), hidden);
        }
        linear(hidden_.data(), rows, w.fc_proj, w.fc_proj_b, sublayer_output(apart) + static_cast<size_t>(first) * C, C,
               /*accumulate=*/!apart);
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

    void head_effects(const Batch& batch, const AttentionOptions& options, HeadEffects& effects, EffectsOf of,
                      const Progress& progress, EffectsMethod method, const EffectsUpdate& on_update) override {
        if (!model_) throw Error("no model loaded");
        forward_.head_effects(*model_, batch, options, effects, of, progress, method, on_update);
    }

    void patch(const Batch& clean, const Batch& corrupted, const AttentionOptions& options, const PatchRequest& request,
               Patching& patching, const Progress& progress) override {
        if (!model_) throw Error("no model loaded");
        forward_.patch(*model_, clean, corrupted, options, request, patching, progress);
    }

    void patched_run(const Batch& clean, const Batch& corrupted, const AttentionOptions& options,
                     PatchDirection direction, const PatchCell& cell, AttentionResult& result,
                     const Progress& progress) override {
        if (!model_) throw Error("no model loaded");
        forward_.patched_run(*model_, clean, corrupted, options, direction, cell, result, progress);
    }

private:
    const Model* model_ = nullptr;
    CpuForward forward_;
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend() { return std::make_unique<CpuBackend>(); }

}  // namespace headscope
