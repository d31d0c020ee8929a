// The "compare with" text beside the selected one (an encoder–decoder's
// compare source with its target) and what is computed of the two: the compare text's forward (its maps and
// predictions, with the live forward's options); activation patching with the selected text as the clean run and the
// compare text as the corrupted one, exact (core's patching.h), estimated by attribution (backward.h) or both; and one
// cell's patched run, whole, for the maps and predictions to show. Each
// runs on a worker of its own, on a CPU backend of its own, so that the
// live forward may run meanwhile.
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
#include "state/window_state.h"

namespace headscope {

// One text's ids as the forward reads them: its tokens (an encoder–decoder's
// target, its decoder's input), an encoder–decoder's source and a pair's
// token types (each empty where the text has none).
struct TextIds {
    std::vector<int32_t> tokens, source, types;
    bool operator==(const TextIds&) const = default;
    // A batch of this one text, with its types where `model` reads them (text_batch.h).
    Batch batch(const Model& model) const;
};

class Comparison {
public:
    // `wake` runs on a worker whenever one has something new for the frame.
    explicit Comparison(std::function<void()> wake) : wake_(std::move(wake)) {}

    // Another model is open: nothing of the last one's is shown.
    void open(std::shared_ptr<const Model> model);
    // Computes `text` (an encoder's with its pair's second text `pair`, an
    // encoder–decoder's source with `target`; "": none) with `options` (the
    // live forward's); an empty text shows none.
    void submit(const std::string& text, const std::string& pair, const std::string& target,
                const AttentionOptions& options);
    // Takes what the workers finished: true when anything shown changed.
    bool collect();
    bool busy() const { return forward_worker_.busy() || patching_worker_.busy() || run_worker_.busy(); }

    // The compare text's tokens (empty: no compare text computed, or a refused one) and forward.
    const std::vector<int32_t>& token_ids() const {
        return shown_.token_ids.empty() ? no_tokens_ : shown_.token_ids[0];
    }
    // Its tokens with its source (an encoder–decoder's).
    TextIds ids() const {
        return {token_ids(), shown_.source_ids.empty() ? no_tokens_ : shown_.source_ids[0],
                shown_.token_types.empty() ? no_tokens_ : shown_.token_types[0]};
    }
    const AttentionResult& attention() const { return shown_.attention; }
    int length() const { return static_cast<int>(token_ids().size()); }
    uint64_t generation() const { return generation_; }  // changes whenever the shown forward or patched run does
    std::string message;                                 // why the last compare text was refused; empty when it was not

    // Patching of the clean and corrupted tokens with `options`, as `request`
    // asks, by `method`, with progress and cancel. With both, an estimate
    // the backward refuses leaves the exact grids, and says why.
    void compute_patching(const TextIds& clean, const TextIds& corrupted, const AttentionOptions& options,
                          const PatchRequest& request, PatchMethod method);
    // The grids shown, of either method (the exact ones where both were computed); null: none.
    const Patching* patching() const;
    const Patching* exact() const { return patched_ && patched_->exact ? &*patched_->exact : nullptr; }
    const Patching* estimate() const { return patched_ && patched_->estimate ? &*patched_->estimate : nullptr; }
    // Why the estimate asked for beside the exact grids was not computed; empty when it was, or not asked.
    const std::string& estimate_refusal() const { return patched_ ? patched_->estimate_refusal : no_refusal_; }
    // Whether the grids shown were computed from these texts and options as they are now.
    bool patching_current(const TextIds& clean, const AttentionOptions& options) const;
    bool patching_pending() const { return patching_worker_.busy(); }
    JobProgress& patching_progress() { return patching_progress_; }
    std::string patching_message;  // why the last patching failed; empty when it did not

    // One cell's patched run (core's patched_run) of the shown grids' texts,
    // direction and options, with the forward's `options` (its predictions
    // and maps), to show in place of the text's own run. The cell may be of
    // any stack: an encoder–decoder's encoder, decoder or cross-attention.
    struct PatchedRun {
        PatchCell cell;
        PatchDirection direction = PatchDirection::denoise;
        TextIds clean, corrupted;
        TextIds own;               // the run's: the corrupted text's when denoising, else the clean one's
        AttentionOptions options;  // run_options' of the forward's
        AttentionResult result;    // an encoder–decoder's with its encoder's maps and its cross-attention's
        std::shared_ptr<const Model> model;
    };
    void compute_patched_run(const PatchCell& cell, const AttentionOptions& options);
    // The patched run shown, if it is of these texts and the forward's `options`; null: the text's own run is shown.
    const PatchedRun* patched_run(const TextIds& clean, const AttentionOptions& options) const;
    bool patched_run_pending() const { return run_worker_.busy(); }
    // Back to the text's own run.
    void stop_showing_patched_run();

private:
    struct PatchingShown {
        std::optional<Patching> exact, estimate;
        std::string estimate_refusal;
        std::shared_ptr<const Model> model;
        TextIds clean, corrupted;
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
    inline static const std::string no_refusal_;
    std::optional<PatchingShown> patched_;
    std::optional<PatchedRun> run_;
    JobProgress forward_progress_, patching_progress_;
    // Last: their threads stop before the members their jobs' outcomes go to.
    Worker<LiveResult> forward_worker_{wake_};
    Worker<PatchingShown> patching_worker_{wake_};
    Worker<PatchedRun> run_worker_{wake_};
};

}  // namespace headscope
