// The long-text view's maps on demand (app/session/long_maps.h): the time
// from a head switch or a zoom to the cells the view uploads, on one layer of
// Llama-3.2-1B's shape (C 2048, 32 query heads sharing 8 key/value heads of
// 64, F 8192; BF16 random weights, the test vocabulary: a map costs the same
// in each of its 16 layers), after a forward without maps of T random
// tokens, which it also times.
// Usage: bench-long-maps [--tokens T] [--pixels P] [--dir D]   (defaults 2048, 700, build/bench)
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "family_models.h"
#include "family_writer.h"
#include "headscope/base/clock.h"
#include "headscope/base/error.h"
#include "headscope/compute/backend.h"
#include "session/long_maps.h"

using namespace headscope;

namespace {

// The median of `runs` timings of `ask` on `kept`, in ms.
double median_ms(const KeptMaps& kept, const MapAsk& ask, int runs = 5) {
    std::vector<double> ms;
    for (int r = 0; r < runs; ++r) ms.push_back(compute_map(kept, ask).ms);
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App cli{"Maps on demand for a long text, on one layer of Llama-3.2-1B's shape", "bench-long-maps"};
    int T = 2048, pixels = 700;
    std::string dir = "build/bench";
    cli.add_option("--tokens", T, "the text's tokens");
    cli.add_option("--pixels", pixels, "the map's side on screen, in pixels");
    cli.add_option("--dir", dir, "where the checkpoint is written (once)");
    CLI11_PARSE(cli, argc, argv);
    try {
        const std::filesystem::path model_dir = std::filesystem::path(dir) / "llama-1b-shape-1-layer-bf16";
        if (!std::filesystem::exists(model_dir / "config.json")) {
            test::FamilySpec spec = test::family_spec(test::Family::llama);
            spec.n_layer = 1, spec.n_embd = 2048, spec.n_head = 32, spec.n_kv_head = 8, spec.head_dim = 64;
            spec.mlp_dim = 8192, spec.max_positions = 8192, spec.dtype = test::FileDType::BF16;
            test::write_family_model(model_dir, spec);
        }
        auto model = std::make_shared<const Model>(load_model(model_dir.string()));
        auto backend = make_cpu_backend();
        backend->load_weights(*model);
        std::mt19937 random(1);
        std::vector<int32_t> ids(static_cast<size_t>(T));
        for (int32_t& id : ids) id = static_cast<int32_t>(random() % model->tokenizer.vocab_size());
        KeptMaps kept{model, Batch{{ids}, model->config.pad_id()}, long_text_options(AttentionOptions{}), {}};
        const auto start = Clock::now();
        backend->forward(kept.batch, kept.options, kept.result);
        std::printf("T = %d: the forward without maps (queries, keys, summaries): %.0f ms\n", T, ms_since(start));
        const MapRegion whole{0, T, 0, T};
        const int quarter = T / 4, cells = pixels;
        std::printf("a head switch, the whole map pooled to %d px: mean %.0f ms, max %.0f ms\n", pixels,
                    median_ms(kept, {0, 5, 0, whole, pixels, Pooling::mean}),
                    median_ms(kept, {0, 5, 0, whole, pixels, Pooling::max}));
        // Every cell once the region has as many tokens as pixels; pooled before.
        for (const int side : {quarter, cells}) {
            const MapAsk zoom{0, 5, 0, {T - side, T, T - side, T}, pixels, Pooling::mean};
            std::printf("a zoom to the last %d x %d tokens (%s): %.0f ms\n", side, side,
                        side <= pixels ? "every cell" : "pooled", median_ms(kept, zoom));
        }
        std::printf("the row under the mouse over every key: %.2f ms\n",
                    median_ms(kept, {0, 5, 0, {T - 1, T, 0, T}, pixels, Pooling::mean}));
    } catch (const Error& e) {
        std::fprintf(stderr, "bench-long-maps: %s\n", e.what());
        return 1;
    }
}
