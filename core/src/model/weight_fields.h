// The loader's map from a tensor of the model description (TensorSpec) to
// the Model field it fills (private to core/src/model).
#pragma once
#include "headscope/model/model.h"

namespace headscope {

// Model's field for a matrix weight (null for a vector: vector_field); its
// layer's experts must be sized.
Matrix* matrix_field(Model& m, const TensorSpec& t);
// And for a vector weight.
const float*& vector_field(Model& m, const TensorSpec& t);
// Whether `weight` is a norm's scale, to which a Gemma's norm_offset is added.
bool norm_scale(Weight weight);

}  // namespace headscope
