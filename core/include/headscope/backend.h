// A compute backend: loads a model's weights once, then runs the forward with
// attention capture. CPU (Eigen) always; CUDA when built and usable.
#pragma once
#include <memory>
#include <string>

#include "headscope/attention.h"
#include "headscope/model.h"

namespace headscope {

class Backend {
public:
    virtual ~Backend() = default;
    virtual std::string name() const = 0;
    // Keeps what it needs of `model`, which must outlive the backend.
    virtual void load_weights(const Model& model) = 0;
    // Validates the options and batch against the model (throws Error), then
    // fills `result`, reusing its storage.
    virtual void forward(const Batch& batch, const AttentionOptions& options, AttentionResult& result) = 0;
};

std::unique_ptr<Backend> make_cpu_backend();

// What every backend's forward checks first: the batch and options suit
// `model` (texts non-empty and within n_positions, ids in the vocabulary, the
// head count divides C, layers in range). Throws Error naming the problem.
void validate_forward(const Model& model, const Batch& batch, const AttentionOptions& options);

}  // namespace headscope
