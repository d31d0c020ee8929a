#include "session.h"

#include <GLFW/glfw3.h>

#include <chrono>
#include <filesystem>

#include "headscope/error.h"

namespace headscope {

LoadedModel load_with_backend(const std::string& name_or_path, BackendChoice choice,
                              const std::function<void(float)>& on_progress) {
    const auto start = std::chrono::steady_clock::now();
    LoadedModel loaded;
    loaded.model = std::make_unique<Model>(load_model(name_or_path, on_progress));
    loaded.load_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    BackendPick pick = make_backend(choice);
    loaded.backend = std::move(pick.backend);
    loaded.backend_reason = std::move(pick.reason);
    loaded.backend_choice = choice;
    loaded.backend->load_weights(*loaded.model);
    // A directory is remembered absolute: the settings reopen it from anywhere.
    std::error_code ec;
    loaded.name = name_or_path != builtin_model && std::filesystem::is_directory(name_or_path, ec)
                      ? std::filesystem::absolute(name_or_path).lexically_normal().string()
                      : name_or_path;
    return loaded;
}

Session::Session(LoadedModel loaded, std::vector<std::string> texts_in, AttentionOptions options_in)
    : texts(std::move(texts_in)), options(std::move(options_in)) {
    if (texts.empty()) texts.push_back("The cat sat on the mat because it was soft.");
    install(std::move(loaded));
}

void Session::install(LoadedModel loaded) {
    live_.reset();
    open_.backend.reset();  // before the model it points at
    open_ = std::move(loaded);
    shown = {};
    ++shown_generation;
    message.clear();
    probes_.reset();

    // A finished compute wakes the window's event loop: the maps show without waiting for input.
    live_ = std::make_unique<LiveCompute>(*open_.backend, *open_.model, [] { glfwPostEmptyEvent(); });
    submit();
    probes_future_ = std::async(std::launch::async, [model = open_.model.get()]() -> std::optional<ProbeReport> {
        try {
            return probe_validation(*model, 8);
        } catch (const std::exception&) {
            return std::nullopt;  // labels without scores
        }
    });
}

void Session::submit() {
    live_->submit({texts, options});
    submitted_texts_ = texts;
    submitted_options_ = options;
}

void Session::choose_backend(BackendChoice choice) {
    model_message.clear();
    LoadedModel loaded;
    try {
        BackendPick pick = make_backend(choice);
        pick.backend->load_weights(*open_.model);
        loaded.backend = std::move(pick.backend);
        loaded.backend_reason = std::move(pick.reason);
    } catch (const Error& e) {
        model_message = e.what();
        return;
    }
    loaded.backend_choice = choice;
    loaded.name = open_.name;
    loaded.load_ms = open_.load_ms;
    loaded.model = std::move(open_.model);  // the same Model object: pointers into it stay valid
    install(std::move(loaded));
}

void Session::open_model(const std::string& name_or_path) {
    if (!loading_.empty()) {  // one load at a time
        model_message = "still loading " + loading_ + ": open " + name_or_path + " again when it is done";
        return;
    }
    loading_ = name_or_path;
    load_progress_ = 0;
    model_message.clear();
    load_future_ = std::async(std::launch::async, [this, name_or_path, choice = open_.backend_choice] {
        // Wakes the window when done, loaded or not, so no frame waits to show it.
        const std::unique_ptr<void, void (*)(void*)> wake(this, [](void*) { glfwPostEmptyEvent(); });
        return load_with_backend(name_or_path, choice, [this](float fraction) { load_progress_ = fraction; });
    });
}

bool Session::collect() {
    if (probes_future_.valid() && probes_future_.wait_for(std::chrono::seconds(0)) == std::future_status::ready)
        probes_ = probes_future_.get();
    std::erase_if(model_readers_, [](const std::shared_future<void>& work) {
        return work.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
    });
    // The probes and the model readers read the open model: it is replaced only once they are done.
    if (load_future_.valid() && !probes_future_.valid() && model_readers_.empty() &&
        load_future_.wait_for(std::chrono::seconds(0)) == std::future_status::ready) {
        LoadedModel loaded;
        try {
            loaded = load_future_.get();
        } catch (const std::exception& e) {  // Error, or bad_alloc for a model too large
            model_message = std::string("cannot open the model: ") + e.what();
            loading_.clear();
            return false;
        }
        loading_.clear();
        model_message.clear();  // a "still loading" note is answered
        // Keep the options that still mean something for the new model.
        const Config& config = loaded.model->config;
        if (options.n_head && (config.n_embd % options.n_head || options.n_head == config.n_head)) options.n_head = 0;
        layer = std::min(layer, config.n_layer - 1);
        install(std::move(loaded));
        return true;
    }
    std::optional<LiveResult> result = live_->take();
    if (!result) return false;
    if (!result->error.empty()) {
        message = result->error;
        return false;
    }
    message.clear();
    shown = std::move(*result);
    shown_texts = submitted_texts_;  // a result always answers the newest request
    shown_options = submitted_options_;
    ++shown_generation;
    selected = std::min(selected, static_cast<int>(shown.token_ids.size()) - 1);
    layer = std::min(layer, static_cast<int>(shown.attention.layers.size()) - 1);
    head = std::min(head, shown.attention.NH - 1);
    return true;
}

}  // namespace headscope
