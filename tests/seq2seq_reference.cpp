// Test support: the encoder–decoders' double-precision forward; see seq2seq_reference.h.
#include "seq2seq_reference.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace headscope::test {

namespace {

using Rows = std::vector<std::vector<double>>;  // (tokens, width)

// y (rows, out) = x W^T (+ b): W (out, in) as Linear stores it.
Rows linear(const Rows& x, const std::vector<float>& w, const std::vector<float>* b, int out) {
    const size_t in = x.empty() ? 0 : x[0].size();
    Rows y(x.size(), std::vector<double>(out));
    for (size_t r = 0; r < x.size(); ++r)
        for (int o = 0; o < out; ++o) {
            double sum = b ? (*b)[o] : 0.0;
            for (size_t i = 0; i < in; ++i) sum += x[r][i] * w[o * in + i];
            y[r][o] = sum;
        }
    return y;
}

// LayerNorm (the families' shared one), or T5's RMSNorm: no mean, no bias.
Rows norm(const Rows& x, const std::vector<float>& w, const std::vector<float>* b, bool rms, double eps) {
    if (!rms) return layer_norm(x, w, *b, eps);
    Rows y = x;
    for (std::vector<double>& row : y) {
        double squares = 0;
        for (double v : row) squares += v * v / static_cast<double>(row.size());
        for (size_t c = 0; c < row.size(); ++c) row[c] = row[c] / std::sqrt(squares + eps) * w[c];
    }
    return y;
}

void add(Rows& x, const Rows& y) {
    for (size_t r = 0; r < x.size(); ++r)
        for (size_t c = 0; c < x[r].size(); ++c) x[r][c] += y[r][c];
}

double activate(const std::string& act, double v) {
    if (act == "relu") return std::max(v, 0.0);
    if (act == "swish") return v / (1 + std::exp(-v));
    if (act == "gelu") return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)));
    return 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));  // gelu_new, gated-gelu
}

// modeling_t5.py's _relative_position_bucket, in double.
int bucket(int relative, bool bidirectional, int buckets, int max_distance) {
    int out = 0;
    if (bidirectional) {
        buckets /= 2;
        if (relative > 0) out += buckets;
        relative = std::abs(relative);
    } else {
        relative = -std::min(relative, 0);
    }
    const int max_exact = buckets / 2;
    if (relative < max_exact) return out + relative;
    const int large = max_exact + static_cast<int>(std::log(double(relative) / max_exact) /
                                                   std::log(double(max_distance) / max_exact) * (buckets - max_exact));
    return out + std::min(large, buckets - 1);
}

// One attention of layer l: queries from x, keys and values from kv (x
// itself for a self-attention), each head's map (Tq, Tk) and output (Tq, hs)
// through `hooks`, the maps appended to `maps` (NH, Tq, Tk); returns the
// output projection's rows. `rel` T5's position bias table (buckets, NH), if any.
Rows attend(const Seq2SeqCheckpoint& m, const std::string& at, int l, const Rows& x, const Rows& kv, bool causal,
            double scale, const std::vector<float>* rel, bool bidirectional, const FamilyHooks& hooks,
            std::vector<double>& maps) {
    const Seq2SeqSpec& s = m.spec;
    const bool t5 = s.family == Seq2Seq::t5;
    const int NH = s.n_head, hs = t5 ? s.head_dim : s.n_embd / s.n_head, inner = NH * hs;
    const auto proj = [&](const Rows& in, const char* t5_name, const char* bart_name, int out) {
        const std::string name = at + (t5 ? t5_name : bart_name);
        return linear(in, m[name + ".weight"], t5 ? nullptr : &m[name + ".bias"], out);
    };
    const Rows q = proj(x, ".q", ".q_proj", inner), k = proj(kv, ".k", ".k_proj", inner),
               v = proj(kv, ".v", ".v_proj", inner);
    const int Tq = static_cast<int>(x.size()), Tk = static_cast<int>(kv.size());
    Rows y(Tq, std::vector<double>(inner, 0.0));
    for (int h = 0; h < NH; ++h) {
        Rows att(Tq, std::vector<double>(Tk, 0.0)), out(Tq, std::vector<double>(hs, 0.0));
        for (int i = 0; i < Tq; ++i) {
            std::vector<double>& p = att[i];
            double max = -1e300, sum = 0;
            const int end = causal ? i + 1 : Tk;
            for (int j = 0; j < end; ++j) {
                double dot = 0;
                for (int d = 0; d < hs; ++d) dot += q[i][h * hs + d] * k[j][h * hs + d];
                if (rel) dot += (*rel)[bucket(j - i, bidirectional, s.buckets, s.max_distance) * NH + h];
                p[j] = dot * scale;
                max = std::max(max, p[j]);
            }
            for (int j = 0; j < end; ++j) sum += (p[j] = std::exp(p[j] - max));
            for (int j = 0; j < Tk; ++j) p[j] = j < end ? p[j] / sum : 0.0;
        }
        if (hooks.pattern) hooks.pattern(l, 0, h, att);
        for (int i = 0; i < Tq; ++i)
            for (int j = 0; j < Tk; ++j) {
                maps.push_back(att[i][j]);
                for (int d = 0; d < hs; ++d) out[i][d] += att[i][j] * v[j][h * hs + d];
            }
        if (hooks.head_output) hooks.head_output(l, 0, h, out);
        for (int i = 0; i < Tq; ++i)
            for (int d = 0; d < hs; ++d) y[i][h * hs + d] = out[i][d];
    }
    return t5 ? linear(y, m[at + ".o.weight"], nullptr, s.n_embd)
              : linear(y, m[at + ".out_proj.weight"], &m[at + ".out_proj.bias"], s.n_embd);
}

