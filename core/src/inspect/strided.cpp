// Strided views: see strided.h.
#include "headscope/inspect/strided.h"

#include <algorithm>
#include <numeric>
#include <utility>

#include "headscope/base/error.h"

namespace headscope {

namespace {

void check_dims(const std::vector<int64_t>& dims) {
    for (int64_t d : dims)
        if (d < 1) throw Error("shape " + shape_string(dims) + " has a dimension below 1");
}

}  // namespace

StridedLayout StridedLayout::contiguous(std::vector<int64_t> shape) {
    check_dims(shape);
    StridedLayout layout{std::move(shape), {}, 0};
    layout.strides.resize(layout.shape.size());
    int64_t stride = 1;
    for (size_t d = layout.shape.size(); d-- > 0;) {
        layout.strides[d] = stride;
        stride *= layout.shape[d];
    }
    return layout;
}

int64_t StridedLayout::numel() const { return element_count(shape); }

bool StridedLayout::is_contiguous() const {
    int64_t expected = 1;
    for (size_t d = shape.size(); d-- > 0;) {
        if (shape[d] == 1) continue;
        if (strides[d] != expected) return false;
        expected *= shape[d];
    }
    return true;
}

int64_t StridedLayout::storage_index(std::span<const int64_t> index) const {
    int64_t at = offset;
    for (size_t d = 0; d < shape.size(); ++d) at += index[d] * strides[d];
    return at;
}

int64_t StridedLayout::storage_index(int64_t n) const {
    int64_t at = offset;
    for (size_t d = shape.size(); d-- > 0;) {
        at += (n % shape[d]) * strides[d];
        n /= shape[d];
    }
    return at;
}

// The dimensions from the largest stride down each take their share of what
// is left: dense storage is a mixed-radix number in that order.
std::vector<int64_t> StridedLayout::index_of(int64_t storage) const {
    std::vector<size_t> order(shape.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return strides[a] > strides[b]; });
    std::vector<int64_t> index(shape.size(), 0);
    int64_t rest = storage - offset;
    for (size_t d : order) {
        if (shape[d] == 1 || strides[d] == 0) continue;  // index 0 holds the element
        index[d] = rest / strides[d];
        rest %= strides[d];
    }
    return index;
}

bool StridedLayout::reads(int64_t storage) const {
    if (storage < offset) return false;
    const std::vector<int64_t> index = index_of(storage);
    for (size_t d = 0; d < shape.size(); ++d)
        if (index[d] >= shape[d]) return false;
    return storage_index(index) == storage;
}

StridedLayout StridedLayout::view(const std::vector<int64_t>& new_shape) const {
    std::optional<StridedLayout> out = try_view(new_shape);
    if (!out) {
        throw Error("view " + shape_string(new_shape) + " of shape " + shape_string(shape) + " with strides " +
                    shape_string(strides) +
                    ": a dimension would span memory that is not contiguous (call contiguous() first)");
    }
    return *out;
}

// Walks the old dimensions from the last, in chunks that are one run of
// memory each; the new dimensions must split every chunk exactly, and each
// gets its stride within the chunk. A new dimension straddling two chunks is
// the case PyTorch refuses.
std::optional<StridedLayout> StridedLayout::try_view(const std::vector<int64_t>& new_shape) const {
    check_dims(new_shape);
    if (element_count(new_shape) != numel()) {
        throw Error("view " + shape_string(new_shape) + ": shape " + shape_string(shape) + " has " +
                    std::to_string(numel()) + " elements, not " + std::to_string(element_count(new_shape)));
    }
    StridedLayout out{new_shape, std::vector<int64_t>(new_shape.size()), offset};
    int view_d = static_cast<int>(new_shape.size()) - 1;
    int64_t chunk_base_stride = strides.back(), chunk_numel = 1, view_numel = 1;
    for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
        chunk_numel *= shape[d];
        const bool chunk_ends = d == 0 || (shape[d - 1] != 1 && strides[d - 1] != chunk_numel * chunk_base_stride);
        if (!chunk_ends) continue;
        while (view_d >= 0 && (view_numel < chunk_numel || new_shape[view_d] == 1)) {
            out.strides[view_d] = view_numel * chunk_base_stride;
            view_numel *= new_shape[view_d];
            --view_d;
        }
        if (view_numel != chunk_numel) return std::nullopt;
        if (d > 0) {
            chunk_base_stride = strides[d - 1];
            chunk_numel = view_numel = 1;
        }
    }
    return out;
}

StridedLayout StridedLayout::transpose(int dim0, int dim1) const {
    const int rank = static_cast<int>(shape.size());
    if (dim0 < 0 || dim0 >= rank || dim1 < 0 || dim1 >= rank)
        throw Error("transpose(" + std::to_string(dim0) + ", " + std::to_string(dim1) + ") of a " +
                    std::to_string(rank) + "-d tensor");
    StridedLayout out = *this;
    std::swap(out.shape[dim0], out.shape[dim1]);
    std::swap(out.strides[dim0], out.strides[dim1]);
    return out;
}

StridedLayout StridedLayout::narrow(int dim, int64_t start, int64_t length) const {
    const int rank = static_cast<int>(shape.size());
    if (dim < 0 || dim >= rank || start < 0 || length < 1 || start + length > shape[dim])
        throw Error("narrow(" + std::to_string(dim) + ", " + std::to_string(start) + ", " + std::to_string(length) +
                    ") of shape " + shape_string(shape));
    StridedLayout out = *this;
    out.shape[dim] = length;
    out.offset += start * strides[dim];
    return out;
}

StridedLayout StridedLayout::unsqueeze(int dim) const {
    const int rank = static_cast<int>(shape.size());
    if (dim < 0 || dim > rank)
        throw Error("unsqueeze(" + std::to_string(dim) + ") of a " + std::to_string(rank) + "-d tensor");
    StridedLayout out = *this;
    // PyTorch's choice: the stride that steps over the whole dimension after it.
    const int64_t stride = dim < rank ? shape[dim] * strides[dim] : 1;
    out.shape.insert(out.shape.begin() + dim, 1);
    out.strides.insert(out.strides.begin() + dim, stride);
    return out;
}

StridedLayout StridedLayout::expand(const std::vector<int64_t>& new_shape) const {
    check_dims(new_shape);
    if (new_shape.size() != shape.size())
        throw Error("expand " + shape_string(new_shape) + " of shape " + shape_string(shape) + ": not the same rank");
    StridedLayout out = *this;
    for (size_t d = 0; d < shape.size(); ++d) {
        if (new_shape[d] == shape[d]) continue;
        if (shape[d] != 1)
            throw Error("expand " + shape_string(new_shape) + " of shape " + shape_string(shape) +
                        ": only a dimension of size 1 can grow");
        out.shape[d] = new_shape[d];
        out.strides[d] = 0;
    }
    return out;
}

}  // namespace headscope
