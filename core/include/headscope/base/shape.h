// Shapes as lists of dimensions: how many elements one holds, and how
// messages and labels write one.
#pragma once
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

namespace headscope {

// The product of the dimensions: 1 for a scalar's ().
inline int64_t element_count(const std::vector<int64_t>& shape) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
}

enum class Notation {
    python,  // a tuple, "(2, 8, 64)" and "(5,)": as PyTorch prints sizes and strides, and a .npy header holds them
    json,    // a list, "[2, 8, 64]": as config.json and a safetensors header hold them
};

// `dims` written out: sizes, strides, indices or offsets as numbers, or
// dimension names ("B", "T", "C") as they are.
template <typename Dim>
std::string shape_string(const std::vector<Dim>& dims, Notation notation = Notation::python) {
    std::string s = notation == Notation::python ? "(" : "[";
    for (size_t i = 0; i < dims.size(); ++i) {
        if (i) s += ", ";
        if constexpr (std::is_convertible_v<Dim, std::string>)
            s += dims[i];
        else
            s += std::to_string(dims[i]);
    }
    if (notation == Notation::json) return s + "]";
    return s + (dims.size() == 1 ? ",)" : ")");
}

}  // namespace headscope
