// The reshape dance: see dance.h.
#include "headscope/dance.h"

#include <algorithm>
#include <cmath>

#include "headscope/error.h"

namespace headscope {

namespace {

int64_t dim_index(const std::vector<std::string>& dims, const std::string& name) {
    const auto it = std::find(dims.begin(), dims.end(), name);
    return it == dims.end() ? -1 : it - dims.begin();
}

}  // namespace

ElementOwner Dance::owner(int buffer, int64_t n) const {
    const DanceBuffer& buf = buffers.at(buffer);
    std::vector<int64_t> index(buf.shape.size());
    for (size_t d = buf.shape.size(); d-- > 0;) {
        index[d] = n % buf.shape[d];
        n /= buf.shape[d];
    }
    const int64_t hs = C / NH;
    const int64_t head_dim = dim_index(buf.dims, "NH");
    return {index[dim_index(buf.dims, "B")], index[dim_index(buf.dims, "T")],
            head_dim >= 0 ? index[head_dim] : index[dim_index(buf.dims, "C")] / hs};
}

Dance reshape_dance(int B, int T, int C, int NH, Split split) {
    if (B < 1 || T < 1 || C < 1 || NH < 1 || C % NH != 0) {
        throw Error("reshape dance: need positive B, T, C, NH with NH dividing C (got B=" + std::to_string(B) +
                    " T=" + std::to_string(T) + " C=" + std::to_string(C) + " NH=" + std::to_string(NH) + ")");
    }
    const int64_t hs = C / NH;
    Dance d{B, T, C, NH, split, {}, {}};
    auto buffer = [&](std::string name, std::vector<std::string> dims, std::vector<int64_t> shape) {
        d.buffers.push_back({std::move(name), std::move(dims), std::move(shape)});
        return static_cast<int>(d.buffers.size()) - 1;
    };
    auto step = [&](std::string title, std::string code, int buf, std::vector<std::string> dims, StridedLayout layout) {
        d.steps.push_back({std::move(title), std::move(code), buf, std::move(dims), std::move(layout)});
        return d.steps.back().layout;
    };

    const int q = buffer("q", {"B", "T", "C"}, {B, T, C});
    const StridedLayout q_flat =
        step("Q: the first C of the fused c_attn's 3C outputs, a (B, T, C) buffer",
             "q = x @ W_q + b_q  # c_attn's first C columns", q, {"B", "T", "C"}, StridedLayout::contiguous({B, T, C}));
    const int att = buffer("att", {"B", "NH", "T", "T_k"}, {B, NH, T, T});
    const int y = buffer("y", {"B", "NH", "T", "hs"}, {B, NH, T, hs});
    const StridedLayout att_layout = StridedLayout::contiguous({B, NH, T, T});
    const StridedLayout y_layout = StridedLayout::contiguous({B, NH, T, hs});

    if (split == Split::transpose) {
        const StridedLayout split_heads =
            step("view: each token's C channels become NH heads of hs; no data moves", "q = q.view(B, T, NH, hs)", q,
                 {"B", "T", "NH", "hs"}, q_flat.view({B, T, NH, hs}));
        step("transpose(1, 2): heads before tokens, only the strides swap; no longer contiguous",
             "q = q.transpose(1, 2)", q, {"B", "NH", "T", "hs"}, split_heads.transpose(1, 2));
        step("scores and weights per head: softmax(q k^T / sqrt(hs)), a new buffer",
             "att = softmax(q @ k.transpose(-2, -1) / sqrt(hs))", att, {"B", "NH", "T", "T_k"}, att_layout);
        step("weights times V, per head: a new buffer", "y = att @ v", y, {"B", "NH", "T", "hs"}, y_layout);
        step("transpose back: tokens before heads, only the strides swap", "y = y.transpose(1, 2)", y,
             {"B", "T", "NH", "hs"}, y_layout.transpose(1, 2));
        const int merged = buffer("y_merged", {"B", "T", "NH", "hs"}, {B, T, NH, hs});
        const StridedLayout copied =
            step("contiguous(): the copy that puts each token's heads side by side", "y = y.contiguous()", merged,
                 {"B", "T", "NH", "hs"}, StridedLayout::contiguous({B, T, NH, hs}));
        step("view back to (B, T, C), then the output projection mixes the heads", "y = c_proj(y.view(B, T, C))",
             merged, {"B", "T", "C"}, copied.view({B, T, C}));
    } else {
        step("view straight to (B, NH, T, hs): it succeeds, but each \"head\" now holds pieces of several tokens",
             "q = q.view(B, NH, T, hs)  # the bug", q, {"B", "NH", "T", "hs"}, q_flat.view({B, NH, T, hs}));
        step("scores and weights per \"head\": mixed tokens attend to mixed tokens",
             "att = softmax(q @ k.transpose(-2, -1) / sqrt(hs))", att, {"B", "NH", "T", "T_k"}, att_layout);
        step("weights times V, per \"head\"", "y = att @ v", y, {"B", "NH", "T", "hs"}, y_layout);
        step("view back to (B, T, C): succeeds silently, rows are not tokens' outputs",
             "y = c_proj(y.view(B, T, C))  # the bug", y, {"B", "T", "C"}, y_layout.view({B, T, C}));
    }
    return d;
}

}  // namespace headscope
