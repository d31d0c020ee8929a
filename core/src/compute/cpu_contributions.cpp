// What each head contributes (cpu_forward.h, attention.h's contributions):
// the size of what each key sends each query through a head (value-weighted
// norms), the rollout over the layers, and each part's direct attribution
// to the top token's logit. A forward with contributions computes every row
// (no prefix reuse) in the view + transpose split (validate_forward).
// Legend as cpu_forward.h; W_O^h is head h's hs rows of the output
// projection (Qw -> C).
#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <vector>

#include "headscope/base/error.h"
#include "headscope/compute/cpu_forward.h"
#include "headscope/compute/matmul.h"

namespace headscope {

namespace {

using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using Strided = Eigen::Map<const RowMajor, 0, Eigen::OuterStride<>>;

float dot(const float* a, const float* b, int n) {
    double sum = 0;
    for (int i = 0; i < n; ++i) sum += static_cast<double>(a[i]) * b[i];
    return static_cast<float>(sum);
}

}  // namespace

// This layer's heads' outputs kept for the attribution, its step of the
// rollout (text by text: R = A' R, A' = (mean of the heads' maps + I) / 2, rows of 1)
// and, for a returned layer, the value-weighted maps: alpha_qk times
// ||v_k W_O^h||, v_k of the key/value head query head h reads.
void CpuForward::contribute(const Model& model, const Batch& batch, const AttentionOptions& options,
                            const HeadSplit& split, const LayerAt& at, AttentionResult& result) {
    const int B = batch.B(), T = batch.T(), NH = split.NH, hs = split.hs, C = model.config.n_embd;
    const int Qw = split.q_width(), KVw = split.kv_width(), width = Qw + 2 * KVw;
    const size_t R = static_cast<size_t>(rows_), TT = static_cast<size_t>(T) * T;
    std::copy_n(y_.data(), R * Qw, head_outputs_.data() + at.layer * R * Qw);

    for (int b = 0; b < B; ++b) {
        RowMajor step = RowMajor::Identity(T, T) * 0.5f;
        for (int h = 0; h < NH; ++h)
            step += Eigen::Map<const RowMajor>(at.att + (static_cast<size_t>(b) * NH + h) * TT, T, T) * (0.5f / NH);
        // Rows renormalised, as Abnar & Zuidema's: a fully masked (padding) row's 0.5 I becomes I.
        step.array().colwise() /= step.rowwise().sum().array();
        Eigen::Map<RowMajor> rollout(result.rollout.data() + b * TT, T, T);
        if (at.layer == 0)
            rollout = step;
        else
            rollout = (step * rollout).eval();
    }
    if (at.slot < 0) return;

    const size_t slot = static_cast<size_t>(at.slot);
    keep_queries_keys(split, slot, result);
    const Matrix& w_o = model.layers[at.layer].attn_proj;
    std::vector<float> rows(static_cast<size_t>(hs) * C);  // (hs, C): W_O^h
    for (int h = 0; h < NH; ++h) {
        if (options.knocks_out({at.layer, h})) {
            for (int b = 0; b < B; ++b)
                std::fill_n(result.value_weighted.data() + ((slot * B + b) * NH + h) * TT, TT, 0.f);
            continue;
        }
        input_rows(w_o, static_cast<int64_t>(h) * hs, hs, rows.data());
        Eigen::Map<RowMajor> w_h(rows.data(), hs, C);
        // Through the output norm's gain (OLMo 2): the query's own scale, one
        // number a row, leaves the row's proportions as they are.
        if (model.config.output_norms)
            w_h.array().rowwise() *=
                Eigen::Map<const Eigen::ArrayXf>(model.layers[at.layer].attn_out_norm, C).transpose();
        const int kv = h / split.group();
        for (int b = 0; b < B; ++b) {
            const float* v = qkv_.data() + static_cast<size_t>(first_row_[b]) * width + Qw + KVw + kv * hs;
            const Eigen::VectorXf norms = (Strided(v, T, hs, Eigen::OuterStride<>(width)) * w_h).rowwise().norm();
            const size_t map = (static_cast<size_t>(at.slot) * B + b) * NH + h;
            const Eigen::Map<const RowMajor> att(at.att + (static_cast<size_t>(b) * NH + h) * TT, T, T);
            Eigen::Map<RowMajor>(result.value_weighted.data() + map * TT, T, T) =
                att.array().rowwise() * norms.transpose().array();
        }
    }
}

// Each part's direct contribution to the logit of the top token at every
// real position: its residual-stream vector c dotted with w_t, the token's
// row of the output embedding through the final norm with its scale frozen
// at the whole residual's (LayerNorm: gamma (c - mean c) / sigma, so w_t is
// centred; RMSNorm: gamma c / rms). ln_ holds w (R, C), y_ W_O w per layer.
// Where each attention's output is normed before the residual (OLMo 2), a
// head's and the bias's parts pass through that norm too, its scale frozen
// at the row's (attention_output_scale): w becomes w gamma_l / rms_l there (in out_).
// Gemma's final soft-cap (tanh) comes after: the parts add up to the logit before it.
void CpuForward::attribute_logits(const Model& model, const Batch& batch, const HeadSplit& split,
                                  AttentionResult& result) {
    const Config& cfg = model.config;
    const int B = batch.B(), T = batch.T(), L = cfg.n_layer, NH = split.NH, hs = split.hs, C = cfg.n_embd;
    const int Qw = split.q_width(), parts = result.parts();
    const size_t R = static_cast<size_t>(rows_);
    if (!model.lm_head.out_by_in) throw Error("the logit attribution needs the output embedding stored by token");
    const bool layer_norm = cfg.norm == Norm::layer_norm;
    const float* final = residuals_.data() + 2 * L * R * C;
    std::vector<float> unembed(C);
    std::fill_n(ln_.data(), R * C, 0.f);
    for (int b = 0; b < B; ++b)
        for (int t = 0; t < static_cast<int>(batch.token_ids[b].size()); ++t) {
            const size_t r = static_cast<size_t>(first_row_[b] + t), at = static_cast<size_t>(b) * T + t;
            stored_row(model.lm_head, result.predictions_at(b, t)[0].id, unembed.data());
            const float* x = final + r * C;
            double mean = 0, squares = 0;
            for (int c = 0; c < C; ++c) mean += x[c] / C;
            for (int c = 0; c < C; ++c) squares += (layer_norm ? (x[c] - mean) * (x[c] - mean) : x[c] * x[c]) / C;
            const double scale = std::sqrt(squares + cfg.layer_norm_epsilon);
            result.final_scale[at] = static_cast<float>(scale);
            float* w = ln_.data() + r * C;
            double w_mean = 0, logit = 0;
            for (int c = 0; c < C; ++c) {
                w[c] = static_cast<float>(model.ln_f_w[c] * unembed[c] / scale);
                w_mean += w[c] / static_cast<double>(C);
                const double normed = ((layer_norm ? x[c] - mean : x[c]) / scale) * model.ln_f_w[c];
                logit += (normed + (layer_norm ? model.ln_f_b[c] : 0)) * unembed[c];
            }
            if (layer_norm)
                for (int c = 0; c < C; ++c) w[c] -= static_cast<float>(w_mean);
            result.attributed_logit[at] = static_cast<float>(logit);
            float* part = result.part_logit_attribution.data() + at * parts;
            part[0] = dot(residuals_.data() + r * C, w, C);
            for (int l = 0; l < L; ++l) {
                const float* attended = residuals_.data() + (2 * l + 1) * R * C + r * C;
                const float* after = residuals_.data() + (2 * l + 2) * R * C + r * C;
                double mlp = 0;
                for (int c = 0; c < C; ++c) mlp += (static_cast<double>(after[c]) - attended[c]) * w[c];
                part[1 + L + l] = static_cast<float>(mlp);
            }
            part[2 * L + 1] = layer_norm ? dot(model.ln_f_b, unembed.data(), C) : 0.f;
        }
    for (int l = 0; l < L; ++l) {
        const LayerWeights& lw = model.layers[l];
        const float* seen = ln_.data();  // (R, C): w as the layer's attention output meets it
        if (cfg.output_norms) {
            for (size_t r = 0; r < R; ++r)
                for (int c = 0; c < C; ++c)
                    out_[r * C + c] = ln_[r * C + c] * lw.attn_out_norm[c] / result.attention_output_scale[l * R + r];
            seen = out_.data();
        }
        linear(seen, rows_, lw.attn_proj.transposed(), nullptr, y_.data(), Qw);  // (R, Qw)
        for (int b = 0; b < B; ++b)
            for (int t = 0; t < static_cast<int>(batch.token_ids[b].size()); ++t) {
                const size_t r = static_cast<size_t>(first_row_[b] + t);
                result.part_logit_attribution[(static_cast<size_t>(b) * T + t) * parts + 1 + l] =
                    lw.attn_proj_b ? dot(lw.attn_proj_b, seen + r * C, C) : 0.f;
                for (int h = 0; h < NH; ++h)
                    result.head_logit_attribution[((static_cast<size_t>(l) * B + b) * NH + h) * T + t] =
                        dot(head_outputs_.data() + (l * R + r) * Qw + h * hs, y_.data() + r * Qw + h * hs, hs);
            }
    }
}

}  // namespace headscope
