// What a worker's job reports as it goes (core's progress.h), for the frame
// to draw: the job writes through reporter(), the frame reads shown(), under
// a mutex. Cancel asks the job to stop at its next report; the caller keeps
// what it had (the open model, no half-made figures).
#pragma once
#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <stop_token>

#include "headscope/base/progress.h"

namespace headscope {

class JobProgress {
public:
    // A compute shows its progress once it has run this long.
    static constexpr std::chrono::milliseconds long_work{300};
    explicit JobProgress(std::chrono::milliseconds shown_after = long_work) : shown_after_(shown_after) {}

    // A job was submitted: forgets the last one's reports and starts the clock.
    void start();
    // The job's callback: records each report, and throws Cancelled once
    // cancel() was asked or `stop` is (a newer job, the window closing).
    // Reports of a job older than the last start() are dropped.
    Progress reporter(std::stop_token stop);
    void cancel();
    // Whether the job started last was asked to cancel.
    bool cancelled() const;
    // The job's newest report once it has run for shown_after; else none.
    std::optional<ProgressReport> shown() const;
    // The seconds the job has left at the pace of its steps so far; none
    // before its first step is done, or once its last is.
    std::optional<double> seconds_left() const;

private:
    const std::chrono::milliseconds shown_after_;
    mutable std::mutex mutex_;
    uint64_t job_ = 0;  // start()s so far
    bool cancel_ = false;
    std::chrono::steady_clock::time_point started_;
    std::optional<ProgressReport> last_;
};

}  // namespace headscope
