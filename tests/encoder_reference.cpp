// Test support: the encoders' double-precision forward; see encoder_reference.h.
#include "encoder_reference.h"

#include "family_reference.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace headscope::test {

namespace {

using Rows = std::vector<std::vector<double>>;  // (T, width)

// Tensor names as BERT calls them, in each family's words.
struct Names {
    std::string layer, query, key, value, out, attention_norm, up, down, output_norm, head, head_norm, bias;
};

Names names_of(Encoder family) {
    if (family == Encoder::distilbert)
        return {"transformer.layer.", "attention.q_lin", "attention.k_lin",  "attention.v_lin",
                "attention.out_lin",  "sa_layer_norm",   "ffn.lin1",         "ffn.lin2",
                "output_layer_norm",  "vocab_transform", "vocab_layer_norm", "vocab_projector.bias"};
    const bool bert = family == Encoder::bert;
    return {"encoder.layer.",
            "attention.self.query",
            "attention.self.key",
            "attention.self.value",
            "attention.output.dense",
            "attention.output.LayerNorm",
            "intermediate.dense",
            "output.dense",
            "output.LayerNorm",
            bert ? "cls.predictions.transform.dense" : "lm_head.dense",
            bert ? "cls.predictions.transform.LayerNorm" : "lm_head.layer_norm",
            bert ? "cls.predictions.bias" : "lm_head.bias"};
}

// y = x W^T + b for a Linear (out, in) W.
Rows linear(const Rows& x, const std::vector<float>& w, const std::vector<float>& b) {
    const size_t out = b.size(), in = x.front().size();
    Rows y(x.size(), std::vector<double>(out));
    for (size_t t = 0; t < x.size(); ++t)
        for (size_t o = 0; o < out; ++o) {
            double sum = b[o];
            for (size_t i = 0; i < in; ++i) sum += x[t][i] * w[o * in + i];
            y[t][o] = sum;
        }
    return y;
}

void gelu(Rows& x, bool tanh_form) {
    for (std::vector<double>& row : x)
        for (double& v : row)
            v = tanh_form ? 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)))
                          : 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)));
}

// Each head's softmax(q k^T * scale) over the keys the options allow (and,
// with `window`, only those less than `window` tokens away), then its
// weighted values; layer l's hooks on each head's map and output.
Rows attend(const Rows& q, const Rows& k, const Rows& v, int NH, const AttentionOptions& options, double* maps,
            int window, int l, const FamilyHooks& hooks) {
    const int T = static_cast<int>(q.size()), C = static_cast<int>(q.front().size()), hs = C / NH;
    const double scale = options.scale == Scale::head    ? 1 / std::sqrt(double(hs))
                         : options.scale == Scale::model ? 1 / std::sqrt(double(C))
                                                         : 1;
    Rows y(T, std::vector<double>(C, 0.0));
    for (int h = 0; h < NH; ++h) {
        Rows att(T, std::vector<double>(T, 0.0)), head(T, std::vector<double>(hs, 0.0));
        for (int i = 0; i < T; ++i) {
            const int end = std::min(options.causal ? i + 1 : T, window ? i + window : T);
            const int begin = window ? std::max(0, i - window + 1) : 0;
            std::vector<double>& w = att[i];
            double max = -INFINITY, sum = 0;
            for (int j = begin; j < end; ++j) {
                for (int d = 0; d < hs; ++d) w[j] += q[i][h * hs + d] * k[j][h * hs + d];
                w[j] *= scale;
                max = std::max(max, w[j]);
            }
            for (int j = begin; j < end; ++j) sum += (w[j] = std::exp(w[j] - max));
            for (int j = begin; j < end; ++j) w[j] /= sum;
        }
        if (hooks.pattern) hooks.pattern(l, 0, h, att);
        for (int i = 0; i < T; ++i)
            for (int j = 0; j < T; ++j) {
                maps[(static_cast<size_t>(h) * T + i) * T + j] = att[i][j];
                for (int d = 0; d < hs; ++d) head[i][d] += att[i][j] * v[j][h * hs + d];
            }
        if (hooks.head_output) hooks.head_output(l, 0, h, head);
        for (int i = 0; i < T; ++i)
            for (int d = 0; d < hs; ++d) y[i][h * hs + d] = head[i][d];
    }
    return y;
}

