// A mixture of experts' routing of one row (cpu_experts.cpp), which the
// forward and the backward's kept forward (cpu_backward_experts.cpp) share.
// Legend: E experts, k experts per row.
#pragma once
#include <cstdint>
#include <vector>

#include "headscope/model/model_description.h"

namespace headscope {

// One row's router logits (E) -> its k experts by falling weight into
// `experts` and their weights into `weights` (Routing), a knocked-out
// expert's logit counting as -infinity; `order` is scratch.
void route_row(const float* logits, const Config& cfg, const std::vector<bool>& knocked_out, std::vector<int>& order,
               int32_t* experts, float* weights);

}  // namespace headscope
