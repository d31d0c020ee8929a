// The live recompute worker: see live.h.
#include "headscope/live.h"

#include <chrono>

#include "headscope/error.h"

namespace headscope {

LiveCompute::LiveCompute(Backend& backend, const Model& model, std::function<void()> on_finished)
    : backend_(backend), model_(model), on_finished_(std::move(on_finished)), worker_([this] { run(); }) {}

LiveCompute::~LiveCompute() {
    {
        std::lock_guard lock(mutex_);
        stopping_ = true;
    }
    wake_.notify_one();
    worker_.join();
}

uint64_t LiveCompute::submit(LiveRequest request) {
    uint64_t generation;
    {
        std::lock_guard lock(mutex_);
        pending_ = std::move(request);
        generation = ++submitted_;
    }
    wake_.notify_one();
    return generation;
}

std::optional<LiveResult> LiveCompute::take() {
    std::lock_guard lock(mutex_);
    std::optional<LiveResult> result = std::move(finished_);
    finished_.reset();
    return result;
}

bool LiveCompute::busy() const {
    std::lock_guard lock(mutex_);
    return pending_.has_value() || running_;
}

void LiveCompute::run() {
    for (;;) {
        LiveRequest request;
        uint64_t generation;
        {
            std::unique_lock lock(mutex_);
            wake_.wait(lock, [&] { return stopping_ || pending_.has_value(); });
            if (stopping_) return;
            request = std::move(*pending_);
            pending_.reset();
            generation = submitted_;
            running_ = true;
        }
        LiveResult result;
        result.generation = generation;
        const auto start = std::chrono::steady_clock::now();
        try {
            for (size_t i = 0; i < request.texts.size(); ++i) {
                if (request.texts[i].empty()) throw Error("text " + std::to_string(i + 1) + " is empty");
                result.token_ids.push_back(model_.tokenizer.encode(request.texts[i]));
            }
            result.tokenize_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
            backend_.forward(Batch{result.token_ids, model_.config.eos_token_id}, request.options, result.attention);
        } catch (const std::exception& e) {  // Error, or bad_alloc for maps too large
            result.error = e.what();
        }
        result.compute_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
        bool fresh;
        {
            std::lock_guard lock(mutex_);
            running_ = false;
            // A result for text that has since changed would only flash stale maps.
            fresh = generation == submitted_;
            if (fresh) finished_ = std::move(result);
        }
        if (fresh && on_finished_) on_finished_();
    }
}

}  // namespace headscope