// modeling_modernbert.py's rotate-half RoPE on each head of hs dims at position t, base theta.
void rotate_heads(Rows& x, int hs, double theta) {
    for (size_t t = 0; t < x.size(); ++t)
        for (size_t h = 0; h < x[t].size() / hs; ++h) {
            double* head = x[t].data() + h * hs;
            for (int d = 0; d < hs / 2; ++d) {
                const double angle = t * std::pow(theta, -2.0 * d / hs), a = head[d], b = head[d + hs / 2];
                head[d] = a * std::cos(angle) - b * std::sin(angle);
                head[d + hs / 2] = b * std::cos(angle) + a * std::sin(angle);
            }
        }
}

// The columns [first, first + count) of x.
Rows columns(const Rows& x, size_t first, size_t count) {
    Rows out;
    for (const std::vector<double>& row : x) out.emplace_back(row.begin() + first, row.begin() + first + count);
    return out;
}

void add(Rows& x, const Rows& y) {
    for (size_t t = 0; t < x.size(); ++t)
        for (size_t c = 0; c < x[t].size(); ++c) x[t][c] += y[t][c];
}

// The masked-LM logits (T, V) of the head's output h: the tied word embeddings and the bias.
std::vector<double> logits_of(const Rows& h, const std::vector<float>& wte, const std::vector<float>& bias) {
    const size_t V = bias.size(), C = h.front().size();
    std::vector<double> logits(h.size() * V);
    for (size_t t = 0; t < h.size(); ++t)
        for (size_t id = 0; id < V; ++id) {
            double sum = bias[id];
            for (size_t c = 0; c < C; ++c) sum += h[t][c] * wte[id * C + c];
            logits[t * V + id] = sum;
        }
    return logits;
}

// ModernBERT: pre-norm (none before layer 0's attention), RoPE with the
// global base on every global_every-th layer and the local one on the others,
// which see only keys within local_attention / 2 (when options.sliding_window
// is on), GeGLU, the final norm, then the head. No norm has a bias.
EncoderReference modernbert_reference(const EncoderCheckpoint& m, const std::vector<int32_t>& ids,
                                      const AttentionOptions& options, const FamilyHooks& hooks) {
    const EncoderSpec& s = m.spec;
    const int T = static_cast<int>(ids.size()), C = s.n_embd, F = s.mlp_dim;
    const int NH = options.n_head ? options.n_head : s.n_head, hs = C / NH;
    const std::vector<float> zeros_C(C, 0.f);
    const auto norm = [&](const Rows& x, const std::string& name) {
        return layer_norm(x, m[name], zeros_C, s.norm_eps);
    };
    EncoderReference out{T, NH, std::vector<double>(static_cast<size_t>(s.n_layer) * NH * T * T, 0.0), {}};
    Rows x(T, std::vector<double>(C));
    for (int t = 0; t < T; ++t)
        for (int c = 0; c < C; ++c) x[t][c] = m["model.embeddings.tok_embeddings.weight"][size_t(ids[t]) * C + c];
    x = norm(x, "model.embeddings.norm.weight");
    for (int l = 0; l < s.n_layer; ++l) {
        const std::string p = "model.layers." + std::to_string(l) + ".";
        const bool global = l % s.global_every == 0;
        if (hooks.layer_input) hooks.layer_input(l, 0, x);
        const Rows in = l == 0 ? x : norm(x, p + "attn_norm.weight");
        const Rows qkv = linear(in, m[p + "attn.Wqkv.weight"], std::vector<float>(3 * C, 0.f));
        Rows q = columns(qkv, 0, C), k = columns(qkv, C, C);
        rotate_heads(q, hs, global ? s.global_rope_theta : s.local_rope_theta);
        rotate_heads(k, hs, global ? s.global_rope_theta : s.local_rope_theta);
        const int window = !global && options.sliding_window ? s.local_attention / 2 + 1 : 0;
        const Rows y = attend(q, k, columns(qkv, 2 * C, C), NH, options,
                              out.weights.data() + static_cast<size_t>(l) * NH * T * T, window, l, hooks);
        add(x, linear(y, m[p + "attn.Wo.weight"], zeros_C));
        const Rows wi = linear(norm(x, p + "mlp_norm.weight"), m[p + "mlp.Wi.weight"], std::vector<float>(2 * F, 0.f));
        Rows gate = columns(wi, 0, F);
        const Rows up = columns(wi, F, F);
        gelu(gate, false);
        for (int t = 0; t < T; ++t)
            for (int f = 0; f < F; ++f) gate[t][f] *= up[t][f];
        Rows mlp = linear(gate, m[p + "mlp.Wo.weight"], zeros_C);
        if (hooks.mlp_output) hooks.mlp_output(l, 0, mlp);
        add(x, mlp);
    }
    Rows h = linear(norm(x, "model.final_norm.weight"), m["head.dense.weight"], zeros_C);
    gelu(h, false);
    out.logits = logits_of(norm(h, "head.norm.weight"), m["model.embeddings.tok_embeddings.weight"], m["decoder.bias"]);
    return out;
}

}  // namespace

