// gpt-oss-20b-shaped benchmarks (part of bench-engine): a random checkpoint
// of its widths, experts (MXFP4) and vocabulary, with HEADSCOPE_MOE_LAYERS of
// its 24 layers (default 4; all 24 make a 13.8 GB file), written once into
// HEADSCOPE_BENCH_DIR when set (kept), else into a temporary folder. Timed:
// the open, with its peak resident memory against the file; a 128-token
// forward with every map; generated tokens after it (the prefix reused, the
// maps' new rows only) against the floor of reading a token's active weights once.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <random>

#include "bench_checkpoints.h"
#include "bench_support.h"
#include "headscope/compute/backend.h"
#include "headscope/compute/forward.h"
#include "headscope/compute/prefix_cache.h"
#include "model_writer.h"

namespace headscope::test {

namespace {

namespace fs = std::filesystem;

// The checkpoint's folder, written on first use.
fs::path gpt_oss_dir() {
    static TempDir temporary;
    const char* kept = std::getenv("HEADSCOPE_BENCH_DIR");
    const char* layers = std::getenv("HEADSCOPE_MOE_LAYERS");
    const int L = layers ? std::atoi(layers) : 4;
    const fs::path dir = (kept ? fs::path(kept) : temporary.path) / ("gpt-oss-20b-" + std::to_string(L) + "-layers");
    if (!fs::exists(dir)) {  // written aside and renamed, so that an interrupted write is not reused
        const fs::path partial = dir.string() + ".partial";
        fs::remove_all(partial);
        write_random_checkpoint(partial, gpt_oss_20b_config(L));
        fs::rename(partial, dir);
    }
    return dir;
}

// The peak resident set since the last reset (VmHWM), and its reset.
double peak_resident_mib() {
    std::ifstream status("/proc/self/status");
    for (std::string line; std::getline(status, line);)
        if (line.starts_with("VmHWM:")) return std::stod(line.substr(6)) / 1024.0;
    return 0;
}
void reset_peak_resident() { std::ofstream("/proc/self/clear_refs") << "5"; }

const Model& gpt_oss() {
    static const Model model = load_model(gpt_oss_dir().string());
    return model;
}

// Bytes a generated token reads: every layer's attention, router and 4 of
// its 32 experts, one embedding row and the whole output head.
double active_bytes(const Model& m) {
    const Config& c = m.config;
    double total = 0;
    for (const TensorInfo& t : m.tensors) {
        const double bytes = static_cast<double>(t.bytes);
        if (t.name.find(".mlp.experts.") != std::string::npos)
            total += bytes * c.experts_per_token / c.n_experts;
        else if (t.name.find("embed_tokens") != std::string::npos)
            total += bytes / c.vocab_size;
        else
            total += bytes;
    }
    return total;
}

// The open, alone in the process's memory when run first (--benchmark_filter).
void BM_gpt_oss_open(benchmark::State& state) {
    const fs::path dir = gpt_oss_dir();
    for (auto _ : state) {
        const double before = resident_mib();
        reset_peak_resident();
        const auto start = std::chrono::steady_clock::now();
        const Model model = load_model(dir.string());
        state.counters["open_s"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        const double file_mib = static_cast<double>(model.file_bytes) / 1048576.0;
        state.counters["file_MiB"] = file_mib;
        state.counters["peak_resident_MiB"] = peak_resident_mib() - before;
        state.counters["peak_over_file"] = (peak_resident_mib() - before) / file_mib;
        state.counters["resident_over_file"] = (resident_mib() - before) / file_mib;
    }
}
BENCHMARK(BM_gpt_oss_open)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(1);

// A 128-token forward with every layer's maps (it stops at the last one's, before the output head).
void BM_gpt_oss_forward(benchmark::State& state) {
    const Model& model = gpt_oss();
    auto backend = make_cpu_backend();
    backend->load_weights(model);
    std::mt19937 rng(7);
    const Batch batch{{random_ids(128, model.config.vocab_size, rng)}, model.config.pad_id()};
    AttentionResult result;
    backend->forward(batch, {}, result);  // warm-up: buffers sized once, pages mapped
    for (auto _ : state) {
        backend->forward(batch, {}, result);
        benchmark::DoNotOptimize(result.weights.data());
    }
    state.counters["layers"] = model.config.n_layer;
    state.counters["maps_MiB"] = result.weights.size() * sizeof(float) / 1048576.0;
    state.counters["resident_MiB"] = resident_mib();
}
BENCHMARK(BM_gpt_oss_forward)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(3);

// Generated tokens after a 128-token prompt, one a step: each a forward of
// its new row through every layer, the prefix reused, every map's new row
// and the top 10, against the floor of reading its active weights once.
void BM_gpt_oss_token(benchmark::State& state) {
    const Model& model = gpt_oss();
    auto backend = make_cpu_backend();
    backend->load_weights(model);
    std::mt19937 rng(11);
    std::vector<int32_t> ids = random_ids(128, model.config.vocab_size, rng);
    AttentionOptions options;
    options.top_k = 10;
    options.new_rows_only = true;
    AttentionResult result;
    PrefixCache cache;
    backend->forward(Batch{{ids}, model.config.pad_id()}, options, result, &cache);
    for (auto _ : state) {
        ids.push_back(result.predictions_at(0, static_cast<int>(ids.size()) - 1)[0].id);
        backend->forward(Batch{{ids}, model.config.pad_id()}, options, result, &cache);
        benchmark::DoNotOptimize(result.predictions.data());
    }
    state.counters["rows_computed"] = static_cast<double>(ids.size()) - result.reused[0];
    state.counters["active_MiB"] = active_bytes(model) / 1048576.0;
    report_floor(state, active_bytes(model), 1);
}
BENCHMARK(BM_gpt_oss_token)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(8);

}  // namespace

}  // namespace headscope::test
