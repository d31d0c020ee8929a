// What every view of the window works on: the open model with its backend
// and live worker, the batch of texts, the options the controls set, the
// last finished compute, and what the user has selected.
#pragma once
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "headscope/backend.h"
#include "headscope/live.h"
#include "headscope/model.h"
#include "headscope/probes.h"

namespace headscope {

class Session {
public:
    Session(Model model, std::vector<std::string> texts, AttentionOptions options);

    const Model& model() const { return *model_; }
    const Backend& backend() const { return *backend_; }
    bool busy() const { return live_->busy(); }

    // Recomputes for the current texts and options (never waits).
    void submit();
    // Takes a finished compute: true when `shown` changed. A refused request
    // (bad text, too long, ...) sets `message` and keeps the last good maps.
    bool collect();

    std::vector<std::string> texts;  // the batch, padded to the longest; never empty
    int selected = 0;                // the text the views show
    AttentionOptions options;        // as the controls say now
    int layer = 0, head = 0;         // the selected map

    LiveResult shown;                // the last good compute (weights empty before the first)
    AttentionOptions shown_options;  // what `shown` was computed with
    uint64_t shown_generation = 0;   // changes whenever `shown` does
    std::string message;             // why the last request was refused; empty when it was not

    // The model's own heads scored by core's probes, computed in the
    // background once per model; null until ready (or if they cannot be).
    const ProbeReport* probes() const { return probes_ ? &*probes_ : nullptr; }
    bool probes_pending() const { return probes_future_.valid(); }

    int heads_shown() const { return shown.attention.NH; }
    int length(int b) const { return static_cast<int>(shown.token_ids[b].size()); }

private:
    std::unique_ptr<Model> model_;  // on the heap: the backend and worker keep pointers to it
    std::unique_ptr<Backend> backend_;
    std::unique_ptr<LiveCompute> live_;
    AttentionOptions submitted_options_;
    std::future<std::optional<ProbeReport>> probes_future_;
    std::optional<ProbeReport> probes_;
};

}  // namespace headscope
