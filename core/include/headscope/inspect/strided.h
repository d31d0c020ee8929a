// A PyTorch-style strided view of a flat buffer (shape, strides, storage
// offset), with the operations multi-head attention uses on it: `view`,
// which only succeeds where PyTorch's does, `transpose`, which only swaps
// strides, `narrow` (a piece of a fused projection's split), and
// grouped-query attention's `unsqueeze` and `expand`, which repeat memory
// through a stride of 0. The reshape dance (dance.h) is described with these.
#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "headscope/base/shape.h"  // shape_string writes a layout's shape and strides

namespace headscope {

struct StridedLayout {
    std::vector<int64_t> shape;
    std::vector<int64_t> strides;  // in elements
    int64_t offset = 0;            // storage offset, in elements

    // Row-major: the last dimension has stride 1.
    static StridedLayout contiguous(std::vector<int64_t> shape);

    int64_t numel() const;
    // As PyTorch's is_contiguous(): strides are row-major, ignoring dimensions of size 1.
    bool is_contiguous() const;
    // Where element `index` (one entry per dimension) lives in the buffer.
    int64_t storage_index(std::span<const int64_t> index) const;
    // The same for the n-th element in row-major order of `shape`.
    int64_t storage_index(int64_t n) const;
    // The inverse: the index (one entry per dimension) of the element at
    // `storage`, for an element the layout reads (`reads`) of a contiguous
    // buffer seen through views, transposes, expands and narrowing. Along a
    // dimension of stride 0 every index holds the element: the first, 0, is given.
    std::vector<int64_t> index_of(int64_t storage) const;
    // Whether some index of the layout is at `storage` (a narrowed layout
    // skips the rest of its buffer).
    bool reads(int64_t storage) const;

    // The same elements seen with `new_shape`, sharing the storage, as
    // PyTorch's Tensor.view: throws Error where PyTorch would (a dimension
    // that spans two non-contiguous runs of memory), or on a size mismatch.
    StridedLayout view(const std::vector<int64_t>& new_shape) const;
    // The same, but none where PyTorch's view refuses: then Tensor.reshape
    // copies into a new buffer. Throws Error on a size mismatch.
    std::optional<StridedLayout> try_view(const std::vector<int64_t>& new_shape) const;
    StridedLayout transpose(int dim0, int dim1) const;
    // Indices [start, start + length) of dimension `dim`, sharing the storage,
    // as PyTorch's Tensor.narrow (each piece of Tensor.split is one): the
    // same strides, the offset moved. Throws Error outside the dimension.
    StridedLayout narrow(int dim, int64_t start, int64_t length) const;
    // A new dimension of size 1 before `dim` (0..rank), as PyTorch's unsqueeze or x[:, None].
    StridedLayout unsqueeze(int dim) const;
    // As PyTorch's Tensor.expand: each dimension of size 1 that `new_shape`
    // makes larger gets stride 0, so every index along it reads the same
    // memory and no float is copied. Throws Error on any other size change.
    StridedLayout expand(const std::vector<int64_t>& new_shape) const;
};

}  // namespace headscope