Rows mlp(const Seq2SeqCheckpoint& m, const std::string& at, const Rows& x) {
    const Seq2SeqSpec& s = m.spec;
    if (s.family != Seq2Seq::t5) {
        Rows h = linear(x, m[at + "fc1.weight"], &m[at + "fc1.bias"], s.mlp_dim);
        for (auto& row : h)
            for (double& v : row) v = activate(s.activation, v);
        return linear(h, m[at + "fc2.weight"], &m[at + "fc2.bias"], s.n_embd);
    }
    Rows h;
    if (s.activation == "relu") {
        h = linear(x, m[at + "DenseReluDense.wi.weight"], nullptr, s.mlp_dim);
        for (auto& row : h)
            for (double& v : row) v = activate("relu", v);
    } else {
        h = linear(x, m[at + "DenseReluDense.wi_0.weight"], nullptr, s.mlp_dim);
        const Rows up = linear(x, m[at + "DenseReluDense.wi_1.weight"], nullptr, s.mlp_dim);
        for (size_t r = 0; r < h.size(); ++r)
            for (int f = 0; f < s.mlp_dim; ++f) h[r][f] = activate("gelu_new", h[r][f]) * up[r][f];
    }
    return linear(h, m[at + "DenseReluDense.wo.weight"], nullptr, s.n_embd);
}

Rows embed(const Seq2SeqCheckpoint& m, const std::string& stack, const std::vector<int32_t>& ids) {
    const Seq2SeqSpec& s = m.spec;
    const int C = s.n_embd;
    const std::vector<float>& table = m["shared.weight"];
    const double scale = s.scale_embedding ? std::sqrt(double(C)) : 1.0;
    Rows x(ids.size(), std::vector<double>(C));
    for (size_t t = 0; t < ids.size(); ++t)
        for (int c = 0; c < C; ++c) {
            x[t][c] = table[ids[t] * C + c] * scale;
            if (s.family == Seq2Seq::bart) x[t][c] += m[stack + ".embed_positions.weight"][(t + 2) * C + c];
            if (s.family == Seq2Seq::marian) {  // modeling_marian's table: sin in the first half, cos in the second
                const int pair = c < C / 2 ? c : c - C / 2;
                const double angle = double(t) / std::pow(10000.0, 2.0 * pair / C);
                x[t][c] += static_cast<float>(c < C / 2 ? std::sin(angle) : std::cos(angle));
            }
        }
    if (s.family == Seq2Seq::bart)
        x = norm(x, m[stack + ".layernorm_embedding.weight"], &m[stack + ".layernorm_embedding.bias"], false, 1e-5);
    return x;
}

