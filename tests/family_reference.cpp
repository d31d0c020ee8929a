// Test support: the families' double-precision reference; see family_reference.h.
#include "family_reference.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <string>

namespace headscope::test {

namespace {

using Rows = std::vector<std::vector<double>>;  // [row][column]

Rows zeros(int rows, int cols) { return Rows(rows, std::vector<double>(cols, 0.0)); }

// Hugging Face's Linear: y = x W^T + b, W stored (out, in); b may be null.
Rows linear(const Rows& x, const std::vector<float>& w, const std::vector<float>* b, int in, int out) {
    Rows y = zeros(static_cast<int>(x.size()), out);
    for (size_t t = 0; t < x.size(); ++t)
        for (int o = 0; o < out; ++o) {
            double sum = b ? (*b)[o] : 0.0;
            for (int i = 0; i < in; ++i) sum += x[t][i] * w[static_cast<size_t>(o) * in + i];
            y[t][o] = sum;
        }
    return y;
}

// GPT-2's Conv1D: y = x W + b, W stored (in, out).
Rows conv1d(const Rows& x, const std::vector<float>& w, const std::vector<float>& b, int in, int out) {
    Rows y = zeros(static_cast<int>(x.size()), out);
    for (size_t t = 0; t < x.size(); ++t)
        for (int o = 0; o < out; ++o) {
            double sum = b[o];
            for (int i = 0; i < in; ++i) sum += x[t][i] * w[static_cast<size_t>(i) * out + o];
            y[t][o] = sum;
        }
    return y;
}

// RMSNorm of the n values at x: x / sqrt(mean(x^2) + eps) * (offset + w),
// offset + w in float32 (Gemma's offset 1: Gemma2RMSNorm's 1.0 + weight.float()).
void rms_norm(double* x, int n, const std::vector<float>& w, double eps, float offset = 0) {
    double square_sum = 0;
    for (int c = 0; c < n; ++c) square_sum += x[c] * x[c];
    const double inverse = 1 / std::sqrt(square_sum / n + eps);
    for (int c = 0; c < n; ++c) x[c] = x[c] * inverse * double(offset + w[c]);
}

// Gemma's sqrt(C) as transformers makes it: torch.tensor(hidden_size**0.5,
// dtype) in the weights' dtype (the test files' dtype is the model's).
double gemma_embedding_scale(const FamilySpec& s) { return rounded(float(std::sqrt(double(s.n_embd))), s.dtype); }

// A scaled score soft-capped as Gemma 2's eager_attention_forward does: cap tanh(s / cap); no cap at 0.
double soft_capped(double score, double cap) { return cap > 0 ? cap * std::tanh(score / cap) : score; }

// Each row's LayerNorm: (x - mean) / sqrt(var + eps) * w + b.

// Where element d of row r of head `head` lives in a (T, width) buffer.
struct Place {
    int row, col;
};
Place head_place(Split split, int head, int r, int d, int T, int width, int hs) {
    if (split == Split::transpose) return {r, head * hs + d};
    const int flat = (head * T + r) * hs + d;  // (heads, T, hs) read straight off the buffer
    return {flat / width, flat % width};
}

// Head `head`'s (T, hs) rows of a (T, width) buffer, each rotated to its row's
// position (cos and sin times cos_sin_scale, LongRoPE's attention factor).
Rows head_rows(const Rows& buffer, Split split, int head, int hs, const std::vector<float>& inv_freq, bool rotary,
               double cos_sin_scale = 1) {
    const int T = static_cast<int>(buffer.size()), width = static_cast<int>(buffer[0].size());
    Rows rows = zeros(T, hs);
    for (int r = 0; r < T; ++r) {
        for (int d = 0; d < hs; ++d) {
            const Place p = head_place(split, head, r, d, T, width, hs);
            rows[r][d] = buffer[p.row][p.col];
        }
        if (rotary) rotate(inv_freq, r, rows[r].data(), cos_sin_scale);
    }
    return rows;
}

// The full names of one layer's tensors.
struct LayerNames {
    std::string prefix;
    std::string operator()(const std::string& name) const { return prefix + name; }
};

}  // namespace

std::vector<std::vector<double>> layer_norm(std::vector<std::vector<double>> x, const std::vector<float>& w,
                                            const std::vector<float>& b, double eps) {
    for (auto& row : x) {
        double mean = 0, var = 0;
        for (double v : row) mean += v;
        mean /= row.size();
        for (double v : row) var += (v - mean) * (v - mean);
        var /= row.size();
        for (size_t c = 0; c < row.size(); ++c) row[c] = (row[c] - mean) / std::sqrt(var + eps) * w[c] + b[c];
    }
    return x;
}

std::vector<float> rope_inverse_frequencies(const FamilySpec& spec, int hs, int T) {
    int dims = static_cast<int>(hs * spec.rotary_pct);
    dims -= dims % 2;
    std::vector<float> inv_freq(dims / 2);
    // LongRoPE (the newer transformers' choice): the long factors when the
    // forward's length is past original_max_position_embeddings, else the short.
    const std::vector<double>& longrope = T > spec.original_max_positions ? spec.long_factors : spec.short_factors;
    for (int d = 0; d < dims / 2; ++d) {
        const double divisor = longrope.empty() ? 1.0 : longrope.at(d);
        inv_freq[d] = static_cast<float>(1 / (divisor * std::pow(spec.rope_theta, 2.0 * d / dims)));
    }
    if (spec.rope_linear_factor > 0)  // rope_type linear: inv_freq / factor
        for (float& f : inv_freq) f = static_cast<float>(f / spec.rope_linear_factor);
    if (spec.rope_factor > 0) {
        // Llama 3: wavelengths past original / low_freq_factor slow by the
        // factor, those under original / high_freq_factor stay, and those
        // between blend the two.
        const double original = spec.original_max_positions, factor = spec.rope_factor;
        const double low = spec.low_freq_factor, high = spec.high_freq_factor;
        for (float& f : inv_freq) {
            const double wavelength = 2 * std::numbers::pi / f;
            if (wavelength > original / low) {
                f = static_cast<float>(f / factor);
            } else if (wavelength >= original / high) {
                const double smooth = (original / wavelength - low) / (high - low);
                f = static_cast<float>((1 - smooth) * f / factor + smooth * f);
            }
        }
    }
    return inv_freq;
}

double rope_attention_factor(const FamilySpec& spec) {
    if (spec.long_factors.empty()) return 1;
    const double factor = double(spec.max_positions) / spec.original_max_positions;
    return factor <= 1 ? 1 : std::sqrt(1 + std::log(factor) / std::log(double(spec.original_max_positions)));
}

void rotate(const std::vector<float>& inv_freq, int position, double* x, double cos_sin_scale) {
    const size_t half = inv_freq.size();
    for (size_t d = 0; d < half; ++d) {
        const double angle = position * static_cast<double>(inv_freq[d]);
        const double c = std::cos(angle) * cos_sin_scale, s = std::sin(angle) * cos_sin_scale;
        const double x1 = x[d], x2 = x[d + half];
        x[d] = x1 * c - x2 * s;
        x[d + half] = x2 * c + x1 * s;
    }
}

FamilyReference family_reference(const FamilyCheckpoint& model, const std::vector<std::vector<int32_t>>& texts,
                                 const AttentionOptions& opt) {
    const FamilySpec& s = model.spec;
    // GPT-NeoX and GPT-2 have LayerNorms, biases everywhere and Q, K and V fused.
    const bool gpt2 = s.family == Family::gpt2, neox = s.family == Family::gpt_neox || gpt2;
    const bool olmo2 = s.family == Family::olmo2;  // no norm before a sublayer, one on each one's output
    const bool gemma = test::gemma(s.family);      // norms before and after each sublayer, of (1 + w)
    const float offset = gemma ? 1.f : 0.f;
    const std::string model_prefix = s.model_prefix();
    const int C = s.n_embd, F = s.mlp_dim, hs_model = s.head_dim;
    const int width = s.n_head * hs_model, kv_width = s.kv_heads() * hs_model, group = s.n_head / s.kv_heads();
    const int B = static_cast<int>(texts.size());
    int T = 0;
    for (const auto& ids : texts) T = std::max(T, static_cast<int>(ids.size()));
    std::vector<int> layers = opt.layers;
    if (layers.empty())
        for (int l = 0; l < s.n_layer; ++l) layers.push_back(l);

    FamilyReference ref;
    ref.NH = opt.n_head ? opt.n_head : s.n_head;
    ref.NKV = ref.NH / group;
    ref.hs = width / ref.NH;
    const int NH = ref.NH, hs = ref.hs;
    ref.weights.assign(layers.size() * B * NH * T * T, 0.0);
    ref.fully_masked.assign(B * T, 0);
    ref.outputs.assign(layers.size() * B * T * width, 0.0);
    ref.residual.assign(size_t(s.n_layer) * B * T * C, 0.0);
    const double head_scale = gemma ? 1 / std::sqrt(s.query_pre_attn_scalar) : 1 / std::sqrt(double(hs));
    const double scale = opt.scale == Scale::head    ? head_scale
                         : opt.scale == Scale::model ? 1 / std::sqrt(double(C))
                                                     : 1.0;
    const std::vector<float> global_freq = rope_inverse_frequencies(s, hs, T);  // GPT-2's none
    // Gemma 3's sliding layers: rope_local_base_freq, without the rope_scaling.
    FamilySpec local_spec = s;
    local_spec.rope_theta = s.local_rope_theta, local_spec.rope_linear_factor = 0;
    const std::vector<float> local_freq =
        s.local_rope_theta > 0 ? rope_inverse_frequencies(local_spec, hs, T) : global_freq;
    const double cos_sin_scale = rope_attention_factor(s);
    const bool phi3 = s.family == Family::phi3;
    // GPT-NeoX's and GPT-2's LayerNorm, else RMSNorm, each of C values;
    // `which` is the first norm or the second in Hugging Face's names.
    const auto norm = [&](const Rows& x, const LayerNames& name, bool first) {
        if (olmo2) return x;
        const std::string which = gpt2    ? (first ? "ln_1" : "ln_2")
                                  : first ? "input_layernorm"
                                  : gemma ? "pre_feedforward_layernorm"
                                          : "post_attention_layernorm";
        if (neox) return layer_norm(x, model[name(which + ".weight")], model[name(which + ".bias")], s.norm_eps);
        Rows y = x;
        for (auto& row : y) rms_norm(row.data(), C, model[name(which + ".weight")], s.norm_eps, offset);
        return y;
    };
    // OLMo 2's and Gemma's RMSNorm of each row's n values (a sublayer's output, or all of Q or K at once).
    const auto rms_norm_rows = [&](Rows& rows, int n, const std::vector<float>& w) {
        for (auto& row : rows) rms_norm(row.data(), n, w, s.norm_eps, offset);
    };
    // A product with a bias: GPT-2's Conv1D, else Hugging Face's Linear.
    const auto product = [&](const Rows& x, const LayerNames& name, const std::string& which, int in, int out) {
        const std::vector<float>&w = model[name(which + ".weight")], &b = model[name(which + ".bias")];
        return gpt2 ? conv1d(x, w, b, in, out) : linear(x, w, &b, in, out);
    };
    const std::vector<float>& embedding = model[gpt2   ? "wte.weight"
                                                : neox ? "gpt_neox.embed_in.weight"
                                                       : model_prefix + "embed_tokens.weight"];
    const double embedding_scale = gemma ? gemma_embedding_scale(s) : 1;

    for (int b = 0; b < B; ++b) {
        const int length = static_cast<int>(texts[b].size());
        Rows x = zeros(T, C);
        for (int t = 0; t < T; ++t) {
            const size_t id = static_cast<size_t>(t < length ? texts[b][t] : s.pad_id());
            for (int c = 0; c < C; ++c)
                x[t][c] =
                    embedding[id * C + c] * embedding_scale + (gpt2 ? model["wpe.weight"][size_t(t) * C + c] : 0.0);
        }
        for (int l = 0; l < s.n_layer; ++l) {
            const LayerNames name{(gpt2   ? "h."
                                   : neox ? "gpt_neox.layers."
                                          : model_prefix + "layers.") +
                                  std::to_string(l) + "."};
            const std::vector<float>& inv_freq = s.windowed(l) ? local_freq : global_freq;
            const int window = s.windowed(l) || !gemma ? opt.sliding_window : 0;
            const Rows h = norm(x, name, true);
            Rows q = zeros(T, width), k = zeros(T, kv_width), v = zeros(T, kv_width);
            if (neox) {
                // c_attn's outputs are [Q | K | V]; query_key_value's per head [q k v], hs each.
                const Rows qkv = product(h, name, gpt2 ? "attn.c_attn" : "attention.query_key_value", C, 3 * width);
                for (int t = 0; t < T; ++t)
                    for (int head = 0; head < s.n_head; ++head)
                        for (int d = 0; d < hs_model; ++d) {
                            const int at = gpt2 ? head * hs_model + d : head * 3 * hs_model + d;
                            const int apart = gpt2 ? width : hs_model, col = head * hs_model + d;
                            q[t][col] = qkv[t][at];
                            k[t][col] = qkv[t][at + apart];
                            v[t][col] = qkv[t][at + 2 * apart];
                        }
            } else if (phi3) {
                // qkv_proj's outputs are [Q | K | V]: NH * hs, then NKV * hs each.
                const Rows qkv = linear(h, model[name("self_attn.qkv_proj.weight")], nullptr, C, width + 2 * kv_width);
                for (int t = 0; t < T; ++t) {
                    std::copy_n(qkv[t].begin(), width, q[t].begin());
                    std::copy_n(qkv[t].begin() + width, kv_width, k[t].begin());
                    std::copy_n(qkv[t].begin() + width + kv_width, kv_width, v[t].begin());
                }
            } else {
                q = linear(h, model[name("self_attn.q_proj.weight")], model.find(name("self_attn.q_proj.bias")), C,
                           width);
                k = linear(h, model[name("self_attn.k_proj.weight")], model.find(name("self_attn.k_proj.bias")), C,
                           kv_width);
                v = linear(h, model[name("self_attn.v_proj.weight")], model.find(name("self_attn.v_proj.bias")), C,
                           kv_width);
            }
            if (olmo2) {  // the whole projections, before the heads and RoPE
                rms_norm_rows(q, width, model[name("self_attn.q_norm.weight")]);
                rms_norm_rows(k, kv_width, model[name("self_attn.k_norm.weight")]);
            }
            if (s.family == Family::qwen3 || (gemma && s.family != Family::gemma2))  // on the own heads, before RoPE
                for (int t = 0; t < T; ++t) {
                    for (int c = 0; c < width; c += hs_model)
                        rms_norm(&q[t][c], hs_model, model[name("self_attn.q_norm.weight")], s.norm_eps, offset);
                    for (int c = 0; c < kv_width; c += hs_model)
                        rms_norm(&k[t][c], hs_model, model[name("self_attn.k_norm.weight")], s.norm_eps, offset);
                }

            const auto slot = std::find(layers.begin(), layers.end(), l);
            Rows merged = zeros(T, width);
            for (int head = 0; head < NH; ++head) {
                const int kv_head = head / group;  // repeat_kv: each K/V head serves `group` consecutive heads
                const Rows qh = head_rows(q, opt.split, head, hs, inv_freq, true, cos_sin_scale);
                const Rows kh = head_rows(k, opt.split, kv_head, hs, inv_freq, true, cos_sin_scale);
                const Rows vh = head_rows(v, opt.split, kv_head, hs, inv_freq, false);
                Rows att = zeros(T, T);
                for (int i = 0; i < T; ++i) {
                    std::vector<bool> visible(T);
                    bool any = false;
                    for (int j = 0; j < T; ++j) {
                        visible[j] = (!opt.causal || j <= i) && (!opt.padding_mask || (i < length && j < length)) &&
                                     (window <= 0 || j > i - window);
                        any = any || visible[j];
                    }
                    if (!any) {
                        ref.fully_masked[b * T + i] = 1;
                        continue;
                    }
                    double max_score = -INFINITY, sum = 0;
                    for (int j = 0; j < T; ++j) {
                        if (!visible[j]) continue;
                        double dot = 0;
                        for (int d = 0; d < hs; ++d) dot += qh[i][d] * kh[j][d];
                        att[i][j] = soft_capped(dot * scale, s.attn_softcap);  // after the scale, before the mask
                        max_score = std::max(max_score, att[i][j]);
                    }
                    for (int j = 0; j < T; ++j) {
                        att[i][j] = visible[j] ? std::exp(att[i][j] - max_score) : 0.0;
                        sum += att[i][j];
                    }
                    for (int j = 0; j < T; ++j) att[i][j] /= sum;
                }
                if (slot != layers.end())
                    for (int i = 0; i < T; ++i)
                        for (int j = 0; j < T; ++j)
                            ref.weights[((((slot - layers.begin()) * B + b) * NH + head) * T + i) * T + j] = att[i][j];
                Rows y = zeros(T, hs);
                for (int r = 0; r < T; ++r)
                    for (int d = 0; d < hs; ++d)
                        for (int j = 0; j < T; ++j) y[r][d] += att[r][j] * vh[j][d];
                if (std::find(opt.ablate.begin(), opt.ablate.end(), HeadRef{l, head}) != opt.ablate.end()) {
                    // Knocked out: zero, or at every position its mean over the text's real positions.
                    for (int d = 0; d < hs; ++d) {
                        double mean = 0;
                        for (int r = 0; r < length && opt.ablation == Ablation::mean; ++r) mean += y[r][d] / length;
                        for (int r = 0; r < T; ++r) y[r][d] = mean;
                    }
                }
                for (int r = 0; r < T; ++r)
                    for (int d = 0; d < hs; ++d) {
                        const Place p = head_place(opt.split, head, r, d, T, width, hs);
                        merged[p.row][p.col] = y[r][d];
                    }
            }
            if (slot != layers.end())
                for (int t = 0; t < T; ++t)
                    for (int c = 0; c < width; ++c)
                        ref.outputs[(((slot - layers.begin()) * B + b) * T + t) * width + c] = merged[t][c];

            Rows attention, mlp;
            if (neox) {
                attention = product(merged, name, gpt2 ? "attn.c_proj" : "attention.dense", width, C);
                // Parallel: the MLP reads the layer's input; else (GPT-2's) the input plus attention.
                Rows mlp_in = x;
                if (gpt2 || !s.parallel_residual)
                    for (int t = 0; t < T; ++t)
                        for (int c = 0; c < C; ++c) mlp_in[t][c] += attention[t][c];
                Rows hidden = product(norm(mlp_in, name, false), name, gpt2 ? "mlp.c_fc" : "mlp.dense_h_to_4h", C, F);
                for (auto& row : hidden)
                    for (double& u : row)  // GPT-2's tanh GELU (gelu_new), GPT-NeoX's exact one
                        u = gpt2 ? 0.5 * u *
                                       (1 + std::tanh(std::sqrt(2 / std::numbers::pi) * (u + 0.044715 * u * u * u)))
                                 : 0.5 * u * (1 + std::erf(u / std::numbers::sqrt2));
                mlp = product(hidden, name, gpt2 ? "mlp.c_proj" : "mlp.dense_4h_to_h", F, C);
            } else {
                attention = linear(merged, model[name("self_attn.o_proj.weight")],
                                   model.find(name("self_attn.o_proj.bias")), width, C);
                if (olmo2 || gemma) rms_norm_rows(attention, C, model[name("post_attention_layernorm.weight")]);
                Rows mlp_in = x;
                for (int t = 0; t < T; ++t)
                    for (int c = 0; c < C; ++c) mlp_in[t][c] += attention[t][c];
                const Rows h2 = norm(mlp_in, name, false);
                Rows gate = zeros(T, F), up = zeros(T, F);
                if (phi3) {  // gate_up_proj's outputs: gate, then up (chunk(2, dim=-1))
                    const Rows gate_up = linear(h2, model[name("mlp.gate_up_proj.weight")], nullptr, C, 2 * F);
                    for (int t = 0; t < T; ++t) {
                        std::copy_n(gate_up[t].begin(), F, gate[t].begin());
                        std::copy_n(gate_up[t].begin() + F, F, up[t].begin());
                    }
                } else {
                    gate = linear(h2, model[name("mlp.gate_proj.weight")], nullptr, C, F);
                    up = linear(h2, model[name("mlp.up_proj.weight")], nullptr, C, F);
                }
                for (int t = 0; t < T; ++t)
                    for (int f = 0; f < F; ++f) {
                        const double g = gate[t][f];  // Gemma's gelu_pytorch_tanh, the others' SiLU
                        const double tanh_gelu =
                            0.5 * g * (1 + std::tanh(std::sqrt(2 / std::numbers::pi) * (g + 0.044715 * g * g * g)));
                        gate[t][f] = (gemma ? tanh_gelu : g / (1 + std::exp(-g))) * up[t][f];
                    }
                mlp = linear(gate, model[name("mlp.down_proj.weight")], nullptr, F, C);
                if (olmo2 || gemma) rms_norm_rows(mlp, C, model[name("post_feedforward_layernorm.weight")]);
            }
            for (int t = 0; t < T; ++t)
                for (int c = 0; c < C; ++c) {
                    x[t][c] += attention[t][c] + mlp[t][c];
                    ref.residual[((size_t(l) * B + b) * T + t) * C + c] = x[t][c];
                }
        }
    }
    return ref;
}

std::vector<double> family_logits(const FamilyCheckpoint& model, const std::vector<double>& rows) {
    const FamilySpec& s = model.spec;
    const int C = s.n_embd, V = s.vocab_size;
    const size_t N = rows.size() / C;
    Rows x = zeros(static_cast<int>(N), C);
    for (size_t n = 0; n < N; ++n) std::copy_n(&rows[n * C], C, x[n].begin());
    const std::vector<float>* unembedding = nullptr;  // (V, C)
    if (s.family == Family::gpt_neox) {
        x = layer_norm(x, model["gpt_neox.final_layer_norm.weight"], model["gpt_neox.final_layer_norm.bias"],
                       s.norm_eps);
        unembedding = &model["embed_out.weight"];
    } else if (s.family == Family::gpt2) {
        x = layer_norm(x, model["ln_f.weight"], model["ln_f.bias"], s.norm_eps);
        unembedding = &model[s.tied_embeddings ? "wte.weight" : "lm_head.weight"];
    } else {
        const std::string prefix = s.model_prefix();
        for (auto& row : x) rms_norm(row.data(), C, model[prefix + "norm.weight"], s.norm_eps, gemma(s.family) ? 1 : 0);
        unembedding = &model[s.tied_embeddings ? prefix + "embed_tokens.weight" : "lm_head.weight"];
    }
    // Logit (n, v) = sum over c of x[n][c] W[v][c], summed in c's order; the
    // rows go innermost, so that one pass over W serves them all.
    std::vector<double> x_t(C * N);  // (C, N)
    for (size_t n = 0; n < N; ++n)
        for (int c = 0; c < C; ++c) x_t[c * N + n] = x[n][c];
    std::vector<double> logits(N * V), sums(N);
    for (int v = 0; v < V; ++v) {
        std::fill(sums.begin(), sums.end(), 0.0);
        for (int c = 0; c < C; ++c) {
            const double w = (*unembedding)[size_t(v) * C + c];
            for (size_t n = 0; n < N; ++n) sums[n] += x_t[c * N + n] * w;
        }
        for (size_t n = 0; n < N; ++n) logits[n * V + v] = soft_capped(sums[n], s.final_softcap);
    }
    return logits;
}

}  // namespace headscope::test
