// A GPT-2 trainer on the CPU: the engine's forward ops (core's cpu_ops.h),
// hand-written backward passes and AdamW, over one flat parameter buffer in
// the layout of GPT-2's checkpoints. Templated on the scalar so the gradient
// check can run in double; training runs in float.
// Legend: B batch, T sequence length, C channels, NH heads, hs = C/NH, L layers, V vocab.
#pragma once
#include <Eigen/Core>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "headscope/base/aligned.h"
#include "headscope/model/model_description.h"

namespace headscope::train {

// Aligned buffers (core's aligned.h): two runs with the same seed give the same bits.
template <typename S>
using Buffer = AlignedVector<S>;

// Where each tensor of the model description lives in the flat buffer: back
// to back in model_tensors' order, the order of the checkpoint's data.
struct ParameterTensor {
    TensorSpec spec;
    size_t offset;  // into the flat buffer
    size_t size;    // element_count(spec.shape)
};
std::vector<ParameterTensor> parameter_layout(const Config& config);

struct AdamW {
    float learning_rate = 1e-3f;
    float beta1 = 0.9f, beta2 = 0.95f, eps = 1e-8f, weight_decay = 0.1f;
};

template <typename S>
class Gpt2Trainer {
public:
    // Uses the config's n_layer, n_head, n_embd, n_positions and vocab_size.
    Gpt2Trainer(const Config& config, uint64_t seed);

    // Mean cross-entropy of predicting targets (B, T) from inputs (B, T).
    S forward(const int32_t* inputs, const int32_t* targets, int B, int T);
    // Gradients of the last forward's loss into grads() (overwritten, not accumulated).
    void backward();
    void step(const AdamW& adamw, int step_number);

    const Config& config() const { return config_; }
    Buffer<S>& params() { return params_; }
    const Buffer<S>& params() const { return params_; }
    const Buffer<S>& grads() const { return grads_; }
    // The last forward's attention weights, (L, B, NH, T, T).
    const Buffer<S>& attention() const { return att_; }
    const std::vector<ParameterTensor>& layout() const { return layout_; }

private:
    // Pointers into params_ or grads_, named as Model's weights (gpt2_weight_pointer binds them).
    struct Layer {
        S *ln_1_w, *ln_1_b, *attn_w, *attn_b, *attn_proj_w, *attn_proj_b;
        S *ln_2_w, *ln_2_b, *fc_w, *fc_b, *fc_proj_w, *fc_proj_b;
    };
    struct Tensors {
        S *wte, *wpe, *ln_f_w, *ln_f_b;
        std::vector<Layer> layers;
    };
    Tensors tensors_in(Buffer<S>& buffer) const;
    void resize_activations(int B, int T);

    Config config_;
    std::vector<ParameterTensor> layout_;
    Buffer<S> params_, grads_, adam_m_, adam_v_;
    Tensors p_, g_;

    // Activations of the last forward, kept for the backward.
    int B_ = 0, T_ = 0;
    std::vector<int32_t> inputs_, targets_;  // (B, T)
    Buffer<S> residual_;                     // (L + 1, B, T, C): input of each layer, then the last output
    Buffer<S> ln_1_;                         // (L, B, T, C)
    Buffer<S> qkv_;                          // (L, B, T, 3C)
    Buffer<S> att_;                          // (L, B, NH, T, T) attention weights
    Buffer<S> att_y_;                        // (L, B, T, C) heads merged
    Buffer<S> residual_mid_;                 // (L, B, T, C) after the attention's residual add
    Buffer<S> ln_2_;                         // (L, B, T, C)
    Buffer<S> fc_;                           // (L, B, T, 4C) before GELU
    Buffer<S> fc_gelu_;                      // (L, B, T, 4C)
    Buffer<S> ln_f_;                         // (B, T, C)
    Buffer<S> probs_;                        // (B, T, V)
    // Backward scratch.
    Buffer<S> d_residual_, d_buffer_, d_qkv_, d_fc_, d_att_, d_logits_;
};

extern template class Gpt2Trainer<float>;
extern template class Gpt2Trainer<double>;

// Writes dir/model.safetensors (F32) and dir/config.json in Hugging Face's
// GPT-2 layout, with `record` as config.json's "headscope_training"; the
// tokenizer files are the caller's.
void save_gpt2(const Gpt2Trainer<float>& model, const std::filesystem::path& dir, const nlohmann::ordered_json& record);

}  // namespace headscope::train
