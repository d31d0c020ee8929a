#include "session.h"

#include <GLFW/glfw3.h>

#include "headscope/error.h"

namespace headscope {

Session::Session(Model model, std::vector<std::string> texts_in, AttentionOptions options_in)
    : texts(std::move(texts_in)), options(std::move(options_in)),
      model_(std::make_unique<Model>(std::move(model))), backend_(make_cpu_backend()) {
    if (texts.empty()) texts.push_back("The cat sat on the mat because it was soft.");
    backend_->load_weights(*model_);
    // A finished compute wakes the window's event loop: the maps show without waiting for input.
    live_ = std::make_unique<LiveCompute>(*backend_, *model_, [] { glfwPostEmptyEvent(); });
    submit();
    // Its own backend: the live worker's is busy with every keystroke.
    probes_future_ = std::async(std::launch::async, [model = model_.get()]() -> std::optional<ProbeReport> {
        try {
            std::unique_ptr<Backend> backend = make_cpu_backend();
            backend->load_weights(*model);
            return probe_heads(*backend, *model, validation_windows(*model, 8));
        } catch (const Error&) {
            return std::nullopt;  // labels without scores
        }
    });
}

void Session::submit() {
    live_->submit({texts, options});
    submitted_options_ = options;
}

bool Session::collect() {
    if (probes_future_.valid() && probes_future_.wait_for(std::chrono::seconds(0)) == std::future_status::ready)
        probes_ = probes_future_.get();
    std::optional<LiveResult> result = live_->take();
    if (!result) return false;
    if (!result->error.empty()) {
        message = result->error;
        return false;
    }
    message.clear();
    shown = std::move(*result);
    shown_options = submitted_options_;  // a result always answers the newest request
    ++shown_generation;
    selected = std::min(selected, static_cast<int>(shown.token_ids.size()) - 1);
    layer = std::min(layer, static_cast<int>(shown.attention.layers.size()) - 1);
    head = std::min(head, shown.attention.NH - 1);
    return true;
}

}  // namespace headscope
