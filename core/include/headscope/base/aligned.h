// Buffers that start on a 64-byte boundary (a cache line, an AVX-512
// vector). Eigen's vectorised sums peel the elements before the first
// aligned one, so where a buffer happens to land would change the order of
// a sum, and two runs of the same input could differ in the last bits.
// Every buffer that feeds such sums (the forward's activations and maps, the
// weights, the trainer's parameters) is one of these. C++17: the CUDA
// backend includes it.
#pragma once
#include <cstddef>
#include <new>
#include <vector>

namespace headscope {

inline constexpr std::size_t buffer_alignment = 64;

template <typename T>
struct AlignedAllocator {
    using value_type = T;
    AlignedAllocator() = default;
    template <typename U>
    AlignedAllocator(const AlignedAllocator<U>&) {}
    T* allocate(std::size_t n) {
        return static_cast<T*>(::operator new (n * sizeof(T), std::align_val_t{buffer_alignment}));
    }
    void deallocate(T* p, std::size_t) { ::operator delete (p, std::align_val_t{buffer_alignment}); }
    template <typename U>
    bool operator==(const AlignedAllocator<U>&) const {
        return true;
    }
    template <typename U>
    bool operator!=(const AlignedAllocator<U>&) const {
        return false;
    }
};

template <typename T>
using AlignedVector = std::vector<T, AlignedAllocator<T>>;

}  // namespace headscope
