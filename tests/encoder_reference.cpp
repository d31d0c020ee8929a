// Test support: the encoders' double-precision forward; see encoder_reference.h.
#include "encoder_reference.h"

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

void layer_norm(Rows& x, const std::vector<float>& w, const std::vector<float>& b, double eps) {
    for (std::vector<double>& row : x) {
        double mean = 0, var = 0;
        for (double v : row) mean += v;
        mean /= row.size();
        for (double v : row) var += (v - mean) * (v - mean);
        var /= row.size();
        for (size_t c = 0; c < row.size(); ++c) row[c] = (row[c] - mean) / std::sqrt(var + eps) * w[c] + b[c];
    }
}

void gelu(Rows& x, bool tanh_form) {
    for (std::vector<double>& row : x)
        for (double& v : row)
            v = tanh_form ? 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)))
                          : 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)));
}

// Each head's softmax(q k^T * scale) over the keys the options allow, then its weighted values.
Rows attend(const Rows& q, const Rows& k, const Rows& v, int NH, const AttentionOptions& options, double* maps) {
    const int T = static_cast<int>(q.size()), C = static_cast<int>(q.front().size()), hs = C / NH;
    const double scale = options.scale == Scale::head    ? 1 / std::sqrt(double(hs))
                         : options.scale == Scale::model ? 1 / std::sqrt(double(C))
                                                         : 1;
    Rows y(T, std::vector<double>(C, 0.0));
    for (int h = 0; h < NH; ++h)
        for (int i = 0; i < T; ++i) {
            const int end = options.causal ? i + 1 : T;
            std::vector<double> w(T, 0.0);
            double max = -INFINITY, sum = 0;
            for (int j = 0; j < end; ++j) {
                for (int d = 0; d < hs; ++d) w[j] += q[i][h * hs + d] * k[j][h * hs + d];
                w[j] *= scale;
                max = std::max(max, w[j]);
            }
            for (int j = 0; j < end; ++j) sum += (w[j] = std::exp(w[j] - max));
            for (int j = 0; j < end; ++j) {
                w[j] /= sum;
                maps[(static_cast<size_t>(h) * T + i) * T + j] = w[j];
                for (int d = 0; d < hs; ++d) y[i][h * hs + d] += w[j] * v[j][h * hs + d];
            }
        }
    return y;
}

void add(Rows& x, const Rows& y) {
    for (size_t t = 0; t < x.size(); ++t)
        for (size_t c = 0; c < x[t].size(); ++c) x[t][c] += y[t][c];
}

}  // namespace

EncoderReference encoder_reference(const EncoderCheckpoint& m, const std::vector<int32_t>& ids,
                                   const std::vector<int32_t>& types, const AttentionOptions& options) {
    const EncoderSpec& s = m.spec;
    const Names n = names_of(s.family);
    const int T = static_cast<int>(ids.size()), C = s.n_embd, V = s.vocab_size;
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
    layer_norm(x, m["embeddings.LayerNorm.weight"], m["embeddings.LayerNorm.bias"], s.norm_eps);

    for (int l = 0; l < s.n_layer; ++l) {
        const std::string p = n.layer + std::to_string(l) + ".";
        const auto lin = [&](const Rows& in, const std::string& name) {
            return linear(in, m[p + name + ".weight"], m[p + name + ".bias"]);
        };
        const Rows y = attend(lin(x, n.query), lin(x, n.key), lin(x, n.value), NH, options,
                              out.weights.data() + static_cast<size_t>(l) * NH * T * T);
        add(x, lin(y, n.out));
        layer_norm(x, m[p + n.attention_norm + ".weight"], m[p + n.attention_norm + ".bias"], s.norm_eps);
        Rows hidden = lin(x, n.up);
        gelu(hidden, tanh_gelu);
        add(x, lin(hidden, n.down));
        layer_norm(x, m[p + n.output_norm + ".weight"], m[p + n.output_norm + ".bias"], s.norm_eps);
    }

    Rows h = linear(x, m[n.head + ".weight"], m[n.head + ".bias"]);
    gelu(h, tanh_gelu);
    layer_norm(h, m[n.head_norm + ".weight"], m[n.head_norm + ".bias"], s.norm_eps);
    const std::vector<float>& wte = m["embeddings.word_embeddings.weight"];
    const std::vector<float>& bias = m[n.bias];
    out.logits.resize(static_cast<size_t>(T) * V);
    for (int t = 0; t < T; ++t)
        for (int id = 0; id < V; ++id) {
            double sum = bias[id];
            for (int c = 0; c < C; ++c) sum += h[t][c] * wte[static_cast<size_t>(id) * C + c];
            out.logits[static_cast<size_t>(t) * V + id] = sum;
        }
    return out;
}

}  // namespace headscope::test
