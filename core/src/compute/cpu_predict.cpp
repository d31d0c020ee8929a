// The CPU forward's predictions and logit lens, and the rows a prefix cache
// supplies (cpu_forward.h): the residual through the final norm and the
// output embedding, its top tokens, and each next token's log-probability.
#include <algorithm>
#include <cmath>
#include <vector>

#include "headscope/base/error.h"
#include "headscope/compute/cpu_forward.h"
#include "headscope/compute/cpu_ops.h"
#include "headscope/compute/matmul.h"

namespace headscope {
namespace {

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

void read_logits_row(const Config& cfg, const Batch& batch, const AttentionOptions& options, AttentionResult& result,
                     int lens_slot, int b, int t, const float* logits, const Prediction* tracked, float* tracked_p) {
    const int T = result.T, V = cfg.vocab_size;
    const std::vector<int32_t>& ids = batch.token_ids[b];
    const int length = static_cast<int>(ids.size());
    const size_t at = static_cast<size_t>(b) * T + t;
    const bool lens = lens_slot >= 0;
    const int k = lens ? result.lens_k : result.top_k;
    Prediction* top = lens ? result.lens.data() + (static_cast<size_t>(lens_slot) * result.B * T + at) * k
                           : result.predictions.data() + at * k;
    if (t >= length || (lens && t < options.lens_from)) {  // a padded position, or a row before the lens's
        std::fill_n(top, k, Prediction{});
        if (!lens) result.logprob_next[at] = std::nanf("");
        return;
    }
    const float lse = ops::log_sum_exp(logits, V);
    top_tokens(logits, V, lse, k, top);
    if (lens) return;
    if (tracked) tracked_p[at] = std::exp(logits[tracked[at].id] - lse);
    // An encoder's predictions are for the position itself: it has no next token's log p.
    const bool next = !cfg.is_encoder() && t + 1 < length;
    result.logprob_next[at] = next ? logits[ids[t + 1]] - lse : std::nanf("");
    if (t == length - 1) std::copy_n(logits, V, result.last_logits.data() + static_cast<size_t>(b) * V);
}

// Copies into `result` the rows [0, begin_b) of each text that the cached
// forward's result already holds: the maps' query rows (their keys
// past the row are masked, so the shorter of the two widths holds them all),
// outputs, predictions, lens and router choices (a long text's queries, keys
// and summaries are where they were: take_kept_rows). Where a text appends to the cached one, the cached last
// row's logprob_next is then the first new token's, from the
// cached last logits.
void CpuForward::keep_earlier_rows(const PrefixCache& cache, const Batch& batch, AttentionResult& result) const {
    const AttentionResult& cached = cache.result;
    const int T = result.T, cached_T = cached.T, width = std::min(T, cached_T);
    const size_t Qw = static_cast<size_t>(result.NH) * result.hs;
    for (int b = 0; b < result.B; ++b) {
        const int kept = begin_[b];
        for (size_t slot = 0; slot < result.layers.size(); ++slot) {
            for (int h = 0; h < result.NH && !result.weights.empty(); ++h)  // a long text's: no map
                for (int i = result.first_row; i < kept; ++i) {             // none with new_rows_only
                    const size_t held = T - result.first_row;
                    float* row = result.weights.data() + ((slot * result.B + b) * result.NH + h) * held * T +
                                 static_cast<size_t>(i - result.first_row) * T;
                    std::fill(std::copy_n(cached.row(static_cast<int>(slot), b, h, i), width, row), row + T, 0.f);
                    if (result.S)  // the same sources (reuse needs them), so the same S
                        std::copy_n(cached.cross_row(static_cast<int>(slot), b, h, i), result.S,
                                    result.cross_row(static_cast<int>(slot), b, h, i));
                }
            if (!result.outputs.empty())
                std::copy_n(cached.outputs.data() + (slot * cached.B + b) * cached_T * Qw, kept * Qw,
                            result.outputs.data() + (slot * result.B + b) * T * Qw);
            for (int t = 0; t < kept && result.lens_k; ++t)
                std::copy_n(cached.lens_at(static_cast<int>(slot), b, t), result.lens_k,
                            result.lens.data() + ((slot * result.B + b) * T + t) * result.lens_k);
        }
        for (int l = 0; l < result.router_layers; ++l) {  // the same model: the same layers and k
            const size_t from = cached.router_at(l, b, 0), to = result.router_at(l, b, 0),
                         n = size_t(kept) * result.router_k;
            std::copy_n(cached.router_experts.data() + from, n, result.router_experts.data() + to);
            std::copy_n(cached.router_weights.data() + from, n, result.router_weights.data() + to);
        }
        for (int t = 0; t < kept && result.top_k; ++t) {
            std::copy_n(cached.predictions_at(b, t), result.top_k,
                        result.predictions.data() + (static_cast<size_t>(b) * T + t) * result.top_k);
            result.logprob_next[static_cast<size_t>(b) * T + t] =
                cached.logprob_next[static_cast<size_t>(b) * cached_T + t];
        }
        // Every cached row reused (the text only grew): the cached last row's
        // logprob_next (NaN, its text ended there) is the first new token's;
        // an encoder's (a causal mask chosen for it) stays NaN: it predicts no next token.
        const bool every_cached_row = kept > 0 && kept == static_cast<int>(cache.token_ids[b].size());
        if (result.top_k && every_cached_row && !cache.model->config.is_encoder()) {
            const float* logits = cached.last_logits.data() + static_cast<size_t>(b) * result.V;
            result.logprob_next[static_cast<size_t>(b) * T + kept - 1] =
                logits[batch.token_ids[b][kept]] - ops::log_sum_exp(logits, result.V);
        }
    }
}

// ln_ (n, C) = what the output embedding reads of n residual rows x: the
// final norm's output (a pre-norm model's), then the masked-LM head's
// transform (dense, GELU, LayerNorm) where the model has one.
void CpuForward::read_out(const Model& model, const float* x, int n) {
    const Config& cfg = model.config;
    const int C = cfg.n_embd;
    const size_t values = static_cast<size_t>(n) * C;
    if (!cfg.post_norm)
        normalize(cfg, x, model.ln_f_w, model.ln_f_b, ln_.data(), n);
    else if (!cfg.mlm_head)  // BART, Marian: the last layer's norm was the final one
        std::copy_n(x, values, ln_.data());
    if (cfg.output_scale != 1)  // T5's tied output embedding reads the output scaled by C^-1/2
        for (size_t i = 0; i < values; ++i) ln_[i] *= cfg.output_scale;
    if (!cfg.mlm_head) return;
    const float* head_in = x;
    if (!cfg.post_norm) {  // the head reads the final norm's output
        std::copy_n(ln_.data(), values, head_in_.data());
        head_in = head_in_.data();
    }
    linear(head_in, n, model.head_dense, model.head_dense_b, ln_.data(), C);
    if (cfg.mlp == Mlp::gelu_tanh)
        ops::gelu(ln_.data(), ln_.data(), values);
    else
        ops::gelu_exact(ln_.data(), ln_.data(), values);
    ops::layer_norm(ln_.data(), model.head_ln_w, model.head_ln_b, ln_.data(), n, C, cfg.layer_norm_epsilon);
}

void CpuForward::soft_cap(const Config& cfg, float* logits, size_t n) {
    if (cfg.logit_softcap <= 0) return;
    Eigen::Map<Eigen::ArrayXf> capped(logits, static_cast<Eigen::Index>(n));
    capped = (capped / cfg.logit_softcap).tanh() * cfg.logit_softcap;
}

// logits_ (n, V) of n residual rows x: what the output embedding reads
// (read_out), through it, then Gemma's final soft-cap.
void CpuForward::unembed(const Model& model, const float* x, int n) {
    const Config& cfg = model.config;
    const int V = cfg.vocab_size;
    read_out(model, x, n);
    linear(ln_.data(), n, model.lm_head, model.lm_bias, logits_.data(), V);
    soft_cap(cfg, logits_.data(), static_cast<size_t>(n) * V);
    if (!ops::all_finite(logits_.data(), static_cast<size_t>(n) * V))
        throw Error("the logits are not finite (a value past float32's range, from weights too large)");
}

// unembed_in_'s rows (the residual after each lens layer, then after the
// last layer), through the final norm and the output embedding, in chunks of
// unembed_chunk rows: a keystroke's few rows of every lens layer read the
// output embedding once, and a long text's logits stay within (chunk, V).
// Per row: the lens's or the predictions' top tokens, logprob_next, and at a
// text's last token its logits.
void CpuForward::predict(const Model& model, const Batch& batch, const AttentionOptions& options,
                         AttentionResult& result, const Prediction* tracked, float* tracked_p) {
    const Config& cfg = model.config;
    const int C = cfg.n_embd, V = cfg.vocab_size, R = rows_;
    const int lens_slots = lens_ ? static_cast<int>(result.layers.size()) : 0;
    const int total = (lens_slots + (options.top_k ? 1 : 0)) * R;
    reserve_floats(logits_, static_cast<size_t>(std::min(total, unembed_chunk)) * V);
    if (cfg.mlm_head && !cfg.post_norm) reserve_floats(head_in_, static_cast<size_t>(unembed_chunk) * C);
    for (int start = 0; start < total; start += unembed_chunk) {
        const int n = std::min(unembed_chunk, total - start);
        unembed(model, unembed_in_.data() + static_cast<size_t>(start) * C, n);
#pragma omp parallel for schedule(static)
        for (int r = 0; r < n; ++r) {
            const int row = start + r, slot = row / R, text_row = row % R;
            const int b = static_cast<int>(std::upper_bound(first_row_.begin(), first_row_.end(), text_row) -
                                           first_row_.begin()) -
                          1;
            read_logits_row(cfg, batch, options, result, slot < lens_slots ? slot : -1, b,
                            begin_[b] + text_row - first_row_[b], logits_.data() + static_cast<size_t>(r) * V, tracked,
                            tracked_p);
        }
    }
}

}  // namespace headscope
