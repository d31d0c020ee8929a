// The "compare with" text beside the selected one and what is computed of
// the two: the compare text's forward (its maps and predictions, with the
// live forward's options), and exact activation patching with the selected
// text as the clean run and the compare text as the corrupted one (core's
// patching.h). Each runs on a worker of its own, on a CPU backend of its
// own, so that the live forward may run meanwhile.
#pragma once
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "headscope/base/worker.h"
#include "headscope/compute/backend.h"
#include "headscope/compute/live.h"
#include "headscope/compute/patching.h"
#include "headscope/model/model.h"
#include "session/job_progress.h"

namespace headscope {

class Comparison {
public:
    // `wake` runs on a worker whenever one has something new for the frame.
    explicit Comparison(std::function<void()> wake) : wake_(std::move(wake)) {}

    // Another model is open: nothing of the last one's is shown.
    void open(std::shared_ptr<const Model> model);
    // Computes `text` with `options` (the live forward's); an empty text shows none.
    void submit(const std::string& text, const AttentionOptions& options);
    // Takes what the workers finished: true when anything shown changed.
    bool collect();
    bool busy() const { return forward_worker_.busy() || patching_worker_.busy(); }

    // The compare text's tokens (empty: no compare text computed, or a refused one) and forward.
    const std::vector<int32_t>& token_ids() const {
        return shown_.token_ids.empty() ? no_tokens_ : shown_.token_ids[0];
    }
    const AttentionResult& attention() const { return shown_.attention; }
    int length() const { return static_cast<int>(token_ids().size()); }
    uint64_t generation() const { return generation_; }  // changes whenever the shown forward does
    std::string message;                                 // why the last compare text was refused; empty when it was not

    // Exact patching of the clean and corrupted tokens with `options`, as `request` asks, with progress and cancel.
    void compute_patching(const std::vector<int32_t>& clean, const std::vector<int32_t>& corrupted,
                          const AttentionOptions& options, const PatchRequest& request);
    const Patching* patching() const { return patched_ ? &patched_->grids : nullptr; }
    // Whether the grids shown were computed from these texts and options as they are now.
    bool patching_current(const std::vector<int32_t>& clean, const AttentionOptions& options) const;
    bool patching_pending() const { return patching_worker_.busy(); }
    JobProgress& patching_progress() { return patching_progress_; }
    std::string patching_message;  // why the last patching failed; empty when it did not

private:
    struct PatchingShown {
        Patching grids;
        std::shared_ptr<const Model> model;
        std::vector<int32_t> clean, corrupted;
        AttentionOptions options;
    };
    std::function<void()> wake_;
    std::shared_ptr<const Model> model_;
    std::shared_ptr<Backend> backend_;  // shared with the jobs that run on it
    // The compare forward's token prefixes: a keystroke in the text (which
    // recomputes B with the options) reuses all of B; touched by its jobs only, one at a time.
    std::shared_ptr<PrefixCache> cache_;
    LiveResult shown_;
    uint64_t generation_ = 0;
    inline static const std::vector<int32_t> no_tokens_;
    std::optional<PatchingShown> patched_;
    JobProgress forward_progress_, patching_progress_;
    // Last: their threads stop before the members their jobs' outcomes go to.
    Worker<LiveResult> forward_worker_{wake_};
    Worker<PatchingShown> patching_worker_{wake_};
};

}  // namespace headscope
