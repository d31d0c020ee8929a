// GGUF benchmarks: a Llama-3.2-1B-shaped file (16 layers, C=2048, NH=32,
// NKV=8, F=8192, V=128256, tied embedding; random valid blocks) in Q4_K_M's
// mix (llama.cpp's: Q6_K for the embedding and for attn_v and ffn_down on
// its "more bits" layers, Q4_K elsewhere), Q8_0 and F16. For each:
//   BM_gguf_forward    128 tokens with every layer's maps; resident memory
//                      against the file's size
//   BM_gguf_next_token one token after a 128-token prompt kept in a
//                      PrefixCache, with its row's maps (generate's) or with
//                      every map kept (the window's), against the floor of
//                      reading the file once (mapped, both threads, as the
//                      token reads it: bench_support.h's mapped_read_ms)
//   BM_llama_cpp       llama.cpp (node-llama-cpp, 2 threads) on the same file:
//                      its prompt processing of the same 128 tokens, and a
//                      generated token after them with its logits (counter
//                      token_ms) and without (token_without_logits_ms: the
//                      output layer then skipped)
// and BM_gguf_8b: a Llama-3.1-8B-shaped Q4_K_M file opened (resident memory)
// and its 128-token forward, only with HEADSCOPE_BENCH_8B=1 (a 4.9 GB file).
// Files are written once into HEADSCOPE_BENCH_DIR when set (kept), else into a
// temporary folder.
// Run: build/tests/bench-gguf --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
// with OpenMP's default wait policy, as the app and the CLI run (tools/test's
// OMP_WAIT_POLICY=passive wakes a sleeping thread for each of a token's 113
// products: 36 -> 43 ms a Q4_K_M token here).
#include <benchmark/benchmark.h>

#include <array>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "bench_support.h"
#include "gguf_models.h"
#include "gguf_writer.h"
#include "headscope/compute/backend.h"
#include "headscope/compute/prefix_cache.h"
#include "headscope/model/model.h"
#include "model_writer.h"
#include "process.h"

using namespace headscope;
using namespace headscope::test;
namespace fs = std::filesystem;

