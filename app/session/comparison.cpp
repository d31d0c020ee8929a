// The compare text and patching: see comparison.h.
#include "session/comparison.h"

#include <utility>

#include "headscope/base/error.h"
#include "headscope/compute/backward.h"

namespace headscope {

Batch TextIds::batch(const Model& model) const {
    Batch one{{tokens}, model.config.pad_id()};
    if (!source.empty()) one.source_ids = {source};
    if (!types.empty() && model.config.type_vocab_size > 0) one.token_types = {types};
    return one;
}

void Comparison::open(std::shared_ptr<const Model> model) {
    model_ = std::move(model);
    // The workers' jobs hold the old backend until they end.
    backend_ = std::shared_ptr<Backend>(make_cpu_backend());
    backend_->load_weights(*model_);
    cache_ = std::make_shared<PrefixCache>();
    shown_ = {};
    ++generation_;
    patched_.reset();
    run_.reset();
    message.clear();
    patching_message.clear();
}

void Comparison::submit(const std::string& text, const std::string& pair, const std::string& target,
                        const AttentionOptions& options) {
    if (text.empty()) {
        forward_worker_.submit([](std::stop_token) { return LiveResult{}; });  // ends any job running
        return;
    }
    AttentionOptions compared = options;
    compared.lens_k = 0, compared.contributions = compared.capture_outputs = false;
    forward_progress_.start();
    forward_worker_.submit([this, backend = backend_, model = model_, cache = cache_,
                            request = LiveRequest{{text}, compared, {pair}, {target}}](std::stop_token stop) {
        try {
            return compute_live(*backend, *model, request, cache.get(), forward_progress_.reporter(std::move(stop)));
        } catch (const Cancelled&) {
            cache->clear();  // half refilled
            throw;
        }
    });
}

void Comparison::compute_patching(const TextIds& clean, const TextIds& corrupted, const AttentionOptions& options,
                                  const PatchRequest& request, PatchMethod method) {
    patching_message.clear();
    patching_progress_.start();
    patching_worker_.submit(
        [this, backend = backend_, model = model_, clean, corrupted, options, request, method](std::stop_token stop) {
            PatchingShown made{{}, {}, {}, model, clean, corrupted, options};
            if (method != PatchMethod::attribution)
                backend->patch(clean.batch(*model), corrupted.batch(*model), options, request, made.exact.emplace(),
                               patching_progress_.reporter(std::move(stop)));
            if (method == PatchMethod::exact) return made;
            try {
                attribution_patch(*model, clean.batch(*model), corrupted.batch(*model), options, request,
                                  made.estimate.emplace());
            } catch (const Error& e) {
                if (method == PatchMethod::attribution) throw;
                made.estimate.reset();
                made.estimate_refusal = std::string("no estimate: ") + e.what();
            }
            return made;
        });
}

const Patching* Comparison::patching() const { return exact() ? exact() : estimate(); }

bool Comparison::patching_current(const TextIds& clean, const AttentionOptions& options) const {
    return patched_ && patched_->model == model_ && patched_->clean == clean && patched_->corrupted == ids() &&
           patched_->options == options;
}

namespace {

// What a patched run computes of the forward's options: its maps and predictions.
AttentionOptions run_options(AttentionOptions options) {
    options.lens_k = 0, options.contributions = options.capture_outputs = false;
    return options;
}

}  // namespace

void Comparison::compute_patched_run(const PatchCell& cell, const AttentionOptions& options) {
    if (!patched_) return;
    const PatchDirection direction = patching()->request.direction;
    run_worker_.submit([backend = backend_, model = model_, shown = *patched_, cell, direction,
                        options = run_options(options)](std::stop_token) {
        PatchedRun made{cell, direction, shown.clean, shown.corrupted, {}, options, {}, model};
        made.own = direction == PatchDirection::denoise ? shown.corrupted : shown.clean;
        backend->patched_run(shown.clean.batch(*model), shown.corrupted.batch(*model), options, direction, cell,
                             made.result);
        return made;
    });
}

const Comparison::PatchedRun* Comparison::patched_run(const TextIds& clean, const AttentionOptions& options) const {
    const bool current = run_ && run_->model == model_ && run_->clean == clean && run_->corrupted == ids() &&
                         run_->options == run_options(options);
    return current ? &*run_ : nullptr;
}

void Comparison::stop_showing_patched_run() {
    run_.reset();
    ++generation_;
}

bool Comparison::collect() {
    bool changed = false;
    if (std::optional<Worker<PatchedRun>::Outcome> done = run_worker_.take()) {
        if (!done->error.empty())
            patching_message = done->error;
        else if (done->result.model == model_)
            run_ = std::move(done->result);
        ++generation_;
        changed = true;
    }
    if (std::optional<Worker<PatchingShown>::Outcome> done = patching_worker_.take()) {
        if (!done->error.empty())
            patching_message = patching_progress_.cancelled() ? "patching was cancelled" : done->error;
        else if (done->result.model == model_)  // else another model's
            patched_ = std::move(done->result);
        changed = true;
    }
    if (std::optional<Worker<LiveResult>::Outcome> computed = forward_worker_.take()) {
        message = computed->error;  // a refused text shows none
        shown_ = computed->error.empty() ? std::move(computed->result) : LiveResult{};
        ++generation_;
        changed = true;
    }
    return changed;
}

}  // namespace headscope
