// CUDA engine benchmark (built with CUDA only): the forward with every layer's
// maps copied back, on a GPT-2-small-shaped model (L=12, NH=12, C=768,
// V=50257, random weights) at T = 128 and 1024, B = 1 and 8, as median ms;
// the fused scale + mask + softmax kernel's achieved bandwidth against
// the device's peak; and on a Llama-3.2-1B-shaped BF16 checkpoint (random
// weights), a keystroke after 128 tokens as the window asks it (the top 5,
// a prefix cache, every map) and the next token's forward (the top 1, the
// last layer's maps), against the time to read the weights once at the
// device's peak.
// Run: build/tests/bench-cuda [repeats]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "bench_checkpoints.h"
#include "headscope/base/clock.h"
#include "headscope/base/error.h"
#include "headscope/compute/backend.h"
#include "headscope/compute/cuda_backend.h"
#include "headscope/compute/prefix_cache.h"
#include "model_writer.h"

using namespace headscope;

namespace {

// The median ms of `repeats` forwards of `batch` (after one that sizes the buffers).
double median_forward_ms(Backend& backend, const Batch& batch, const AttentionOptions& options, int repeats,
                         PrefixCache* cache = nullptr) {
    AttentionResult result;
    backend.forward(batch, options, result, cache);
    std::vector<double> ms;
    for (int r = 0; r < repeats; ++r) {
        const auto start = Clock::now();
        backend.forward(batch, options, result, cache);
        ms.push_back(ms_since(start));
    }
    if (result.computed_on.device != "cuda")
        throw Error("the CUDA backend fell back to the CPU: " + result.computed_on.fallback);
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
}

// The Llama-3.2-1B shape: a keystroke after 128 tokens and the next token's forward.
void llama_lines(int repeats, double peak_gb_s) {
    test::TempDir dir;
    test::write_random_checkpoint(dir.path, test::llama_config(16, 2048, 32, 8, 8192, 128256));
    const Model model = load_model(dir.path.string());
    std::unique_ptr<Backend> backend = make_cuda_backend();
    backend->load_weights(model);
    std::mt19937 rng(11);
    std::vector<int32_t> ids(129);
    for (int32_t& id : ids) id = static_cast<int32_t>(rng() % model.config.vocab_size);
    const Batch batch{{ids}, model.config.pad_id()};
    AttentionOptions keystroke;
    keystroke.top_k = 5;
    PrefixCache cache;
    AttentionOptions token;
    token.top_k = 1;
    token.layers = {model.config.n_layer - 1};
    const double read_ms = static_cast<double>(model.file_bytes) / (peak_gb_s * 1e9) * 1e3;
    const double keystroke_ms = median_forward_ms(*backend, batch, keystroke, repeats, &cache);
    const double token_ms = median_forward_ms(*backend, batch, token, repeats);
    std::printf(
        "Llama-3.2-1B shape, BF16, 129 tokens: keystroke (top 5, a cache, every map) %.2f ms; next token "
        "(top 1, the last layer's maps) %.2f ms, %.1fx the %.2f ms to read the %.0f MB of weights at peak\n",
        keystroke_ms, token_ms, token_ms / read_ms, read_ms, model.file_bytes / 1e6);
}

}  // namespace

int main(int argc, char** argv) {
    const int repeats = argc > 1 ? std::max(1, std::stoi(argv[1])) : 10;
    const CudaStatus cuda = cuda_status();
    if (!cuda.usable) {
        std::fprintf(stderr, "bench-cuda: CUDA backend not usable: %s\n", cuda.reason.c_str());
        return 2;
    }
    try {
        test::TempDir dir;
        test::write_test_model(dir.path, {.n_layer = 12, .n_head = 12, .n_embd = 768, .n_positions = 1024});
        const Model model = load_model(dir.path.string());
        std::unique_ptr<Backend> backend = make_cuda_backend();
        backend->load_weights(model);
        std::printf("device: %s, GPT-2-small shape, all 12 layers' maps copied back, %d runs each\n",
                    cuda.reason.c_str(), repeats);

        std::mt19937 rng(7);
        AttentionResult result;
        for (int T : {128, 1024})
            for (int B : {1, 8}) {
                Batch batch{std::vector<std::vector<int32_t>>(B, std::vector<int32_t>(T)), model.config.eos_token_id};
                for (auto& ids : batch.token_ids)
                    for (auto& id : ids) id = static_cast<int32_t>(rng() % model.config.vocab_size);
                const AttentionOptions options;
                backend->forward(batch, options, result);  // warm-up: device buffers sized once
                std::vector<double> ms;
                for (int r = 0; r < repeats; ++r) {
                    const auto start = Clock::now();
                    backend->forward(batch, options, result);
                    ms.push_back(ms_since(start));
                }
                std::sort(ms.begin(), ms.end());
                if (result.computed_on.device != "cuda")
                    throw Error("the CUDA backend fell back to the CPU: " + result.computed_on.fallback);
                const SoftmaxTiming softmax = time_cuda_softmax(B, 12, T, repeats);
                std::printf(
                    "T=%4d B=%d  forward median %9.2f ms   softmax kernel %7.3f ms, %6.0f GB/s of %6.0f GB/s "
                    "peak (%.0f%%)\n",
                    T, B, ms[ms.size() / 2], softmax.median_ms, softmax.achieved_gb_s, softmax.peak_gb_s,
                    100 * softmax.achieved_gb_s / softmax.peak_gb_s);
            }
        llama_lines(repeats, time_cuda_softmax(1, 12, 128, repeats).peak_gb_s);
    } catch (const Error& e) {
        std::fprintf(stderr, "bench-cuda: %s\n", e.what());
        return 2;
    }
    return 0;
}
