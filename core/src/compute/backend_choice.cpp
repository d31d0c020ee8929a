// The one place that picks a backend and says why, and opens a model on it
// (CLI and window).
#include <filesystem>
#include <string>

#include "headscope/base/clock.h"
#include "headscope/base/error.h"
#include "headscope/compute/backend.h"
#include "headscope/compute/cuda_backend.h"

namespace headscope {

void Backend::head_effects(const Batch&, const AttentionOptions&, HeadEffects&, EffectsOf, const Progress&,
                           EffectsMethod, const EffectsUpdate&) {
    throw Error("the " + name() + " backend computes no effects grid");
}

void Backend::patch(const Batch&, const Batch&, const AttentionOptions&, const PatchRequest&, Patching&,
                    const Progress&) {
    throw Error("the " + name() + " backend does no activation patching");
}

void Backend::patched_run(const Batch&, const Batch&, const AttentionOptions&, PatchDirection, const PatchCell&,
                          AttentionResult&, const Progress&) {
    throw Error("the " + name() + " backend does no activation patching");
}

BackendChoice parse_backend_choice(std::string_view word) { return parse_choice(backend_choices, word); }

const char* to_string(BackendChoice choice) { return word_of(backend_choices, choice); }

BackendPick make_backend(BackendChoice choice) {
    if (choice == BackendChoice::cpu) return {make_cpu_backend(), "cpu chosen"};
    const CudaStatus cuda = cuda_status();
    if (!cuda.usable) {
        if (choice == BackendChoice::cuda) throw Error("the CUDA backend is not usable: " + cuda.reason);
        return {make_cpu_backend(), cuda.reason};
    }
    try {
        return {make_cuda_backend(), cuda.reason};
    } catch (const Error& e) {  // a device that cannot start (out of memory, cuBLAS failing)
        if (choice == BackendChoice::cuda) throw;
        return {make_cpu_backend(), std::string("CUDA failed: ") + e.what()};
    }
}

namespace {

// `loaded`'s model on the backend `pick` made, as `choice` asked.
void attach(LoadedModel& loaded, BackendPick pick, BackendChoice choice) {
    loaded.backend = std::move(pick.backend);
    loaded.backend_reason = std::move(pick.reason);
    loaded.backend_choice = choice;
    loaded.backend->load_weights(*loaded.model);
}

}  // namespace

LoadedModel with_backend(const LoadedModel& open, BackendChoice choice) {
    LoadedModel loaded;
    loaded.name = open.name;
    loaded.model = open.model;
    loaded.load_ms = open.load_ms;
    attach(loaded, make_backend(choice), choice);
    return loaded;
}

LoadedModel load_with_backend(const std::string& name_or_path, BackendChoice choice, const Progress& progress) {
    BackendPick pick = make_backend(choice);  // a backend that cannot start fails before the load
    const auto start = Clock::now();
    LoadedModel loaded;
    loaded.model = std::make_shared<const Model>(load_model(name_or_path, progress));
    loaded.load_ms = ms_since(start);
    attach(loaded, std::move(pick), choice);
    // A directory is remembered absolute: the settings reopen it from anywhere.
    std::error_code ec;
    loaded.name = name_or_path != builtin_model && std::filesystem::is_directory(name_or_path, ec)
                      ? std::filesystem::absolute(name_or_path).lexically_normal().string()
                      : name_or_path;
    return loaded;
}

}  // namespace headscope