EncoderReference encoder_reference(const EncoderCheckpoint& m, const std::vector<int32_t>& ids,
                                   const std::vector<int32_t>& types, const AttentionOptions& options,
                                   const FamilyHooks& hooks) {
    if (m.spec.family == Encoder::modernbert) return modernbert_reference(m, ids, options, hooks);
    const EncoderSpec& s = m.spec;
    const Names n = names_of(s.family);
    const int T = static_cast<int>(ids.size()), C = s.n_embd;
    const int NH = options.n_head ? options.n_head : s.n_head;
    const int offset = s.family == Encoder::roberta ? s.pad_id + 1 : 0;
    const bool tanh_gelu = s.activation == "gelu_new";
    EncoderReference out{T, NH, std::vector<double>(static_cast<size_t>(s.n_layer) * NH * T * T, 0.0), {}};

    Rows x(T, std::vector<double>(C));
    for (int t = 0; t < T; ++t)
        for (int c = 0; c < C; ++c) {
            x[t][c] = m["embeddings.word_embeddings.weight"][static_cast<size_t>(ids[t]) * C + c] +
                      m["embeddings.position_embeddings.weight"][static_cast<size_t>(t + offset) * C + c];
            if (s.type_vocab_size)
                x[t][c] += m["embeddings.token_type_embeddings.weight"]
                            [static_cast<size_t>(types.empty() ? 0 : types[t]) * C + c];
        }
    x = layer_norm(x, m["embeddings.LayerNorm.weight"], m["embeddings.LayerNorm.bias"], s.norm_eps);

    for (int l = 0; l < s.n_layer; ++l) {
        const std::string p = n.layer + std::to_string(l) + ".";
        const auto lin = [&](const Rows& in, const std::string& name) {
            return linear(in, m[p + name + ".weight"], m[p + name + ".bias"]);
        };
        if (hooks.layer_input) hooks.layer_input(l, 0, x);
        const Rows y = attend(lin(x, n.query), lin(x, n.key), lin(x, n.value), NH, options,
                              out.weights.data() + static_cast<size_t>(l) * NH * T * T, 0, l, hooks);
        add(x, lin(y, n.out));
        x = layer_norm(x, m[p + n.attention_norm + ".weight"], m[p + n.attention_norm + ".bias"], s.norm_eps);
        Rows hidden = lin(x, n.up);
        gelu(hidden, tanh_gelu);
        Rows mlp = lin(hidden, n.down);
        if (hooks.mlp_output) hooks.mlp_output(l, 0, mlp);
        add(x, mlp);
        x = layer_norm(x, m[p + n.output_norm + ".weight"], m[p + n.output_norm + ".bias"], s.norm_eps);
    }

    Rows h = linear(x, m[n.head + ".weight"], m[n.head + ".bias"]);
    gelu(h, tanh_gelu);
    h = layer_norm(h, m[n.head_norm + ".weight"], m[n.head_norm + ".bias"], s.norm_eps);
    out.logits = logits_of(h, m["embeddings.word_embeddings.weight"], m[n.bias]);
    return out;
}

}  // namespace headscope::test