// A whole stack: the encoder's output (memory empty) or the decoder's; `own`
// its hooks, `cross` the decoder's cross-attention's.
Rows run_stack(const Seq2SeqCheckpoint& m, const std::vector<int32_t>& ids, const Rows* memory,
               const AttentionOptions& options, const FamilyHooks& own, const FamilyHooks& cross,
               std::vector<double>& self_maps, std::vector<double>* cross_maps) {
    const Seq2SeqSpec& s = m.spec;
    const bool t5 = s.family == Seq2Seq::t5, decoder = memory != nullptr;
    const std::string stack = decoder ? "decoder" : "encoder";
    const int C = s.n_embd, hs = t5 ? s.head_dim : C / s.n_head;
    const double scale = options.scale == Scale::head    ? 1 / std::sqrt(double(hs))
                         : options.scale == Scale::model ? 1 / std::sqrt(double(C))
                                                         : 1.0;
    const double eps = t5 ? 1e-6 : 1e-5;
    const bool causal = decoder && options.causal;
    Rows x = embed(m, stack, ids);
    const std::vector<float>* rel =
        t5 ? &m[stack + ".block.0.layer.0.SelfAttention.relative_attention_bias.weight"] : nullptr;
    const auto ln = [&](const Rows& in, const std::string& name) {
        return norm(in, m[name + ".weight"], t5 ? nullptr : &m[name + ".bias"], t5, eps);
    };
    const auto mlp_out = [&](int l, const std::string& at, const Rows& in) {
        Rows out = mlp(m, at, in);
        if (own.mlp_output) own.mlp_output(l, 0, out);
        return out;
    };
    for (int l = 0; l < (decoder ? s.decoder_layers : s.encoder_layers); ++l) {
        if (own.layer_input) own.layer_input(l, 0, x);
        if (t5) {
            const std::string at = stack + ".block." + std::to_string(l) + ".layer.";
            add(x, attend(m, at + "0.SelfAttention", l, ln(x, at + "0.layer_norm"), ln(x, at + "0.layer_norm"), causal,
                          scale, rel, !decoder, own, self_maps));
            if (decoder) {
                const Rows n = ln(x, at + "1.layer_norm");
                add(x, attend(m, at + "1.EncDecAttention", l, n, *memory, false, scale, nullptr, false, cross,
                              *cross_maps));
            }
            const std::string ff = at + (decoder ? "2." : "1.");
            add(x, mlp_out(l, ff, ln(x, ff + "layer_norm")));
            continue;
        }
        const std::string at = stack + ".layers." + std::to_string(l) + ".";
        add(x, attend(m, at + "self_attn", l, x, x, causal, scale, nullptr, false, own, self_maps));
        x = ln(x, at + "self_attn_layer_norm");
        if (decoder) {
            add(x, attend(m, at + "encoder_attn", l, x, *memory, false, scale, nullptr, false, cross, *cross_maps));
            x = ln(x, at + "encoder_attn_layer_norm");
        }
        add(x, mlp_out(l, at, x));
        x = ln(x, at + "final_layer_norm");
    }
    return t5 ? ln(x, stack + ".final_layer_norm") : x;
}

}  // namespace

Seq2SeqReference seq2seq_reference(const Seq2SeqCheckpoint& m, const std::vector<int32_t>& source,
                                   const std::vector<int32_t>& target, const AttentionOptions& options,
                                   const Seq2SeqHooks& hooks) {
    const Seq2SeqSpec& s = m.spec;
    Seq2SeqReference out;
    out.S = static_cast<int>(source.size()), out.T = static_cast<int>(target.size());
    out.NH = s.n_head, out.V = s.vocab_size;
    const Rows memory = run_stack(m, source, nullptr, options, hooks.encoder, {}, out.encoder, nullptr);
    Rows y = run_stack(m, target, &memory, options, hooks.decoder, hooks.cross, out.decoder, &out.cross);
    const bool t5 = s.family == Seq2Seq::t5;
    const double output_scale = t5 && s.tied ? 1 / std::sqrt(double(s.n_embd)) : 1.0;
    for (auto& row : y)
        for (double& v : row) v *= output_scale;
    const std::vector<float>& head = t5 && !s.tied ? m["lm_head.weight"] : m["shared.weight"];
    const Rows logits = linear(y, head, t5 ? nullptr : &m["final_logits_bias"], s.vocab_size);
    for (const auto& row : logits) out.logits.insert(out.logits.end(), row.begin(), row.end());
    return out;
}

}  // namespace headscope::test
