// Progress reports in words: see progress.h.
#include "headscope/base/progress.h"

#include <cstdio>

namespace headscope {

std::string progress_text(const ProgressReport& report) {
    char numbers[64];
    if (report.unit == ProgressUnit::bytes)
        std::snprintf(numbers, sizeof numbers, "%.1f of %.1f MB", report.done / 1e6, report.total / 1e6);
    else
        std::snprintf(numbers, sizeof numbers, "%lld of %lld", static_cast<long long>(report.done),
                      static_cast<long long>(report.total));
    return report.what + ": " + numbers;
}

}  // namespace headscope
