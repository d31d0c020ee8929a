// The backward pass's ends (backward.h): the metric of a kept forward and
// its gradient with respect to the last layer's output, the activations
// handed out, and metric_gradients, which runs them.
#include <cmath>
#include <memory>
#include <string>
#include <utility>

#include "backward_trace.h"
#include "headscope/base/error.h"
#include "headscope/compute/cpu_ops.h"
#include "headscope/compute/matmul.h"

namespace headscope {

// A logit difference where the output embedding is stored a row per token (and the logits are not capped):
// those two rows alone (their difference is the gradient of the final
// norm's output at the position) into `d_norm`.
double BackwardTrace::logit_difference(const PatchRequest& request, float* d_norm) const {
    const int C = cfg_.n_embd;
    std::vector<float> answer(C), wrong(C);
    stored_row(model_.lm_head, request.answer, answer.data());
    stored_row(model_.lm_head, request.wrong, wrong.data());
    const size_t row = request.position - first_;
    const float* x = read_.data() + row * C;
    double metric =
        model_.lm_bias ? static_cast<double>(model_.lm_bias[request.answer]) - model_.lm_bias[request.wrong] : 0;
    for (int c = 0; c < C; ++c) {
        metric += static_cast<double>(x[c]) * answer[c] - static_cast<double>(x[c]) * wrong[c];
        d_norm[row * C + c] = answer[c] - wrong[c];
    }
    return metric;
}

// Any metric through the whole output embedding: the logits of the rows it
// reads, and the gradient of the final norm's output into `d_norm`. The
// loss's rows before first_ are the prefix's: their terms are its.
double BackwardTrace::metric_of_logits(const PatchRequest& request, const std::vector<int32_t>& clean, float* d_norm) {
    const int C = cfg_.n_embd, V = cfg_.vocab_size;
    const bool loss = request.metric == PatchMetric::loss;
    const int first = loss ? 0 : request.position - first_, n = loss ? T_ - 1 : 1;
    std::vector<float> logits(static_cast<size_t>(n) * V), d_logits(logits.size(), 0.f);
    backward_linear(read_.data() + static_cast<size_t>(first) * C, n, model_.lm_head, model_.lm_bias, logits.data(), V);
    const float cap = cfg_.logit_softcap;  // Gemma's final cap tanh(logit / cap), as the forward's soft_cap
    if (cap != 0)
        for (float& logit : logits) logit = cap * std::tanh(logit / cap);
    double metric = 0;
    losses_.clear();
    for (int i = 0; loss && i < first_; ++i) metric += prefix_->losses_.at(i);
    for (int i = 0; i < n; ++i) {
        const float* row = logits.data() + static_cast<size_t>(i) * V;
        float* d_row = d_logits.data() + static_cast<size_t>(i) * V;
        if (request.metric == PatchMetric::logit_diff) {
            metric = static_cast<double>(row[request.answer]) - row[request.wrong];
            d_row[request.answer] = 1, d_row[request.wrong] = -1;
            continue;
        }
        const int32_t token = loss ? clean[first_ + i + 1] : request.answer;
        const double log_sum = ops::log_sum_exp(row, V), sign = loss ? -1.0 / (positions_ - 1) : 1.0;
        const double term = sign * (row[token] - log_sum);
        metric += term;
        if (loss) losses_.push_back(term);
        for (int v = 0; v < V; ++v) d_row[v] = static_cast<float>(-sign * std::exp(row[v] - log_sum));
        d_row[token] += static_cast<float>(sign);
    }
    if (cap != 0)
        for (size_t i = 0; i < logits.size(); ++i) d_logits[i] *= 1 - (logits[i] / cap) * (logits[i] / cap);
    backward_linear(d_logits.data(), n, model_.lm_head.transposed(), nullptr, d_norm + static_cast<size_t>(first) * C,
                    C);
    return metric;
}

// read_ = final_n_ (T5's times its output scale), or the masked-LM head's dense, GELU and LayerNorm of it (as
// the forward's read_out).
void BackwardTrace::read_head() {
    if (!cfg_.mlm_head) {
        read_ = final_n_;
        for (float& value : read_) value *= cfg_.output_scale;
        return;
    }
    const int C = cfg_.n_embd;
    head_dense_.resize(final_n_.size());
    backward_linear(final_n_.data(), T_, model_.head_dense, model_.head_dense_b, head_dense_.data(), C);
    AlignedVector<float> active(head_dense_.begin(), head_dense_.end());  // aligned: see LayerTrace::act
    activate(head_gelu(), active.data(), active.size());
    read_.resize(active.size());
    norm_forward({true, C, cfg_.layer_norm_epsilon}, active.data(), model_.head_ln_w, model_.head_ln_b, read_.data(),
                 T_, head_s_);
}

// The gradient with respect to final_n_ from that with respect to read_.
std::vector<float> BackwardTrace::read_head_backward(const std::vector<float>& d_read) const {
    if (!cfg_.mlm_head) {
        std::vector<float> d_final = d_read;
        for (float& value : d_final) value *= cfg_.output_scale;
        return d_final;
    }
    const int C = cfg_.n_embd;
    AlignedVector<float> active(head_dense_.begin(), head_dense_.end()), slopes(active.size());
    std::vector<float> d_active(head_dense_.size(), 0.f);
    activate_with_slopes(head_gelu(), active.data(), slopes.data(), active.size());
    norm_backward({true, C, cfg_.layer_norm_epsilon}, active.data(), model_.head_ln_w, head_s_, d_read.data(),
                  d_active.data(), T_);
    for (size_t i = 0; i < d_active.size(); ++i) d_active[i] *= slopes[i];
    std::vector<float> d_final(d_read.size());
    backward_linear(d_active.data(), T_, model_.head_dense.transposed(), nullptr, d_final.data(), C);
    return d_final;
}

// The metric of what the output embedding reads, and where `d_final` is set
// the gradient with respect to the last layer's output (T, C) into it.
double BackwardTrace::metric(const PatchRequest& request, const std::vector<int32_t>& clean,
                             std::vector<float>* d_final) {
    std::vector<float> d_norm(final_x_.size(), 0.f);
    const bool two_rows =
        request.metric == PatchMetric::logit_diff && model_.lm_head.out_by_in && cfg_.logit_softcap == 0;
    const double metric =
        two_rows ? logit_difference(request, d_norm.data()) : metric_of_logits(request, clean, d_norm.data());
    if (d_final) *d_final = output_backward(read_head_backward(d_norm));
    return metric;
}

std::vector<float> BackwardTrace::output_backward(const std::vector<float>& d_output) const {
    if (cfg_.post_norm) return d_output;
    std::vector<float> d_final(d_output.size(), 0.f);
    norm_backward(residual_norm_, final_x_.data(), model_.ln_f_w, final_s_, d_output.data(), d_final.data(), T_);
    return d_final;
}

void BackwardTrace::keep(RunActivations& activations) const {
    activations = {};
    const size_t P = positions_, first = first_;
    // Of a kept vector, block `block`'s rows of `width` values: the prefix's rows before first_ (`before` holds P rows
    // a block), then this trace's T_.
    const auto append = [&](std::vector<float>& to, const std::vector<float>& before, const std::vector<float>& own,
                            size_t width, size_t block = 0) {
        if (first > 0)
            to.insert(to.end(), before.begin() + block * P * width, before.begin() + (block * P + first) * width);
        to.insert(to.end(), own.begin() + block * T_ * width, own.begin() + (block + 1) * T_ * width);
    };
    const size_t C = cfg_.n_embd, Qw = split_.q_width();
    for (int l = 0; l < cfg_.n_layer; ++l) {
        const LayerTrace &lt = layers_[l], &before = prefix_ ? prefix_->layers_[l] : lt;
        append(activations.heads, before.y, lt.y, Qw), append(activations.residual, before.x, lt.x, C);
        append(activations.mlp, before.m, lt.m, C);
        for (int h = 0; h < split_.NH; ++h) append(activations.pattern, before.att, lt.att, P, h);
        // An encoder–decoder's decoder: every row its own (no prefix).
        activations.cross_heads.insert(activations.cross_heads.end(), lt.cy.begin(), lt.cy.end());
        activations.cross_pattern.insert(activations.cross_pattern.end(), lt.catt.begin(), lt.catt.end());
    }
}

namespace {

bool floating_point(const Matrix& m) {
    return !m || m.dtype == DType::F32 || m.dtype == DType::F16 || m.dtype == DType::BF16;
}

// Throws Error naming the first quantized matrix of `model`'s layers (an encoder–decoder's encoder's too) or head.
void check_floating_point(const Model& model) {
    std::vector<const Matrix*> matrices = {&model.lm_head};
    for (const Model* stack : {&model, static_cast<const Model*>(model.encoder.get())})
        for (size_t l = 0; stack && l < stack->layers.size(); ++l)
            for (const Matrix LayerWeights::*m :
                 {&LayerWeights::attn, &LayerWeights::q, &LayerWeights::k, &LayerWeights::v, &LayerWeights::attn_proj,
                  &LayerWeights::fc, &LayerWeights::gate, &LayerWeights::fc_proj, &LayerWeights::cross_q,
                  &LayerWeights::cross_k, &LayerWeights::cross_v, &LayerWeights::cross_proj})
                matrices.push_back(&(stack->layers[l].*m));
    for (const Matrix* m : matrices)
        if (!floating_point(*m))
            throw Error(std::string("attribution patching does not support quantized weights (") + to_string(m->dtype) +
                        ") yet");
}

}  // namespace

double metric_gradients(const Model& model, const Batch& text, const std::vector<int32_t>& clean,
                        const AttentionOptions& options, const PatchRequest& request, RunActivations* activations,
                        RunActivations* gradients) {
    check_backward_supported(model.config, options);
    check_floating_point(model);
    // An encoder–decoder's encoder first: its output is the decoder's memory.
    std::unique_ptr<BackwardTrace> encoder;
    if (model.config.is_encoder_decoder())
        encoder = std::make_unique<BackwardTrace>(*model.encoder, Batch{text.source_ids, text.pad_id},
                                                  encoder_options(options));
    if (encoder) BackwardTrace::forward({encoder.get()});
    BackwardTrace trace(model, text, options, encoder ? &encoder->output() : nullptr);
    BackwardTrace::forward({&trace});
    std::vector<float> d_final, d_memory;
    const double metric = trace.metric(request, clean, gradients ? &d_final : nullptr);
    if (activations) {
        trace.keep(*activations);
        if (encoder) encoder->keep(activations->encoder.emplace_back());
    }
    if (gradients) {
        gradients->encoder.clear();
        trace.backward(std::move(d_final), *gradients, &d_memory);
        if (encoder) encoder->backward(encoder->output_backward(d_memory), gradients->encoder.emplace_back());
    }
    return metric;
}

std::pair<double, double> patching_gradients(const Model& model, const Batch& clean, const Batch& corrupted,
                                             const AttentionOptions& options, const PatchRequest& request,
                                             RunActivations& clean_run, RunActivations& corrupted_run,
                                             RunActivations& gradients) {
    const bool denoise = request.direction == PatchDirection::denoise;
    const std::vector<int32_t>& clean_ids = clean.token_ids.at(0);
    if (model.config.is_encoder_decoder()) {  // each target row reads its own run's encoding: every row is computed
        const double clean_metric =
            metric_gradients(model, clean, clean_ids, options, request, &clean_run, denoise ? nullptr : &gradients);
        const double corrupted_metric = metric_gradients(model, corrupted, clean_ids, options, request, &corrupted_run,
                                                         denoise ? &gradients : nullptr);
        return {clean_metric, corrupted_metric};
    }
    check_backward_supported(model.config, options);
    check_floating_point(model);
    const int first = first_changed_row(clean_ids, corrupted.token_ids.at(0), options, request);
    BackwardTrace from(model, denoise ? clean : corrupted, options);
    BackwardTrace to(model, denoise ? corrupted : clean, options, nullptr, &from, first);
    BackwardTrace::forward({&from, &to});  // both texts' rows in each product
    const double source_metric = from.metric(request, clean_ids, nullptr);
    std::vector<float> d_final;
    const double target_metric = to.metric(request, clean_ids, &d_final);
    from.keep(denoise ? clean_run : corrupted_run);
    to.keep(denoise ? corrupted_run : clean_run);
    to.backward(std::move(d_final), gradients);
    return denoise ? std::pair{source_metric, target_metric} : std::pair{target_metric, source_metric};
}

}  // namespace headscope
