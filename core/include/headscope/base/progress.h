// How long work (a model load, the checks, the head probes, a generation)
// says how far it has got, and how it is cancelled: the work calls a Progress
// callback at the start and after each step; a callback that throws Cancelled
// ends the work there, and the work leaves nothing half-made behind (a load
// returns no model, a check no figures), so the caller keeps what it had.
#pragma once
#include <cstdint>
#include <functional>
#include <string>

#include "headscope/base/error.h"

namespace headscope {

enum class ProgressUnit { bytes, steps };

struct ProgressReport {
    std::string what;             // what is happening, in words: "reading the weights"
    int64_t done = 0, total = 0;  // 0 <= done <= total; done == total when the stage ends
    ProgressUnit unit = ProgressUnit::steps;
};

using Progress = std::function<void(const ProgressReport&)>;

// Thrown by a Progress callback to stop the work it watches.
struct Cancelled : Error {
    Cancelled() : Error("cancelled") {}
};

// Calls `progress`, if set, with the report.
inline void report_progress(const Progress& progress, std::string what, int64_t done, int64_t total,
                            ProgressUnit unit) {
    if (progress) progress({std::move(what), done, total, unit});
}

// The report as a person reads it: "reading the weights: 12.5 of 498.0 MB",
// "scoring heads: 3 of 40".
std::string progress_text(const ProgressReport& report);

}  // namespace headscope
