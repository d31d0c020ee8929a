// Keystroke to maps: a sentence typed one character at a time into the live
// worker (as the window does: the same prefix cache kept across keystrokes,
// the top 10 predictions), timing each keystroke from submit() to the result
// being ready for the next frame: tokenizing and every layer's maps. With
// --prefix the sentence is typed after that text, as at the end of a long one.
// With --ablate those heads are knocked out (the window then compares with
// the intact model in a job of its own, after the maps).
// Usage: bench-live [--model M] [--repeat N] [--prefix TEXT] [--ablate L.H,...]   (default: the built-in model)
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>

#include "headscope/base/clock.h"
#include "headscope/base/error.h"
#include "headscope/base/worker.h"
#include "headscope/compute/live.h"

using namespace headscope;

int main(int argc, char** argv) {
    CLI::App cli{"Keystroke-to-maps latency of the live worker", "bench-live"};
    std::string model_name = builtin_model;
    std::string prefix, ablate;
    int repeat = 5;
    cli.add_option("--model", model_name);
    cli.add_option("--repeat", repeat, "times the sentence is typed");
    cli.add_option("--prefix", prefix, "the text the sentence is typed after");
    cli.add_option("--ablate", ablate, "knock these heads out (LAYER.HEAD,...)");
    CLI11_PARSE(cli, argc, argv);
    try {
        const Model model = load_model(model_name);
        auto backend = make_cpu_backend();
        backend->load_weights(model);
        std::mutex mutex;
        std::condition_variable ready;
        bool finished = false;
        Worker<LiveResult> live([&] {
            std::lock_guard lock(mutex);
            finished = true;
            ready.notify_one();
        });

        const std::string sentence =
            "The cat sat on the mat because it was soft, and the dog that chased it sat down beside the door.";
        AttentionOptions options;
        options.top_k = 10;  // the window's predictions panel
        options.ablate = parse_heads(ablate);
        PrefixCache cache;
        std::vector<double> ms;
        size_t tokens = 0;
        for (int r = 0; r < repeat; ++r)
            for (size_t n = 1; n <= sentence.size(); ++n) {
                const auto start = Clock::now();
                live.submit([&, request = LiveRequest{{prefix + sentence.substr(0, n)}, options}](std::stop_token) {
                    return compute_live(*backend, model, request, &cache);
                });
                std::unique_lock lock(mutex);
                ready.wait(lock, [&] { return finished; });
                finished = false;
                ms.push_back(ms_since(start));
                tokens = live.take()->result.token_ids[0].size();
            }
        std::sort(ms.begin(), ms.end());
        std::printf("model %s: %d layers x %d heads, C=%d\n", model.path.c_str(), model.config.n_layer,
                    model.config.n_head, model.config.n_embd);
        std::printf("%zu keystrokes (up to %zu tokens): median %.3f ms  p95 %.3f ms  max %.3f ms\n", ms.size(), tokens,
                    ms[ms.size() / 2], ms[ms.size() * 95 / 100], ms.back());
    } catch (const Error& e) {
        std::fprintf(stderr, "bench-live: error: %s\n", e.what());
        return 2;
    }
    return 0;
}
