// Test support: the families' logits in double precision (family_reference.h's
// family_logits): the final norm and the output embedding, written from
// Hugging Face's modeling code, independently of the engine.
#include <string>

#include "family_reference.h"

namespace headscope::test {

std::vector<double> family_logits(const FamilyCheckpoint& model, const std::vector<double>& rows) {
    const FamilySpec& s = model.spec;
    const int C = s.n_embd, V = s.vocab_size;
    const size_t N = rows.size() / C;
    std::vector<std::vector<double>> x(N, std::vector<double>(C));
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
