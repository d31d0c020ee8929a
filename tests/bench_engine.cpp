// Engine benchmarks: the forward with attention capture on a GPT-2-small-shaped
// model (L=12, NH=12, C=768, V=50257, random weights), B=1, with median ms,
// GFLOP/s and the fraction of this machine's FMA peak (measured here by an FMA
// loop); the largest matrix product alone; and GPT-2 tokenization of English.
// Run: build/tests/bench-engine --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>
#include <sys/resource.h>

#include <Eigen/Core>
#include <cstdio>
#include <random>

#include "fma_peak.h"
#include "headscope/backend.h"
#include "headscope/files.h"
#include "model_writer.h"

using namespace headscope;

namespace {

constexpr int L = 12, C = 768;

const Model& gpt2_small() {
    static test::TempDir dir;
    static const Model model = [] {
        test::write_test_model(dir.path, {.n_layer = L, .n_head = 12, .n_embd = C, .n_positions = 1024});
        return load_model(dir.path.string());
    }();
    return model;
}

double peak_rss_mib() {
    rusage usage{};
    getrusage(RUSAGE_SELF, &usage);
    return usage.ru_maxrss / 1024.0;
}

void report(benchmark::State& state, double flops) {
    state.counters["GFLOP/s"] = benchmark::Counter(flops, benchmark::Counter::kIsIterationInvariantRate);
    state.counters["peak_fraction"] =
        benchmark::Counter(flops / 1e9 / test::fma_peak_gflops(), benchmark::Counter::kIsIterationInvariantRate);
    state.counters["peak_rss_MiB"] = peak_rss_mib();
    state.counters["fma_peak_GFLOP/s"] = test::fma_peak_gflops();
}

// Args: T, number of layers returned (all = 12; 1 = layer 0 only).
void BM_forward(benchmark::State& state) {
    const int T = static_cast<int>(state.range(0)), returned = static_cast<int>(state.range(1));
    const Model& model = gpt2_small();
    auto backend = make_cpu_backend();
    backend->load_weights(model);
    std::mt19937 rng(7);
    std::vector<int32_t> ids(T);
    for (auto& id : ids) id = static_cast<int32_t>(rng() % model.config.vocab_size);
    AttentionOptions options;
    if (returned < L)
        for (int l = 0; l < returned; ++l) options.layers.push_back(l);
    AttentionResult result;
    const Batch batch{{ids}, model.config.eos_token_id};
    backend->forward(batch, options, result);  // warm-up: buffers sized once
    for (auto _ : state) {
        backend->forward(batch, options, result);
        benchmark::DoNotOptimize(result.weights.data());
    }
    // The count is 24*T*C^2 + 4*T^2*C per layer. The engine stops at the
    // last returned layer's attention weights, so that layer does only the QKV
    // product (6*T*C^2) and its Q.K^T (2*T^2*C); the count below is the work done.
    const double t = T, c = C;
    const double full_layer = 24 * t * c * c + 4 * t * t * c, last_layer = 6 * t * c * c + 2 * t * t * c;
    report(state, (returned - 1) * full_layer + last_layer);
    state.counters["issue_count_GFLOP/s"] =
        benchmark::Counter(returned * full_layer, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_forward)->Args({128, L})->Args({1024, 1})->Args({1024, L})->Unit(benchmark::kMillisecond)->UseRealTime();

// The engine's largest product alone: (T, C) x (C, 4C), the MLP's c_fc.
void BM_matmul(benchmark::State& state) {
    const int T = static_cast<int>(state.range(0));
    using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
    const RowMatrix x = RowMatrix::Random(T, C), w = RowMatrix::Random(C, 4 * C);
    RowMatrix y(T, 4 * C);
    for (auto _ : state) {
        y.noalias() = x * w;
        benchmark::DoNotOptimize(y.data());
    }
    report(state, 2.0 * T * C * 4 * C);
}
BENCHMARK(BM_matmul)->Arg(128)->Arg(1024)->Unit(benchmark::kMillisecond)->UseRealTime();

// GPT-2's tokenizer on about 100 KB of English (the GPL, which Debian ships).
void BM_tokenize(benchmark::State& state) {
    const std::filesystem::path reference = HEADSCOPE_GPT2_REFERENCE_DIR;
    const Tokenizer tokenizer = Tokenizer::load(reference / "encoder.json", reference / "vocab.bpe");
    const std::string licence = read_file("/usr/share/common-licenses/GPL-3");
    std::string text;
    while (text.size() < 100'000) text += licence;
    for (auto _ : state) benchmark::DoNotOptimize(tokenizer.encode(text));
    state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
}
BENCHMARK(BM_tokenize)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
