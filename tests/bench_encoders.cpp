// Benchmarks of the encoders and encoder–decoders: a BERT-base-shaped encoder
// (L=12, NH=12, C=768, F=3072, random weights) at T = 128 with every map,
// bidirectional, in GFLOP/s and against the FMA peak (BM_bert_forward has the
// products of bench-engine's BM_forward/128/12, GPT-2 small's); and greedy
// generation on a T5-small-shaped encoder–decoder (6 + 6 layers, C = 512, 8
// heads of 64, F = 2048, ReLU, tied embeddings), in ms per token against the
// floor of reading the decoder's weights (its layers and the shared
// embedding) once at this machine's measured read bandwidth.
// Run: build/tests/bench-encoders --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <random>
#include <string>

#include "bench_support.h"
#include "encoder_models.h"
#include "headscope/compute/backend.h"
#include "headscope/compute/prefix_cache.h"
#include "model_writer.h"
#include "seq2seq_models.h"

using namespace headscope;
using namespace headscope::test;

namespace {

constexpr int L = 12, C = 768;

// A BERT-base-shaped encoder (L=12, NH=12, C=768, F=3072, random weights) at
// T = 128 with every map, bidirectional: the same products as BM_forward/128/12.
void BM_bert_forward(benchmark::State& state) {
    static test::TempDir dir;
    static const Model model = [] {
        test::EncoderSpec spec = test::encoder_spec(test::Encoder::bert);
        spec.n_layer = L, spec.n_head = 12, spec.n_embd = C, spec.mlp_dim = 4 * C, spec.max_positions = 512;
        test::write_encoder_checkpoint(dir.path, test::make_encoder_checkpoint(spec));
        return load_model(dir.path.string());
    }();
    auto backend = make_cpu_backend();
    backend->load_weights(model);
    std::mt19937 rng(7);
    const Batch batch{{random_ids(128, model.config.vocab_size, rng)}, model.config.pad_id()};
    AttentionOptions options;
    options.causal = false;
    AttentionResult result;
    backend->forward(batch, options, result);
    for (auto _ : state) backend->forward(batch, options, result);
    const double t = 128, c = C;
    report(state, (L - 1) * (24 * t * c * c + 4 * t * t * c) + 6 * t * c * c + 2 * t * t * c);
}
BENCHMARK(BM_bert_forward)->Unit(benchmark::kMillisecond)->UseRealTime();

// A 64-token source encoded once, then 32 tokens generated greedily, each a
// decoder forward reusing the earlier ones through a PrefixCache, with every
// map (the cross-attention's too) and the top-10 predictions.
void BM_t5_generate(benchmark::State& state) {
    constexpr int source_tokens = 64, generated = 32;
    static TempDir dir;
    static const Model model = [] {
        Seq2SeqSpec spec = seq2seq_variant("t5");
        spec.encoder_layers = spec.decoder_layers = 6, spec.n_embd = 512, spec.n_head = 8, spec.head_dim = 64;
        spec.mlp_dim = 2048, spec.max_positions = 512, spec.buckets = 32, spec.max_distance = 128;
        write_seq2seq_checkpoint(dir.path, make_seq2seq_checkpoint(spec));
        return load_model(dir.path.string());
    }();
    auto backend = make_cpu_backend();
    backend->load_weights(model);
    std::mt19937 rng(17);
    AttentionOptions options;
    options.scale = Scale::none;  // T5's own
    options.top_k = 10;
    AttentionResult result;
    for (auto _ : state) {
        state.PauseTiming();
        Batch batch{{{model.config.decoder_start_token_id}}, model.config.pad_id()};
        batch.source_ids = {random_ids(source_tokens, model.config.vocab_size, rng)};
        PrefixCache cache;
        backend->forward(batch, options, result, &cache);  // the encoder, once
        state.ResumeTiming();
        for (int step = 0; step < generated; ++step) {
            std::vector<int32_t>& ids = batch.token_ids[0];
            ids.push_back(result.predictions_at(0, static_cast<int>(ids.size()) - 1)[0].id);
            backend->forward(batch, options, result, &cache);
        }
        benchmark::DoNotOptimize(result.predictions.data());
    }
    state.counters["ms_per_token"] = benchmark::Counter(
        generated / 1e3, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
    double decoder_bytes = 0;  // what a step reads: the decoder's layers and the shared embedding
    for (const TensorInfo& t : model.tensors)
        if (t.name.rfind("encoder.", 0) != 0) decoder_bytes += static_cast<double>(t.bytes);
    state.counters["decoder_MB"] = decoder_bytes / 1e6;
    report_floor(state, decoder_bytes, generated);
}
BENCHMARK(BM_t5_generate)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(5);

}  // namespace

BENCHMARK_MAIN();
