// bench-engine's long documents: a Llama-3.2-1B-shaped BF16 checkpoint's
// forward without maps, with its summaries, at 2,048, 8,192 and 32,768
// tokens, against its products alone, and its peak memory against the file
// and the keys and values it holds; a keystroke at the end of 2,048 and
// 8,192 tokens through the prefix cache, against reading the weights and the
// cache once; the logit lens of the last positions of 8,192 tokens, its
// memory against the file and the live cache (docs/benchmarks.md, "Long documents").
#include <benchmark/benchmark.h>
#include <sys/resource.h>

#include <chrono>
#include <random>
#include <vector>

#include "bench_checkpoints.h"
#include "bench_support.h"
#include "headscope/compute/attention_maps.h"
#include "headscope/compute/backend.h"
#include "headscope/compute/cpu_ops.h"
#include "headscope/compute/forward.h"
#include "headscope/compute/matmul.h"
#include "headscope/compute/prefix_cache.h"
#include "model_writer.h"
#include "session/long_lens.h"

using namespace headscope;
using namespace headscope::test;

namespace {

// The CPU time this process has used, every thread's: on a shared machine
// its share of the cores swings, and what a computation costs is its CPU time.
double process_cpu_seconds() {
    rusage usage{};
    getrusage(RUSAGE_SELF, &usage);
    const auto seconds = [](const timeval& t) { return static_cast<double>(t.tv_sec) + t.tv_usec / 1e6; };
    return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

// One layer's products alone, as a forward without maps computes them: the
// seven projections over T rows (the model's own weights, converted as the
// forward converts them) and each head's blocks of map_block_rows queries
// times the keys they see (causal), then times the values. Seconds, and
// the process's CPU seconds into `cpu`.
double layer_products_seconds(const Model& model, int T, double& cpu) {
    const double cpu_before = process_cpu_seconds();
    const Config& c = model.config;
    const LayerWeights& w = model.layers[0];
    const HeadSplit s = head_split(c, 0);
    AlignedVector<float> x(static_cast<size_t>(T) * c.mlp_size(), 0.01f), out(x.size());
    const auto start = std::chrono::steady_clock::now();
    for (const Matrix* m : {&w.q, &w.k, &w.v, &w.attn_proj, &w.gate, &w.fc})
        linear(x.data(), T, *m, nullptr, out.data(), m->out);
    linear(x.data(), T, w.fc_proj, nullptr, out.data(), c.n_embd);
    using RowMajor = ops::RowMatrix<float>;
    const RowMajor q = RowMajor::Constant(T, s.hs, 0.01f), k = q;
#pragma omp parallel for schedule(dynamic)
    for (int h = 0; h < s.NH; ++h) {
        RowMajor scores, y;
        for (int first = 0; first < T; first += map_block_rows) {
            const int rows = std::min(map_block_rows, T - first), keys = first + rows;
            scores.noalias() = q.middleRows(first, rows) * k.topRows(keys).transpose();
            y.noalias() = scores * k.topRows(keys);
        }
    }
    cpu = process_cpu_seconds() - cpu_before;
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// A long document on a Llama-3.2-1B-shaped BF16 checkpoint (its positions
// raised to 32,768): the forward without maps and with every summary (as
// attention --summaries --maps none), its time against its products alone
// (layer_products_seconds times the layers), and its peak resident memory
// against the file and the keys and values it holds. Args: T, layers (16;
// 2 at 32,768 tokens, whose memory is the same but for the file and the
// other layers' summaries, at a seventh of the time). Run one per process
// (--benchmark_filter=BM_long_document/8192/), so that the peak is that run's.
void BM_long_document(benchmark::State& state) {
    static test::TempDir dir;
    const int T = static_cast<int>(state.range(0)), layers = static_cast<int>(state.range(1));
    const std::filesystem::path path = dir.path / ("llama-1b-long-" + std::to_string(layers));
    if (!std::filesystem::exists(path)) {
        nlohmann::json config = llama_config(layers, 2048, 32, 8, 8192, 128256);
        config["max_position_embeddings"] = 32768;
        write_random_checkpoint(path, config);
    }
    const Model model = load_model(path.string());
    auto backend = make_cpu_backend();
    backend->load_weights(model);
    std::mt19937 rng(7);
    const Batch batch{{random_ids(T, model.config.vocab_size, rng)}, model.config.pad_id()};
    AttentionOptions options;
    options.maps = Maps::none;
    options.summaries = true;
    AttentionResult result;
    const double cpu_before = process_cpu_seconds();
    for (auto _ : state) {
        backend->forward(batch, options, result);
        benchmark::DoNotOptimize(result.kept.get());
    }
    const double forward_cpu = process_cpu_seconds() - cpu_before;
    const double peak = peak_rss_mib();  // the forward's, before the products' own buffers
    double products_cpu = 0;
    const double products = layer_products_seconds(model, T, products_cpu) * model.config.n_layer;
    state.counters["forward_cpu_s"] = forward_cpu;
    state.counters["products_cpu_s"] = products_cpu * model.config.n_layer;
    const HeadSplit s = head_split(model.config, 0);
    const double file = static_cast<double>(model.file_bytes) / 1048576.0;
    // Without a cache the forward holds one layer's keys and values at a time.
    const double cache = double(T) * 2 * s.kv_width() * sizeof(float) / 1048576.0;
    state.counters["products_s"] = products;
    state.counters["file_MiB"] = file;
    state.counters["kv_cache_MiB"] = cache;
    state.counters["peak_rss_MiB"] = peak;
    state.counters["peak_over_file_and_cache_MiB"] = peak - file - cache;
}
// Seconds to read `bytes` once (a sum over 64-bit words of a buffer that
// size, written first): what reading the weights and the cache costs here;
// the process's CPU seconds into `cpu`.
double read_once_seconds(size_t bytes, double& cpu) {
    std::vector<uint64_t> words(bytes / sizeof(uint64_t), 1);
    const double cpu_before = process_cpu_seconds();
    const auto start = std::chrono::steady_clock::now();
    uint64_t sum = 0;
#pragma omp parallel for reduction(+ : sum) schedule(static)
    for (size_t n = 0; n < words.size(); ++n) sum += words[n];
    benchmark::DoNotOptimize(sum);
    cpu = process_cpu_seconds() - cpu_before;
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// A keystroke at the end of a T-token document on the 1B shape, as the
// window's long mode runs it (session/long_maps.h: the queries and keys
// kept, every summary, the top 10 next tokens): the first forward fills a
// prefix cache, then each iteration is the forward of T + 1 tokens through
// it into a result of its own while the last one is still shown, as the
// window's worker types on while its view draws; it computes one row (the
// last, whose token a keystroke may change) into the kept rows in place
// (prefix_cache.h's take_kept_rows: the shown result reads that row from its
// own copy of its last rows, held_rows). Two keystrokes before the timing, as
// typing has begun. Against the time to read the weights and the cache (keys
// and values, queries and keys kept) once (read_once_seconds). Arg: T.
void BM_long_keystroke(benchmark::State& state) {
    static test::TempDir dir;
    const int T = static_cast<int>(state.range(0));
    const std::filesystem::path path = dir.path / "llama-1b-keystroke";
    if (!std::filesystem::exists(path)) {
        nlohmann::json config = llama_config(16, 2048, 32, 8, 8192, 128256);
        config["max_position_embeddings"] = 8193;  // a keystroke past 8,192 tokens
        write_random_checkpoint(path, config);
    }
    const Model model = load_model(path.string());
    auto backend = make_cpu_backend();
    backend->load_weights(model);
    std::mt19937 rng(7);
    const Batch document{{random_ids(T, model.config.vocab_size, rng)}, model.config.pad_id()};
    Batch typed = document;
    typed.token_ids[0].push_back(17);
    AttentionOptions options;
    options.maps = Maps::queries_and_keys;
    options.summaries = true;
    options.top_k = 10;
    PrefixCache cache;
    AttentionResult shown;
    backend->forward(document, options, shown, &cache);
    const auto keystroke = [&] {  // a result of its own, as the window's each keystroke (compute_live)
        AttentionResult typed_result;
        backend->forward(typed, options, typed_result, &cache);
        benchmark::DoNotOptimize(typed_result.kept.get());
        shown = std::move(typed_result);  // the window shows it, and lets go of the last
    };
    keystroke(), keystroke();
    const double cpu_before = process_cpu_seconds();
    for (auto _ : state) keystroke();
    state.counters["keystroke_cpu_s"] = (process_cpu_seconds() - cpu_before) / static_cast<double>(state.iterations());
    state.counters["rows_computed"] = T + 1 - shown.reused[0];
    state.counters["peak_rss_MiB"] = peak_rss_mib();  // before the read's own buffer
    const HeadSplit s = head_split(model.config, 0);
    const size_t cache_bytes =
        (2 * s.kv_width() + s.q_width() + s.kv_width()) * sizeof(float) * size_t(T) * model.config.n_layer;
    double read_cpu = 0;
    state.counters["read_once_s"] = read_once_seconds(model.file_bytes + cache_bytes, read_cpu);
    state.counters["read_once_cpu_s"] = read_cpu;
    state.counters["file_and_cache_MiB"] = double(model.file_bytes + cache_bytes) / 1048576.0;
}
BENCHMARK(BM_long_keystroke)->Arg(2048)->Arg(8192)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(5);

// The logit lens of a long document's positions in view, as the window's
// lens tab asks it (app/session/long_lens.h): the live forward of T tokens
// as BM_long_keystroke's (its prefix cache and its result held, as the
// window holds them), then the lens of the last 20 positions (as many as a
// 1280-pixel window's lens tab fits), from the lens's empty state. Its
// process CPU seconds, the resident memory it leaves held (what the lens
// keeps for the next ask) and the peak against the file and the live cache.
// One run per process (--benchmark_filter=BM_long_lens/8192), so that the
// peak is that run's.
void BM_long_lens(benchmark::State& state) {
    static test::TempDir dir;
    const int T = static_cast<int>(state.range(0)), shown_positions = 20;
    const std::filesystem::path path = dir.path / "llama-1b-lens";
    if (!std::filesystem::exists(path)) {
        nlohmann::json config = llama_config(16, 2048, 32, 8, 8192, 128256);
        config["max_position_embeddings"] = T;
        write_random_checkpoint(path, config);
    }
    auto model = std::make_shared<const Model>(load_model(path.string()));
    auto backend = make_cpu_backend();
    backend->load_weights(*model);
    std::mt19937 rng(7);
    const KeptMaps kept{model,
                        Batch{{random_ids(T, model->config.vocab_size, rng)}, model->config.pad_id()},
                        long_text_options(AttentionOptions{}),
                        {}};
    AttentionOptions live_options = kept.options;
    live_options.top_k = 10;
    PrefixCache live;
    AttentionResult shown;
    backend->forward(kept.batch, live_options, shown, &live);
    CpuForward lens_forward;  // the lens's own (LongLens::open)
    const LensAsk ask{0, T - shown_positions, T, 5};
    const double resident_before = resident_mib(), cpu_before = process_cpu_seconds();
    LensAnswer answer;
    for (auto _ : state) answer = compute_lens(lens_forward, &live, kept, ask);
    state.counters["rows_read"] = answer.read;  // from the live cache, not computed
    state.counters["lens_cpu_s"] = (process_cpu_seconds() - cpu_before) / static_cast<double>(state.iterations());
    state.counters["lens_held_MiB"] = resident_mib() - resident_before;
    const double peak = peak_rss_mib();
    const HeadSplit s = head_split(model->config, 0);
    const double file = static_cast<double>(model->file_bytes) / 1048576.0;
    const double cache =
        (2 * s.kv_width() + s.q_width() + s.kv_width()) * sizeof(float) * double(T) * model->config.n_layer / 1048576.0;
    state.counters["peak_rss_MiB"] = peak;
    state.counters["file_and_cache_MiB"] = file + cache;
    state.counters["peak_over_file_and_cache_MiB"] = peak - file - cache;
}
BENCHMARK(BM_long_lens)->Arg(8192)->Unit(benchmark::kSecond)->UseRealTime()->Iterations(1);

BENCHMARK(BM_long_document)
    ->Args({2048, 16})
    ->Args({8192, 16})
    ->Args({32768, 2})
    ->Unit(benchmark::kSecond)
    ->UseRealTime()
    ->Iterations(1);

}  // namespace
