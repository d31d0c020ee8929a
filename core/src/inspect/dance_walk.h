// The reshape dance's writer (dance.cpp's internals): the steps it appends,
// the buffers they write and the stored weights of their projections.
#pragma once
#include <algorithm>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "headscope/base/ggml_types.h"
#include "headscope/inspect/dance.h"
#include "headscope/model/model.h"

namespace headscope::dance_walk {

inline int64_t dim_index(const std::vector<std::string>& dims, const std::string& name) {
    const auto it = std::find(dims.begin(), dims.end(), name);
    return it == dims.end() ? -1 : it - dims.begin();
}

inline std::string number(double value) {
    char text[32];
    std::snprintf(text, sizeof text, "%.10g", value);
    return text;
}

// "q_proj's weight, 2048 outputs by 2048 inputs, stored as Q4_K: each
// stored row of 2048 inputs is 1152 bytes, 8 blocks of 256 values in 144
// bytes each (...)": its shape, its stored rows and their blocks' fields.
inline std::string stored_weight(const std::string& module, const Matrix& w) {
    const GgmlTypeTraits& type = ggml_type_traits(ggml_type(w.dtype));
    const int64_t row = w.out_by_in ? w.in : w.out, blocks = row / type.block_elements;
    const std::string text = module + "'s weight, " + std::to_string(w.out) + " outputs by " + std::to_string(w.in) +
                             " inputs, stored as " + type.name + ": each stored row of " + std::to_string(row) +
                             (w.out_by_in ? " inputs" : " outputs") + " is " +
                             std::to_string(dtype_row_bytes(w.dtype, row)) + " bytes, ";
    if (type.block_elements == 1)
        return text + type.layout + " a value, " +
               (w.dtype == DType::F32 ? "read as it is by the product" : "widened to float32 inside the product");
    return text + std::to_string(blocks) + (blocks == 1 ? " block of " : " blocks of ") +
           std::to_string(type.block_elements) + " values in " + std::to_string(type.block_bytes) + " bytes each (" +
           type.layout + "), " + number(8.0 * type.block_bytes / type.block_elements) +
           " bits a weight, widened to float32 block by block inside the product";
}

// Appends to a Dance: the buffers as they are first written, the steps as
// views of them, and the stored weights of the steps' projections when the
// walk has its layer's.
class Walk {
public:
    Walk(Dance& d, const Config& config, const LayerWeights* layer) : d_(d), config_(config), layer_(layer) {}

    // A step that views memory already written.
    StridedLayout view(std::string title, std::string code, int buffer, std::vector<std::string> dims,
                       StridedLayout layout) {
        d_.steps.push_back({std::move(title), std::move(code), buffer, std::move(dims), std::move(layout), {}});
        return d_.steps.back().layout;
    }
    // A step on the memory the last step viewed.
    StridedLayout again(std::string title, std::string code, std::vector<std::string> dims, StridedLayout layout) {
        return view(std::move(title), std::move(code), d_.steps.back().buffer, std::move(dims), std::move(layout));
    }
    // A step that writes a new buffer, contiguously in `dims`; viewed as
    // `layout`, or as written when none is given.
    StridedLayout write(std::string title, std::string code, std::string name, std::vector<std::string> dims,
                        std::vector<int64_t> shape, bool kv = false, std::vector<std::string> view_dims = {},
                        std::optional<StridedLayout> layout = {}) {
        d_.buffers.push_back({std::move(name), dims, shape, kv});
        return view(std::move(title), std::move(code), static_cast<int>(d_.buffers.size()) - 1,
                    view_dims.empty() ? std::move(dims) : std::move(view_dims),
                    layout ? *layout : StridedLayout::contiguous(std::move(shape)));
    }
    // The weights the last step's projection multiplies by.
    void weigh(std::initializer_list<std::pair<Weight, Matrix LayerWeights::*>> weights) {
        if (!layer_) return;
        for (const auto& [weight, field] : weights)
            d_.steps.back().weights.push_back(stored_weight(module_name(config_, weight), layer_->*field));
    }
    // Q's projection: its own, or the fused [Q | K | V] one.
    void weigh_q() {
        if (config_.qkv_layout == QkvLayout::separate)
            weigh({{Weight::q_w, &LayerWeights::q}});
        else
            weigh({{Weight::attn_w, &LayerWeights::attn}});
    }
    void weigh_output() { weigh({{Weight::attn_proj_w, &LayerWeights::attn_proj}}); }

private:
    Dance& d_;
    const Config& config_;
    const LayerWeights* layer_;
};

}  // namespace headscope::dance_walk
