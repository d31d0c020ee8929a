// The one way Headscope computes off the caller's thread (the window's live
// forward, head probes, checks, dance figures, model loads): a worker thread
// that runs the newest job submitted. A job submitted while another waits
// replaces it; one submitted while another runs asks the running one to stop
// (its std::stop_token) and drops its result, so take() only ever hands back
// the answer to the newest request. A job that throws gives an outcome with
// the exception's message. Destroying the worker also asks the running job
// to stop, and waits for it. `on_finished`, if given, runs on the worker
// after each outcome is stored (a window wakes its event loop with it).
#pragma once
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <thread>
#include <utility>

namespace headscope {

template <typename Result>
class Worker {
public:
    using Job = std::function<Result(std::stop_token)>;

    struct Outcome {
        uint64_t generation = 0;  // submit()'s number for the request it answers
        Result result{};          // default when the job threw
        std::string error;        // non-empty: why the job failed (the exception's message)
    };

    explicit Worker(std::function<void()> on_finished = {})
        : on_finished_(std::move(on_finished)), thread_([this] { run(); }) {}
    ~Worker() {
        {
            std::lock_guard lock(mutex_);
            stopping_ = true;
            running_stop_.request_stop();
        }
        wake_.notify_one();
        thread_.join();
    }
    Worker(const Worker&) = delete;
    Worker& operator=(const Worker&) = delete;

    // Queues `job` in place of any not started, stops the running one; returns its generation.
    uint64_t submit(Job job) {
        uint64_t generation;
        {
            std::lock_guard lock(mutex_);
            pending_ = std::move(job);
            generation = ++submitted_;
            running_stop_.request_stop();
            finished_.reset();  // an older request's outcome, not yet taken
        }
        wake_.notify_one();
        return generation;
    }

    // The newest request's outcome once it is ready, once.
    std::optional<Outcome> take() {
        std::lock_guard lock(mutex_);
        return std::exchange(finished_, std::nullopt);
    }

    // Whether a job waits or runs.
    bool busy() const {
        std::lock_guard lock(mutex_);
        return pending_ != nullptr || running_;
    }
    // Whether a job waits or runs, or its outcome waits to be taken.
    bool unanswered() const {
        std::lock_guard lock(mutex_);
        return pending_ != nullptr || running_ || finished_.has_value();
    }

private:
    void run() {
        for (;;) {
            Job job;
            Outcome outcome;
            std::stop_token stop;
            {
                std::unique_lock lock(mutex_);
                wake_.wait(lock, [&] { return stopping_ || pending_ != nullptr; });
                if (stopping_) return;
                job = std::exchange(pending_, nullptr);
                outcome.generation = submitted_;
                running_stop_ = std::stop_source();
                stop = running_stop_.get_token();
                running_ = true;
            }
            try {
                outcome.result = job(stop);
            } catch (const std::exception& e) {  // Error, or bad_alloc for a result too large
                outcome.error = e.what();
            }
            job = nullptr;  // what it holds (a model, a backend) goes on this thread, before the wake
            bool newest;
            {
                std::lock_guard lock(mutex_);
                running_ = false;
                newest = outcome.generation == submitted_;
                if (newest) finished_ = std::move(outcome);
            }
            if (newest && on_finished_) on_finished_();
        }
    }

    std::function<void()> on_finished_;
    mutable std::mutex mutex_;
    std::condition_variable wake_;
    uint64_t submitted_ = 0;
    Job pending_;  // generation submitted_, when set
    std::stop_source running_stop_;
    bool running_ = false, stopping_ = false;
    std::optional<Outcome> finished_;
    std::thread thread_;  // last: starts after the members it uses
};

}  // namespace headscope
