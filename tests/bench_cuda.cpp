// CUDA engine benchmark (built with CUDA only): the forward with every layer's
// maps copied back, on a GPT-2-small-shaped model (L=12, NH=12, C=768,
// V=50257, random weights) at T = 128 and 1024, B = 1 and 8, as median ms;
// and the fused scale + mask + softmax kernel's achieved bandwidth against
// the device's peak.
// Run: build/tests/bench-cuda [repeats]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "headscope/base/clock.h"
#include "headscope/base/error.h"
#include "headscope/compute/backend.h"
#include "headscope/compute/cuda_backend.h"
#include "model_writer.h"

using namespace headscope;

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
    } catch (const Error& e) {
        std::fprintf(stderr, "bench-cuda: %s\n", e.what());
        return 2;
    }
    return 0;
}