namespace {

struct Shape {
    int layers, C, heads, kv_heads, F, V;
};
constexpr Shape llama_1b{16, 2048, 32, 8, 8192, 128256}, llama_8b{32, 4096, 32, 8, 14336, 128256};

enum class Mix { q4_k_m, q8_0, f16 };
constexpr std::array<const char*, 3> mix_names = {"Q4_K_M", "Q8_0", "F16"};

// llama.cpp's Q4_K_M choice for a layer's attn_v and ffn_down (its use_more_bits).
bool more_bits(int layer, int layers) {
    return layer < layers / 8 || layer >= 7 * layers / 8 || (layer - layers / 8) % 3 == 2;
}

GgmlType matrix_type(Mix mix, const std::string& name, int layer, int layers) {
    if (mix == Mix::f16) return GgmlType::F16;
    if (mix == Mix::q8_0) return GgmlType::Q8_0;
    const bool v_or_down = name == "attn_v.weight" || name == "ffn_down.weight";
    return name == "token_embd.weight" || (v_or_down && more_bits(layer, layers)) ? GgmlType::Q6_K : GgmlType::Q4_K;
}

// A pool of random valid blocks of `type` with values of about 0.02 (F16: halves of that size), cycled through.
std::vector<uint8_t> block_pool(GgmlType type) {
    std::mt19937 rng(5);
    std::vector<uint8_t> pool;
    for (int b = 0; b < 4096; ++b) {
        if (type == GgmlType::F16) {
            const uint16_t bits = static_cast<uint16_t>(0x2000 + rng() % 0x0800) | (rng() % 2 ? 0x8000 : 0);
            pool.push_back(static_cast<uint8_t>(bits)), pool.push_back(static_cast<uint8_t>(bits >> 8));
        } else {
            const Block block = block_of_spread(type, 0.02, rng);
            pool.insert(pool.end(), block.begin(), block.end());
        }
    }
    return pool;
}

struct TensorPlan {
    std::string name;
    std::vector<uint64_t> ne;
    GgmlType type;
};

std::vector<TensorPlan> tensor_plan(const Shape& s, Mix mix) {
    const uint64_t C = s.C, hd = s.C / s.heads, kv = hd * s.kv_heads, F = s.F;
    std::vector<TensorPlan> plan = {
        {"token_embd.weight", {C, uint64_t(s.V)}, matrix_type(mix, "token_embd.weight", 0, 0)},
        {"output_norm.weight", {C}, GgmlType::F32}};
    for (int l = 0; l < s.layers; ++l) {
        const auto add = [&](const std::string& name, std::vector<uint64_t> ne) {
            const GgmlType type = ne.size() == 1 ? GgmlType::F32 : matrix_type(mix, name, l, s.layers);
            plan.push_back({"blk." + std::to_string(l) + "." + name, std::move(ne), type});
        };
        add("attn_norm.weight", {C}), add("attn_q.weight", {C, C}), add("attn_k.weight", {C, kv});
        add("attn_v.weight", {C, kv}), add("attn_output.weight", {C, C}), add("ffn_norm.weight", {C});
        add("ffn_gate.weight", {C, F}), add("ffn_up.weight", {C, F}), add("ffn_down.weight", {F, C});
    }
    return plan;
}

// The metadata of a llama-architecture file of shape s: a byte-level
// vocabulary of V tokens (the 256 bytes, then fillers) so that llama.cpp loads it.
std::vector<std::pair<std::string, GgufMetaValue>> metadata(const Shape& s, Mix mix) {
    constexpr std::array<uint32_t, 3> file_types = {15, 7, 1};  // llama_ftype: Q4_K_M, Q8_0, F16
    std::vector<std::pair<std::string, GgufMetaValue>> keys = {
        {"general.architecture", gguf_string("llama")},
        {"general.file_type", gguf_uint32(file_types[static_cast<size_t>(mix)])},
        {"llama.block_count", gguf_uint32(uint32_t(s.layers))},
        {"llama.context_length", gguf_uint32(2048)},
        {"llama.embedding_length", gguf_uint32(uint32_t(s.C))},
        {"llama.feed_forward_length", gguf_uint32(uint32_t(s.F))},
        {"llama.attention.head_count", gguf_uint32(uint32_t(s.heads))},
        {"llama.attention.head_count_kv", gguf_uint32(uint32_t(s.kv_heads))},
        {"llama.rope.freq_base", gguf_float32(500000)},
        {"llama.attention.layer_norm_rms_epsilon", gguf_float32(1e-5f)},
        {"tokenizer.ggml.model", gguf_string("gpt2")},
        {"tokenizer.ggml.pre", gguf_string("llama-bpe")}};
    std::vector<std::string> tokens;
    std::vector<GgufMetaValue> types;
    for (int b = 0; b < s.V; ++b) {
        tokens.push_back(b < 256 ? byte_token(b) : b == 256 ? byte_token(' ') + "t" : "filler" + std::to_string(b));
        types.push_back(gguf_int32(1));
    }
    keys.emplace_back("tokenizer.ggml.tokens", gguf_strings(tokens));
    keys.emplace_back("tokenizer.ggml.token_type", gguf_array(5, types));
    keys.emplace_back("tokenizer.ggml.merges", gguf_strings({byte_token(' ') + " " + byte_token('t')}));
    keys.emplace_back("tokenizer.ggml.bos_token_id", gguf_uint32(1));
    keys.emplace_back("tokenizer.ggml.eos_token_id", gguf_uint32(2));
    return keys;
}

// Writes the file tensor by tensor (the header first, its data offsets
// planned), so that the writer never holds a model in memory.
void write_bench_gguf(const fs::path& path, const Shape& s, Mix mix) {
    GgufSpec spec;
    spec.metadata = metadata(s, mix);
    const std::vector<TensorPlan> plan = tensor_plan(s, mix);
    std::vector<uint64_t> offsets, sizes;
    uint64_t next = 0;
    for (const TensorPlan& t : plan) {
        uint64_t elements = 1;
        for (uint64_t n : t.ne) elements *= n;
        const GgmlTypeTraits& traits = ggml_type_traits(t.type);
        sizes.push_back(elements / traits.block_elements * traits.block_bytes);
        offsets.push_back(next);
        next = (next + sizes.back() + spec.alignment - 1) / spec.alignment * spec.alignment;
        spec.tensors.push_back({t.name, t.ne, static_cast<uint32_t>(t.type), "", offsets.back()});
    }
    GgufLayout layout{};
    const std::string header = gguf_bytes(spec, &layout);
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(header.data(), static_cast<std::streamsize>(layout.data));
    std::map<GgmlType, std::vector<uint8_t>> pools;
    std::mt19937 rng(9);
    const std::vector<uint8_t> one_f32 = {0, 0, 0x80, 0x3f};  // 1.0f: the norms' gains
    for (size_t i = 0; i < plan.size(); ++i) {
        out.seekp(static_cast<std::streamoff>(layout.data + offsets[i]));
        if (plan[i].type == GgmlType::F32) {
            for (uint64_t e = 0; e < sizes[i] / 4; ++e) out.write(reinterpret_cast<const char*>(one_f32.data()), 4);
            continue;
        }
        std::vector<uint8_t>& pool = pools.try_emplace(plan[i].type, block_pool(plan[i].type)).first->second;
        const size_t block = ggml_type_traits(plan[i].type).block_bytes, blocks = pool.size() / block;
        for (uint64_t written = 0; written < sizes[i]; written += block)
            out.write(reinterpret_cast<const char*>(pool.data() + rng() % blocks * block),
                      static_cast<std::streamsize>(block));
    }
    if (!out) throw std::runtime_error("cannot write " + path.string());
}

fs::path bench_file(const Shape& s, Mix mix) {
    static TempDir temporary;
    const char* kept = std::getenv("HEADSCOPE_BENCH_DIR");
    const fs::path dir = kept ? fs::path(kept) : temporary.path;
    fs::create_directories(dir);
    const fs::path path = dir / ("llama-" + std::to_string(s.layers) + "-layers-" + mix_names[size_t(mix)] + ".gguf");
    if (!fs::exists(path)) write_bench_gguf(path, s, mix);
    return path;
}

constexpr int prompt_tokens = 128;

// Arg: the mix. 128 tokens, every layer's maps; resident memory over the file's size after it.
void BM_gguf_forward(benchmark::State& state) {
    const Mix mix = static_cast<Mix>(state.range(0));
    const fs::path file = bench_file(llama_1b, mix);
    const double before = resident_mib();
    const Model model = load_model(file.string());
    auto backend = make_cpu_backend();
    backend->load_weights(model);
    std::mt19937 rng(7);
    const Batch batch{{random_ids(prompt_tokens, model.config.vocab_size, rng)}, model.config.pad_id()};
    AttentionResult result;
    backend->forward(batch, {}, result);  // warm-up: buffers sized once, pages mapped
    for (auto _ : state) {
        backend->forward(batch, {}, result);
        benchmark::DoNotOptimize(result.weights.data());
    }
    state.SetLabel(mix_names[size_t(mix)]);
    const double file_mib = static_cast<double>(fs::file_size(file)) / 1048576.0;
    state.counters["file_MiB"] = file_mib;
    state.counters["maps_MiB"] = result.weights.size() * sizeof(float) / 1048576.0;
    state.counters["resident_over_file"] = (resident_mib() - before) / file_mib;
}
BENCHMARK(BM_gguf_forward)->DenseRange(0, 2)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(3);

// Args: the mix, and whether every map is kept. One token after a 128-token
// prompt reused from a PrefixCache (reset to the prompt before each step), with
// the top 10: with the new row's maps only, as headscope-cli generate asks, or
// with every row's kept, as the window's generation shows them.
void BM_gguf_next_token(benchmark::State& state) {
    const Mix mix = static_cast<Mix>(state.range(0));
    const bool every_map = state.range(1) != 0;
    const fs::path file = bench_file(llama_1b, mix);
    const Model model = load_model(file.string());
    auto backend = make_cpu_backend();
    backend->load_weights(model);
    std::mt19937 rng(11);
    std::vector<int32_t> prompt = random_ids(prompt_tokens, model.config.vocab_size, rng), extended = prompt;
    extended.push_back(42);
    AttentionOptions options;
    options.top_k = 10;
    options.new_rows_only = !every_map;
    AttentionResult result;
    PrefixCache cache;
    const Batch prompt_batch{{prompt}, model.config.pad_id()}, batch{{extended}, model.config.pad_id()};
    for (auto _ : state) {
        state.PauseTiming();
        backend->forward(prompt_batch, options, result, &cache);
        state.ResumeTiming();
        backend->forward(batch, options, result, &cache);
        benchmark::DoNotOptimize(result.predictions.data());
    }
    state.SetLabel(std::string(mix_names[size_t(mix)]) + (every_map ? ", every map kept" : ", its row's maps"));
    // The floor: the file read once as the token reads it, both threads their
    // halves of its mapped pages; array_floor_ms, the earlier floor, the file's
    // bytes at read_bandwidth_gbs (an anonymous array's), for comparison.
    const double bytes = static_cast<double>(fs::file_size(file)), floor_ms = mapped_read_ms(file.string());
    state.counters["array_floor_ms"] = bytes / (read_bandwidth_gbs() * 1e9) * 1e3;
    state.counters["read_GB/s"] = bytes / floor_ms / 1e6;
    report_floor_ms(state, floor_ms, 1);
}
BENCHMARK(BM_gguf_next_token)
    ->ArgsProduct({{0, 1, 2}, {0, 1}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(5);

// Arg: the mix. llama.cpp's prompt processing of 128 tokens and a generated
// token after them (tests/reference/gguf_speed.js), each the median of its
// runs there; the iteration's time is its prompt's.
void BM_llama_cpp(benchmark::State& state) {
    const Mix mix = static_cast<Mix>(state.range(0));
    const fs::path file = bench_file(llama_1b, mix);
    std::mt19937 rng(7);
    TempDir scratch;
    const fs::path request = scratch.path / "request.json";
    std::ofstream(request) << nlohmann::json{
        {"model", file.string()},
        {"tokens", random_ids(prompt_tokens, llama_1b.V, rng)},
        {"threads", 2}}.dump();
    const fs::path script = fs::path(HEADSCOPE_TESTS_DIR) / "reference" / "gguf_speed.js";
    for (auto _ : state) {
        const ProcessRun r = run_program({"node", script.string()}, scratch.path, request);
        if (r.status != 0) {
            state.SkipWithError(("tests/reference/gguf_speed.js failed: " + r.err).c_str());
            return;
        }
        const auto figures = nlohmann::json::parse(r.out);
        state.SetIterationTime(figures["prompt_ms"].get<double>() / 1e3);
        state.counters["token_ms"] = figures["token_ms"].get<double>();
        state.counters["token_without_logits_ms"] = figures["token_without_logits_ms"].get<double>();
    }
    state.SetLabel(mix_names[size_t(mix)]);
}
BENCHMARK(BM_llama_cpp)->DenseRange(0, 2)->Unit(benchmark::kMillisecond)->UseManualTime()->Iterations(1);

// A Llama-3.1-8B-shaped Q4_K_M file: resident memory once opened and after a
// 128-token forward with every map, and that forward's time.
void BM_gguf_8b(benchmark::State& state) {
    if (!std::getenv("HEADSCOPE_BENCH_8B")) {
        state.SkipWithError("set HEADSCOPE_BENCH_8B=1 to write and time the 4.9 GB file");
        return;
    }
    const fs::path file = bench_file(llama_8b, Mix::q4_k_m);
    const double before = resident_mib();
    const Model model = load_model(file.string());
    auto backend = make_cpu_backend();
    backend->load_weights(model);
    state.counters["opened_MiB"] = resident_mib() - before;
    std::mt19937 rng(7);
    const Batch batch{{random_ids(prompt_tokens, model.config.vocab_size, rng)}, model.config.pad_id()};
    AttentionResult result;
    for (auto _ : state) {
        backend->forward(batch, {}, result);
        benchmark::DoNotOptimize(result.weights.data());
    }
    state.counters["file_MiB"] = static_cast<double>(fs::file_size(file)) / 1048576.0;
    state.counters["resident_MiB"] = resident_mib() - before;
}
BENCHMARK(BM_gguf_8b)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(2);

}  // namespace

BENCHMARK_MAIN();
