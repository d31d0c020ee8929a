// The reshape dance of multi-head attention, as strided views of the flat
// buffers the computation writes: which steps only give the same memory new
// strides and which write a new buffer. For the correct split (view, then
// transpose) and for the naive one (view straight to (B,NH,T,hs)).
// Legend: B batch, T tokens, C channels, NH heads, hs = C / NH.
#pragma once
#include <string>
#include <vector>

#include "headscope/attention.h"
#include "headscope/strided.h"

namespace headscope {

struct DanceBuffer {
    std::string name;               // "q", "att", "y", "y_merged"
    std::vector<std::string> dims;  // the dimensions it is written in, e.g. {"B", "NH", "T", "hs"}
    std::vector<int64_t> shape;     // written contiguously in this shape
};

struct DanceStep {
    std::string title;              // what happens, in words
    std::string code;               // the PyTorch line, e.g. "q = q.view(B, T, NH, hs)"
    int buffer;                     // index into Dance::buffers of the memory it views
    std::vector<std::string> dims;  // e.g. {"B", "T", "NH", "hs"}
    StridedLayout layout;
};

// Whose data an element of a buffer is: the batch entry, the token (query
// row for per-head results) and the head that wrote it. For the (B,T,C)
// projection, the head is the one whose channel slice holds it.
struct ElementOwner {
    int64_t b, t, head;
};

struct Dance {
    int B, T, C, NH;
    Split split;
    std::vector<DanceBuffer> buffers;
    std::vector<DanceStep> steps;

    // The owner of element n of buffer `buffer` (its n-th in storage order).
    ElementOwner owner(int buffer, int64_t n) const;
};

// Throws Error unless every size is positive and NH divides C.
Dance reshape_dance(int B, int T, int C, int NH, Split split);

}  // namespace headscope
