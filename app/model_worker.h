// A figure computed from the open model on a worker thread with a CPU
// backend of its own (the live worker's is busy with every keystroke), so a
// frame never waits for it. The session keeps the open model until the work
// is done (Session::reading_model). Result has a `std::string error`, set to
// the exception's text when the computation throws.
#pragma once
#include <chrono>
#include <exception>
#include <functional>
#include <future>
#include <memory>
#include <optional>

#include "session.h"

namespace headscope {

template <typename Result>
class ModelWorker {
public:
    using Compute = std::function<void(Backend& backend, const Model& model, Result& result)>;

    // Runs `compute` on `result` (which carries what it is for) on a worker.
    void start(Session& session, Result result, Compute compute) {
        result_ = std::make_shared<Result>(std::move(result));
        running_ = std::async(std::launch::async, [model = &session.model(), result = result_,
                                                   compute = std::move(compute)] {
                       try {
                           const std::unique_ptr<Backend> backend = make_cpu_backend();
                           backend->load_weights(*model);
                           compute(*backend, *model, *result);
                       } catch (const std::exception& e) {  // Error, or bad_alloc for maps too large
                           result->error = e.what();
                       }
                   }).share();
        session.reading_model(running_);
    }

    bool running() const {
        return running_.valid() && running_.wait_for(std::chrono::seconds(0)) != std::future_status::ready;
    }

    // The result of the last start once it has finished, once.
    std::optional<Result> take() {
        if (!running_.valid() || running()) return std::nullopt;
        running_ = {};
        return std::move(*result_);
    }

private:
    std::shared_future<void> running_;  // the session holds it too
    std::shared_ptr<Result> result_;    // what the worker fills in
};

}  // namespace headscope
