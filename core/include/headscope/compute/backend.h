// A compute backend: loads a model's weights once, then runs the forward with
// attention capture. CPU (Eigen) always; CUDA when built and usable.
#pragma once
#include <memory>
#include <string>
#include <string_view>

#include "headscope/base/choices.h"
#include "headscope/base/progress.h"
#include "headscope/compute/attention.h"
#include "headscope/compute/head_effects.h"
#include "headscope/compute/patching.h"
#include "headscope/compute/prefix_cache.h"
#include "headscope/model/model.h"

namespace headscope {

class Backend {
public:
    virtual ~Backend() = default;
    virtual std::string name() const = 0;
    // Keeps what it needs of `model`, which must outlive the backend.
    virtual void load_weights(const Model& model) = 0;
    // Validates the options and batch against the model (validate_forward,
    // throws Error), then fills `result`, reusing its storage. With `cache`
    // (prefix_cache.h), reuses what it holds where it can and leaves this
    // forward's state in it; a backend that cannot reuse computes everything
    // and empties it. result.computed_on says which device computed it and,
    // where that is not this backend's, why (every backend sets it). `progress` hears "computing layers" before each
    // layer the CPU computes; Cancelled thrown by it ends the forward: `result` is then to be discarded,
    // and `cache` keeps the rows the forward reused (PrefixCache::keep_rows).
    virtual void forward(const Batch& batch, const AttentionOptions& options, AttentionResult& result,
                         PrefixCache* cache = nullptr, const Progress& progress = {}) = 0;
    // The effects grid of one text of at least two tokens (head_effects.h)
    // under `options` (its masks, split, scale, window and knocked-out
    // heads and experts; the rest is the grid's), of each head or of each
    // expert (a model without experts throws). `progress` hears "knocking out
    // heads" ("... experts") before each cell; Cancelled thrown by it ends
    // the work. `method` (head_effects.h) estimates the cells first where the
    // backward follows the model and the options (else says why in
    // effects.fallback and runs every knock-out), and hands each stage of the
    // grid to `on_update`. Throws Error (as does a backend that has no grid).
    virtual void head_effects(const Batch& batch, const AttentionOptions& options, HeadEffects& effects,
                              EffectsOf of = EffectsOf::heads, const Progress& progress = {},
                              EffectsMethod method = EffectsMethod::exact, const EffectsUpdate& on_update = {});
    // Exact activation patching (patching.h) of one clean and one corrupted
    // text of the same length (an encoder–decoder's: its sources of the same
    // length, and its targets) under `options` (its masks, scale, window and
    // knocked-out heads and experts, in every run; the view + transpose
    // split). `progress` hears each run's "computing layers", then
    // "patching heads" ("... residual stream", ...; an encoder–decoder's
    // "patching the encoder's heads", ...) before each cell;
    // Cancelled thrown by it ends the work and leaves `patching` as it was.
    // Throws Error (checked_patch_request's, and a backend that cannot patch).
    virtual void patch(const Batch& clean, const Batch& corrupted, const AttentionOptions& options,
                       const PatchRequest& request, Patching& patching, const Progress& progress = {});
    // One cell's patched run, whole: the run being patched (the corrupted
    // text when denoising, the clean one when noising) with `cell`'s
    // activation copied from the other run, as forward() gives it under
    // `options` (its maps, those of a patched pattern the other run's, and
    // its predictions); the same run as patch() measures. `progress` hears
    // each run's "computing layers". Throws Error as patch() does, and for a
    // cell outside the grids.
    virtual void patched_run(const Batch& clean, const Batch& corrupted, const AttentionOptions& options,
                             PatchDirection direction, const PatchCell& cell, AttentionResult& result,
                             const Progress& progress = {});
};

std::unique_ptr<Backend> make_cpu_backend();

// Which backend to run on, as the command lines and the window choose it.
enum class BackendChoice { automatic, cpu, cuda };
inline constexpr Choices<BackendChoice, 3> backend_choices = {
    "backend", {"auto", "cpu", "cuda"}, {"auto", "cpu", "cuda"}};
BackendChoice parse_backend_choice(std::string_view word);  // a word of backend_choices; throws Error
const char* to_string(BackendChoice choice);

struct BackendPick {
    std::unique_ptr<Backend> backend;
    // Why this backend, for the user: "cpu chosen", "built without CUDA",
    // "no CUDA device", "driver too old for this build", "<device> is sm_70,
    // older than this build's sm_75", or the CUDA device's name.
    std::string reason;
};

// automatic: CUDA when the build has it and a usable device exists (and
// starts), else the CPU. cuda without a usable device throws Error saying why.
BackendPick make_backend(BackendChoice choice);

// What a report names as the reason for the device that computed a result:
// why the forward fell back, else why the backend was picked.
inline std::string device_reason(const ComputedOn& on, const std::string& pick_reason) {
    return on.fallback.empty() ? pick_reason : on.fallback;
}

// A model with its weights loaded into a backend: what the window's session
// and every command of headscope-cli run on. The backend points into the
// model, so it is declared after it (and goes first).
struct LoadedModel {
    std::string name;  // as the user named it (builtin, a hub name, an absolute directory)
    std::shared_ptr<const Model> model;
    std::unique_ptr<Backend> backend;
    std::string backend_reason;                               // why this backend (make_backend's reason)
    BackendChoice backend_choice = BackendChoice::automatic;  // as the user chose; the next model keeps it
    double load_ms = 0;                                       // load_model's time
};

// The one way to open a model to compute on: make_backend(choice), then
// load_model (passing `progress` on) and the backend's load_weights. Throws Error.
LoadedModel load_with_backend(const std::string& name_or_path, BackendChoice choice, const Progress& progress = {});
// `open`'s model (shared, not loaded again) on the backend `choice` picks. Throws Error.
LoadedModel with_backend(const LoadedModel& open, BackendChoice choice);

}  // namespace headscope
