// gpt-oss's experts, which its files pack per layer as MXFP4 blocks and
// scales with biases (Config::packed_experts), read into the Model (private
// to core/src/model).
#pragma once
#include <string>

#include "headscope/model/model.h"

namespace headscope {

// Every layer's packed experts from m.files, names, dtypes and shapes
// checked against the config (each problem one line naming `where` and the
// tensor): each expert's gate and up rows repacked as ggml's MXFP4 blocks
// into m.expert_blocks (gate's rows, then up's), its down's after them, the
// biases as float32 into m.expert_biases, the file's pages of the blocks and
// scales released once copied; listed in m.tensors and counted in m.params.
void read_packed_experts(Model& m, const std::string& where);

}  // namespace headscope
