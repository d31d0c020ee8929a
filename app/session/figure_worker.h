// A figure the views compute off the frame (the checks, the naive split's
// error) on core's Worker, once for each key (the compute and selection it
// is for): asked for every frame, started only when the key changes.
#pragma once
#include <functional>
#include <memory>
#include <optional>

#include "headscope/base/worker.h"
#include "headscope/compute/backend.h"

namespace headscope {

template <typename Key, typename Figure>
class FigureWorker {
public:
    using Outcome = typename Worker<Figure>::Outcome;

    explicit FigureWorker(std::function<void()> wake) : worker_(std::move(wake)) {}

    // The figure for `key` once computed (with its error when it could not
    // be), else null; submits make_job() when `key` was not asked for last.
    template <typename MakeJob>
    const Outcome* get(const Key& key, MakeJob make_job) {
        if (std::optional<Outcome> outcome = worker_.take()) done_ = std::move(outcome);
        if (asked_ != key) {
            asked_ = key;
            done_.reset();
            worker_.submit(make_job());
        }
        return done_ ? &*done_ : nullptr;
    }
    bool computing() const { return worker_.busy(); }
    // Drops the figure: the next get() computes it again.
    void forget() {
        asked_.reset();
        done_.reset();
    }

private:
    Worker<Figure> worker_;
    std::optional<Key> asked_;     // the key of the last job submitted
    std::optional<Outcome> done_;  // its outcome, once finished
};

// A CPU backend of its own on `model`, for work beside the live forward
// (whose backend is busy with every keystroke).
inline std::unique_ptr<Backend> own_cpu_backend(const Model& model) {
    std::unique_ptr<Backend> backend = make_cpu_backend();
    backend->load_weights(model);
    return backend;
}

}  // namespace headscope
