// How a model's weights are stored (model.h's weight_storage and
// storage_summary): each type's count of tensors and the bits per weight.
#include <cstdio>
#include <string>

#include "headscope/model/model.h"

namespace headscope {

WeightStorage weight_storage(const Model& model) {
    WeightStorage storage;
    int64_t bytes = 0, weights = 0;
    for (const TensorInfo& t : model.tensors) {
        ++storage.tensors_by_dtype[to_string(t.dtype)];
        bytes += t.bytes;
        weights += element_count(t.shape);
    }
    storage.bits_per_weight = weights ? 8.0 * static_cast<double>(bytes) / static_cast<double>(weights) : 0;
    return storage;
}

std::string storage_summary(const Model& model) {
    const WeightStorage storage = weight_storage(model);
    if (!model.file_type.empty()) {
        char bits[64];
        std::snprintf(bits, sizeof bits, ", %.2g bits per weight", storage.bits_per_weight);
        return model.file_type + bits;
    }
    std::string dtypes;
    for (const auto& [dtype, count] : storage.tensors_by_dtype) dtypes += (dtypes.empty() ? "" : " and ") + dtype;
    return dtypes;
}

}  // namespace headscope
