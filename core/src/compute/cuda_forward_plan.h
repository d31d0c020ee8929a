// What the device's forward of a batch reads from the host, made by the
// CPU's own rules (cuda_forward_plan.cpp, compiled as C++ beside the CUDA
// code): the embedded rows, and each layer's visible keys, score rule and
// rotation table, so that the device applies no rule of its own. The device
// computes every row (it keeps no prefix cache yet).
// Legend: B batch, T padded length, C channels.
#pragma once
#include <string>
#include <vector>

#include "headscope/compute/attention.h"
#include "headscope/compute/forward.h"
#include "headscope/model/model.h"

namespace headscope {

struct DeviceLayerPlan {
    std::vector<int> key_begin, key_end;  // (B, T) the keys each query row sees (ScoreRule::visible)
    float scale = 1, softcap = 0;
    const float* sinks = nullptr;  // (NH) the layer's sinks, in model.storage; null: none
    RopeTable rope;                // positions [0, T); no dims: the layer rotates nothing
};

struct DeviceForwardPlan {
    HeadSplit split{};
    int B = 0, T = 0, layers_run = 0;
    bool every_layer = false;             // predictions, the lens: the last layer's MLP too
    std::vector<float> x;                 // (B T, C) each text's embedded rows, padded to T (embed_text)
    std::vector<int> lengths;             // (B)
    std::vector<int> positions;           // (B T) each row's position, for RoPE
    std::vector<DeviceLayerPlan> layers;  // (layers_run)
};

// Why the device does not compute a forward of `model` under `options`
// yet, in words for the result's computed_on ("" when it does).
std::string device_forward_refusal(const Model& model, const AttentionOptions& options);

// The plan of a validated forward whose result set_up_result shaped.
DeviceForwardPlan plan_device_forward(const Model& model, const Batch& batch, const AttentionOptions& options,
                                      const AttentionResult& result);

}  // namespace headscope
