// Head probes from attention weights; see probes.h for the definitions.
#include "headscope/inspect/probes.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "headscope/base/error.h"
#include "headscope/compute/forward.h"
#include "headscope/io/files.h"

namespace headscope {

std::vector<std::vector<int32_t>> validation_windows(const Model& model, size_t max_windows) {
    std::filesystem::path path = model.path / "validation.txt";
    if (path_kind(path) == PathKind::missing) path = resolve_model_path(builtin_model) / "validation.txt";
    const size_t window = std::min(128, model.config.n_positions);
    // As far as the windows need: a token takes at most max_token_bytes of
    // text (a generous bound: a short read only gives fewer windows). A read
    // cut short ends after its last ASCII byte, so that no UTF-8 sequence is split.
    constexpr size_t max_token_bytes = 64;
    const size_t wanted = max_windows * window * max_token_bytes;
    std::string text = read_file_start(path, wanted, "the validation text");
    if (text.size() == wanted)
        while (!text.empty() && static_cast<unsigned char>(text.back()) >= 0x80) text.pop_back();
    const std::vector<int32_t> stream = model.tokenizer.encode(text);
    std::vector<std::vector<int32_t>> windows;
    for (size_t start = 0; start + window <= stream.size() && windows.size() < max_windows; start += window)
        windows.emplace_back(stream.begin() + start, stream.begin() + start + window);
    if (windows.empty()) throw Error(path.string() + ": too short to score heads");
    return windows;
}

double row_entropy(const float* row, int n) {
    double entropy = 0;
    for (int j = 0; j < n; ++j)
        if (row[j] > 0) entropy -= row[j] * std::log(static_cast<double>(row[j]));
    return entropy;
}

ProbeReport probe_heads(Backend& backend, const Model& model, const std::vector<std::vector<int32_t>>& texts,
                        int induction_runs, uint64_t seed, const Progress& progress) {
    if (model.config.is_encoder_decoder())
        throw Error(
            "head probes score a decoder's or an encoder's self-attention; an encoder-decoder's heads are not "
            "scored");
    const int L = model.config.n_layer, NH = model.config.n_head;
    ProbeReport report;
    report.n_layer = L;
    report.n_head = NH;
    report.heads.assign(static_cast<size_t>(L) * NH, {});
    AttentionResult result;
    // The model's own computation: its mask, heads and sliding window, sqrt(d_head), all layers.
    AttentionOptions options;
    options.causal = model.config.causal;
    options.sliding_window = sliding_window(model.config, true);
    const int64_t forwards = static_cast<int64_t>(texts.size()) + induction_runs;
    int64_t done = 0;
    report_progress(progress, "scoring heads", done, forwards, ProgressUnit::steps);
    auto forward = [&](const std::vector<int32_t>& ids) {
        backend.forward(Batch{{ids}, model.config.pad_id()}, options, result);
        report.computed_on = together(report.computed_on, result.computed_on);
        report_progress(progress, "scoring heads", ++done, forwards, ProgressUnit::steps);
    };

    // One text at a time: padding would only add masked rows.
    for (const std::vector<int32_t>& ids : texts) {
        forward(ids);
        const int T = result.T;
        for (int l = 0; l < L; ++l)
            for (int h = 0; h < NH; ++h) {
                const float* w = result.map(l, 0, h);
                HeadScores& s = report.heads[static_cast<size_t>(l) * NH + h];
                for (int i = 1; i < T; ++i) {
                    const float* row = w + static_cast<size_t>(i) * T;
                    s.previous_token += row[i - 1];
                    s.first_token += row[0];
                    s.current_token += row[i];
                    s.entropy += row_entropy(row, T);  // every key: a decoder's past ones, an encoder's all
                }
            }
        report.rows += static_cast<size_t>(T - 1);
    }
    for (HeadScores& s : report.heads) {
        const double n = std::max<size_t>(report.rows, 1);
        s.previous_token /= n;
        s.first_token /= n;
        s.current_token /= n;
        s.entropy /= n;
    }

    // Query i = R + k holds the same token as k; the induction target is k + 1.
    const int R = std::min(64, model.config.n_positions / 2), V = model.config.vocab_size;
    bool some_token_is_not_eos = false;  // so that the draws below end
    for (int id = 0; id < V && !some_token_is_not_eos; ++id) some_token_is_not_eos = !model.config.is_eos(id);
    if (induction_runs > 0 && (!some_token_is_not_eos || R < 2))
        throw Error(
            "the induction probe needs random texts of two tokens or more, repeated, of tokens other than "
            "EOS: this model has " +
            std::to_string(V) + " tokens and a context of " + std::to_string(model.config.n_positions));
    std::mt19937_64 rng(seed);
    for (int run = 0; run < induction_runs; ++run) {
        std::vector<int32_t> ids(2 * R);
        for (int k = 0; k < R; ++k) {
            int32_t id;  // any token but an end-of-sequence one
            do id = static_cast<int32_t>(rng() % V);
            while (model.config.is_eos(id));
            ids[k] = ids[R + k] = id;
        }
        forward(ids);
        for (int l = 0; l < L; ++l)
            for (int h = 0; h < NH; ++h) {
                const float* w = result.map(l, 0, h);
                double sum = 0;
                for (int k = 0; k + 1 < R; ++k) sum += w[static_cast<size_t>(R + k) * 2 * R + k + 1];
                report.heads[static_cast<size_t>(l) * NH + h].induction += sum / (R - 1) / induction_runs;
            }
    }
    return report;
}

ProbeReport probe_validation(const Model& model, size_t max_windows, const Progress& progress) {
    const std::unique_ptr<Backend> backend = make_cpu_backend();
    backend->load_weights(model);
    return probe_heads(*backend, model, validation_windows(model, max_windows), 8, 42, progress);
}

}  // namespace headscope
