// Recomputes attention on a worker thread while the user types: submit()
// never waits, the newest request wins (requests overtaken while the worker
// was busy are skipped), and take() hands back the newest finished result.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "headscope/backend.h"

namespace headscope {

struct LiveRequest {
    std::vector<std::string> texts;  // the batch, one text per entry
    AttentionOptions options;
};

struct LiveResult {
    uint64_t generation = 0;  // of the request it answers
    std::vector<std::vector<int32_t>> token_ids;
    AttentionResult attention;
    std::string error;        // non-empty: the request was refused (bad text, too many tokens, ...)
    double compute_ms = 0;    // tokenizing and the forward
    double tokenize_ms = 0;   // the tokenizing part of compute_ms
};

class LiveCompute {
public:
    // `backend` must have `model`'s weights loaded; both outlive this object.
    // `on_finished`, if given, is called on the worker after each result is
    // ready (a window wakes its event loop with it, so no frame waits).
    LiveCompute(Backend& backend, const Model& model, std::function<void()> on_finished = {});
    ~LiveCompute();
    LiveCompute(const LiveCompute&) = delete;
    LiveCompute& operator=(const LiveCompute&) = delete;

    // Queues `request` in place of any not yet started; returns its generation.
    uint64_t submit(LiveRequest request);
    // The newest finished result not taken before, if any.
    std::optional<LiveResult> take();
    // Whether a request is queued or running.
    bool busy() const;

private:
    void run();

    Backend& backend_;
    const Model& model_;
    std::function<void()> on_finished_;
    mutable std::mutex mutex_;
    std::condition_variable wake_;
    uint64_t submitted_ = 0;
    std::optional<LiveRequest> pending_;  // generation submitted_
    bool running_ = false, stopping_ = false;
    std::optional<LiveResult> finished_;
    std::thread worker_;  // last: starts after the members it uses
};

}  // namespace headscope
