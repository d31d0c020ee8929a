// The few-rows products' kernels are specialised for each count of rows (1
// to 8) that share each decoded block of the weight: run(R, r0) for R rows
// from r0, R a compile-time constant, over every group of at most 8.
#pragma once
#include <algorithm>
#include <type_traits>

namespace headscope {

template <typename Run>
void for_row_groups(int rows, Run&& run) {
    constexpr int group = 8;
    for (int r0 = 0; r0 < rows; r0 += group) {
        switch (std::min(group, rows - r0)) {
            case 1: run(std::integral_constant<int, 1>{}, r0); break;
            case 2: run(std::integral_constant<int, 2>{}, r0); break;
            case 3: run(std::integral_constant<int, 3>{}, r0); break;
            case 4: run(std::integral_constant<int, 4>{}, r0); break;
            case 5: run(std::integral_constant<int, 5>{}, r0); break;
            case 6: run(std::integral_constant<int, 6>{}, r0); break;
            case 7: run(std::integral_constant<int, 7>{}, r0); break;
            default: run(std::integral_constant<int, 8>{}, r0); break;
        }
    }
}

}  // namespace headscope
