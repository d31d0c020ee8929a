// Test support: the double-precision reference forward; see reference_forward.h.
#include "reference_forward.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "headscope/compute/matmul.h"

namespace headscope::test {

namespace {

using Matrix = std::vector<std::vector<double>>;  // [row][column]

Matrix zeros(int rows, int cols) { return Matrix(rows, std::vector<double>(cols, 0.0)); }

// x W + b, W given row-major (in, out) as stored in the model.
Matrix affine(const Matrix& x, const float* w, const float* b, int in, int out) {
    Matrix y = zeros(static_cast<int>(x.size()), out);
    for (size_t t = 0; t < x.size(); ++t)
        for (int o = 0; o < out; ++o) {
            double sum = b[o];
            for (int i = 0; i < in; ++i) sum += x[t][i] * w[static_cast<size_t>(i) * out + o];
            y[t][o] = sum;
        }
    return y;
}

Matrix norm(const Matrix& x, const float* w, const float* b, double eps) {
    Matrix y = x;
    for (auto& row : y) {
        double mean = 0, var = 0;
        for (double v : row) mean += v;
        mean /= row.size();
        for (double v : row) var += (v - mean) * (v - mean);
        var /= row.size();
        for (size_t c = 0; c < row.size(); ++c) row[c] = (row[c] - mean) / std::sqrt(var + eps) * w[c] + b[c];
    }
    return y;
}

// Where element (h, t, d) of a head view lives in a (T, C) matrix.
struct Place {
    int row, col;
};
Place head_place(Split split, int h, int t, int d, int T, int C, int hs) {
    if (split == Split::transpose) return {t, h * hs + d};
    const int flat = (h * T + t) * hs + d;  // (NH, T, hs) read straight off the (T, C) buffer
    return {flat / C, flat % C};
}

// A knocked-out head's output (T, hs): zero, or at every position the mean
// of its rows over the text's `length` real positions.
Matrix knocked_out(const Matrix& y, Ablation ablation, int length) {
    Matrix out = zeros(static_cast<int>(y.size()), static_cast<int>(y[0].size()));
    if (ablation == Ablation::zero) return out;
    for (size_t d = 0; d < y[0].size(); ++d) {
        double mean = 0;
        for (int t = 0; t < length; ++t) mean += y[t][d];
        for (auto& row : out) row[d] = mean / length;
    }
    return out;
}

}  // namespace

Reference reference_attention(const Model& model, const std::vector<std::vector<int32_t>>& texts,
                              const AttentionOptions& opt) {
    const Config& cfg = model.config;
    const int B = static_cast<int>(texts.size()), C = cfg.n_embd;
    const int NH = opt.n_head ? opt.n_head : cfg.n_head, hs = C / NH;
    int T = 0;
    for (const auto& ids : texts) T = std::max(T, static_cast<int>(ids.size()));
    std::vector<int> layers = opt.layers;
    if (layers.empty())
        for (int l = 0; l < cfg.n_layer; ++l) layers.push_back(l);

    Reference ref;
    ref.weights.assign(layers.size() * B * NH * T * T, 0.0);
    ref.fully_masked.assign(B * T, 0);
    ref.outputs.assign(layers.size() * B * T * C, 0.0);
    ref.residual.assign(size_t(cfg.n_layer) * B * T * C, 0.0);
    const bool contributing = opt.contributions;
    if (contributing) {
        ref.value_weighted.assign(ref.weights.size(), 0.0);
        ref.rollout.assign(size_t(B) * T * T, 0.0);
        ref.embedding.assign(size_t(B) * T * C, 0.0);
        ref.head_writes.assign(size_t(cfg.n_layer) * B * NH * T * C, 0.0);
        ref.mlp_writes.assign(size_t(cfg.n_layer) * B * T * C, 0.0);
    }
    const double scale = opt.scale == Scale::head    ? 1.0 / std::sqrt(double(hs))
                         : opt.scale == Scale::model ? 1.0 / std::sqrt(double(C))
                                                     : 1.0;
    // The weights as float32 (in, out), as GPT-2's files hold them.
    const std::vector<float> wte = to_floats(model.wte), wpe = to_floats(model.wpe);
    struct LayerFloats {
        std::vector<float> attn, attn_proj, fc, fc_proj;
    };
    std::vector<LayerFloats> layer_floats;
    for (const LayerWeights& w : model.layers)
        layer_floats.push_back({to_floats(w.attn), to_floats(w.attn_proj), to_floats(w.fc), to_floats(w.fc_proj)});
    for (int b = 0; b < B; ++b) {
        const int length = static_cast<int>(texts[b].size());
        Matrix x = zeros(T, C);
        for (int t = 0; t < T; ++t) {
            const int id = t < length ? texts[b][t] : cfg.eos_token_id;
            for (int c = 0; c < C; ++c) x[t][c] = double(wte[size_t(id) * C + c]) + wpe[size_t(t) * C + c];
            if (contributing) std::copy(x[t].begin(), x[t].end(), &ref.embedding[(size_t(b) * T + t) * C]);
        }
        Matrix rollout = zeros(T, T);
        for (int t = 0; t < T; ++t) rollout[t][t] = 1;
        for (int l = 0; l < cfg.n_layer; ++l) {
            const LayerWeights& w = model.layers[l];
            const LayerFloats& f = layer_floats[l];
            const Matrix qkv =
                affine(norm(x, w.ln_1_w, w.ln_1_b, cfg.layer_norm_epsilon), f.attn.data(), w.attn_b, C, 3 * C);
            Matrix merged = zeros(T, C), step = zeros(T, T);
            for (int t = 0; t < T; ++t) step[t][t] = 0.5;
            for (int h = 0; h < NH; ++h) {
                // This head's (T, hs) slices of Q, K and V.
                Matrix q = zeros(T, hs), k = zeros(T, hs), v = zeros(T, hs);
                for (int t = 0; t < T; ++t)
                    for (int d = 0; d < hs; ++d) {
                        const Place p = head_place(opt.split, h, t, d, T, C, hs);
                        q[t][d] = qkv[p.row][p.col];
                        k[t][d] = qkv[p.row][C + p.col];
                        v[t][d] = qkv[p.row][2 * C + p.col];
                    }
                Matrix att = zeros(T, T);
                for (int i = 0; i < T; ++i) {
                    std::vector<bool> visible(T);
                    bool any = false;
                    for (int j = 0; j < T; ++j) {
                        visible[j] = (!opt.causal || j <= i) && (!opt.padding_mask || (i < length && j < length));
                        any = any || visible[j];
                    }
                    if (!any) {
                        ref.fully_masked[b * T + i] = 1;
                        continue;
                    }
                    double max_score = -INFINITY, sum = 0;
                    for (int j = 0; j < T; ++j) {
                        if (!visible[j]) continue;
                        double s = 0;
                        for (int d = 0; d < hs; ++d) s += q[i][d] * k[j][d];
                        att[i][j] = s * scale;
                        max_score = std::max(max_score, att[i][j]);
                    }
                    for (int j = 0; j < T; ++j) {
                        att[i][j] = visible[j] ? std::exp(att[i][j] - max_score) : 0.0;
                        sum += att[i][j];
                    }
                    for (int j = 0; j < T; ++j) att[i][j] /= sum;
                }
                const auto slot = std::find(layers.begin(), layers.end(), l);
                if (slot != layers.end())
                    for (int i = 0; i < T; ++i)
                        for (int j = 0; j < T; ++j)
                            ref.weights[((((slot - layers.begin()) * B + b) * NH + h) * T + i) * T + j] = att[i][j];
                Matrix y = zeros(T, hs);
                for (int t = 0; t < T; ++t)
                    for (int d = 0; d < hs; ++d)
                        for (int j = 0; j < T; ++j) y[t][d] += att[t][j] * v[j][d];
                const bool knocked = std::find(opt.ablate.begin(), opt.ablate.end(), HeadRef{l, h}) != opt.ablate.end();
                if (knocked) y = knocked_out(y, opt.ablation, length);
                if (contributing) {
                    // Through this head's rows of c_proj: each value (its norm) and each output.
                    const auto through = [&](const std::vector<double>& row, double* out) {
                        for (int c = 0; c < C; ++c) {
                            out[c] = 0;
                            for (int d = 0; d < hs; ++d) out[c] += row[d] * f.attn_proj[size_t(h * hs + d) * C + c];
                        }
                    };
                    std::vector<double> written(C);
                    for (int t = 0; t < T; ++t) {
                        through(y[t], &ref.head_writes[(((size_t(l) * B + b) * NH + h) * T + t) * C]);
                        through(v[t], written.data());
                        double norm = 0;
                        for (double w : written) norm += w * w;
                        const auto slot = std::find(layers.begin(), layers.end(), l);
                        if (slot != layers.end())
                            for (int q = 0; q < T; ++q)
                                ref.value_weighted[((((slot - layers.begin()) * B + b) * NH + h) * T + q) * T + t] =
                                    knocked ? 0.0 : att[q][t] * std::sqrt(norm);  // a knocked-out head sends nothing
                        for (int q = 0; q < T; ++q) step[q][t] += 0.5 * att[q][t] / NH;
                    }
                }
                for (int t = 0; t < T; ++t)
                    for (int d = 0; d < hs; ++d) {
                        const Place p = head_place(opt.split, h, t, d, T, C, hs);
                        merged[p.row][p.col] = y[t][d];
                    }
            }
            if (const auto slot = std::find(layers.begin(), layers.end(), l); slot != layers.end())
                for (int t = 0; t < T; ++t)
                    for (int c = 0; c < C; ++c)
                        ref.outputs[(((slot - layers.begin()) * B + b) * T + t) * C + c] = merged[t][c];
            const Matrix proj = affine(merged, f.attn_proj.data(), w.attn_proj_b, C, C);
            for (int t = 0; t < T; ++t)
                for (int c = 0; c < C; ++c) x[t][c] += proj[t][c];
            Matrix hidden = affine(norm(x, w.ln_2_w, w.ln_2_b, cfg.layer_norm_epsilon), f.fc.data(), w.fc_b, C, 4 * C);
            for (auto& row : hidden)
                for (double& u : row) u = 0.5 * u * (1 + std::tanh(std::sqrt(2 / M_PI) * (u + 0.044715 * u * u * u)));
            const Matrix out = affine(hidden, f.fc_proj.data(), w.fc_proj_b, 4 * C, C);
            if (contributing) {
                for (int t = 0; t < T; ++t)
                    std::copy(out[t].begin(), out[t].end(), &ref.mlp_writes[((size_t(l) * B + b) * T + t) * C]);
                for (auto& row : step) {  // rows of 1 (a fully masked row's 0.5 I: I)
                    const double sum = std::accumulate(row.begin(), row.end(), 0.0);
                    for (double& u : row) u /= sum;
                }
                Matrix next = zeros(T, T);
                for (int q = 0; q < T; ++q)
                    for (int k = 0; k < T; ++k)
                        for (int j = 0; j < T; ++j) next[q][k] += step[q][j] * rollout[j][k];
                rollout = next;
                if (l == cfg.n_layer - 1)
                    for (int q = 0; q < T; ++q)
                        for (int k = 0; k < T; ++k) ref.rollout[(size_t(b) * T + q) * T + k] = rollout[q][k];
            }
            for (int t = 0; t < T; ++t)
                for (int c = 0; c < C; ++c) {
                    x[t][c] += out[t][c];
                    ref.residual[((size_t(l) * B + b) * T + t) * C + c] = x[t][c];
                }
        }
    }
    return ref;
}

Attribution reference_attribution(const Model& model, const Reference& ref, int B, int T, int b, int t, int32_t token) {
    const Config& cfg = model.config;
    const int C = cfg.n_embd, L = cfg.n_layer, NH = static_cast<int>(ref.head_writes.size() / (size_t(L) * B * T * C));
    const std::vector<float> wte = to_floats(model.wte);
    const double* x = &ref.residual[((size_t(L - 1) * B + b) * T + t) * C];
    double mean = 0, var = 0;
    for (int c = 0; c < C; ++c) mean += x[c] / C;
    for (int c = 0; c < C; ++c) var += (x[c] - mean) * (x[c] - mean) / C;
    const double sigma = std::sqrt(var + cfg.layer_norm_epsilon);
    // A part c's share: gamma (c - mean c) / sigma . W_U[token] = c . w, w the centred gamma W_U / sigma.
    std::vector<double> w(C);
    double w_mean = 0;
    for (int c = 0; c < C; ++c) w_mean += (w[c] = model.ln_f_w[c] * wte[size_t(token) * C + c] / sigma) / C;
    for (double& wc : w) wc -= w_mean;
    const auto share = [&](const double* part) {
        double sum = 0;
        for (int c = 0; c < C; ++c) sum += part[c] * w[c];
        return sum;
    };
    Attribution a;
    for (int c = 0; c < C; ++c) {
        a.logit += ((x[c] - mean) / sigma * model.ln_f_w[c] + model.ln_f_b[c]) * wte[size_t(token) * C + c];
        a.shift += double(model.ln_f_b[c]) * wte[size_t(token) * C + c];
    }
    a.embedding = share(&ref.embedding[(size_t(b) * T + t) * C]);
    for (int l = 0; l < L; ++l) {
        std::vector<double> bias(model.layers[l].attn_proj_b, model.layers[l].attn_proj_b + C);
        a.bias.push_back(share(bias.data()));
        a.mlp.push_back(share(&ref.mlp_writes[((size_t(l) * B + b) * T + t) * C]));
        a.heads.emplace_back();
        for (int h = 0; h < NH; ++h)
            a.heads.back().push_back(share(&ref.head_writes[(((size_t(l) * B + b) * NH + h) * T + t) * C]));
    }
    return a;
}

std::vector<double> reference_logits(const Model& model, const std::vector<double>& rows) {
    const int C = model.config.n_embd, V = model.config.vocab_size;
    const size_t N = rows.size() / C;
    Matrix x = zeros(static_cast<int>(N), C);
    for (size_t n = 0; n < N; ++n) std::copy_n(&rows[n * C], C, x[n].begin());
    x = norm(x, model.ln_f_w, model.ln_f_b, model.config.layer_norm_epsilon);
    // Logit (n, v) = sum over c of x[n][c] wte[v][c], summed in c's order;
    // the rows go innermost, so that one pass over wte serves them all.
    const std::vector<float> wte = to_floats(model.wte);  // (V, C)
    std::vector<double> x_t(C * N);                       // (C, N)
    for (size_t n = 0; n < N; ++n)
        for (int c = 0; c < C; ++c) x_t[c * N + n] = x[n][c];
    std::vector<double> logits(N * V), sums(N);
    for (int v = 0; v < V; ++v) {
        std::fill(sums.begin(), sums.end(), 0.0);
        for (int c = 0; c < C; ++c) {
            const double w = wte[size_t(v) * C + c];
            for (size_t n = 0; n < N; ++n) sums[n] += x_t[c * N + n] * w;
        }
        for (size_t n = 0; n < N; ++n) logits[n * V + v] = sums[n];
    }
    return logits;
}

}  // namespace headscope::test
