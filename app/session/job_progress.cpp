// A worker job's progress for the frame: see job_progress.h.
#include "session/job_progress.h"

namespace headscope {

void JobProgress::start() {
    std::lock_guard lock(mutex_);
    ++job_;
    cancel_ = false;
    started_ = std::chrono::steady_clock::now();
    last_.reset();
}

Progress JobProgress::reporter(std::stop_token stop) {
    uint64_t job;
    {
        std::lock_guard lock(mutex_);
        job = job_;
    }
    return [this, job, stop = std::move(stop)](const ProgressReport& report) {
        std::lock_guard lock(mutex_);
        if (stop.stop_requested() || (job == job_ && cancel_)) throw Cancelled();
        if (job == job_) last_ = report;
    };
}

void JobProgress::cancel() {
    std::lock_guard lock(mutex_);
    cancel_ = true;
}

bool JobProgress::cancelled() const {
    std::lock_guard lock(mutex_);
    return cancel_;
}

std::optional<ProgressReport> JobProgress::shown() const {
    std::lock_guard lock(mutex_);
    if (std::chrono::steady_clock::now() - started_ < shown_after_) return std::nullopt;
    return last_;
}

std::optional<double> JobProgress::seconds_left() const {
    std::lock_guard lock(mutex_);
    if (!last_ || last_->done <= 0 || last_->done >= last_->total) return std::nullopt;
    const std::chrono::duration<double> spent = std::chrono::steady_clock::now() - started_;
    return spent.count() * static_cast<double>(last_->total - last_->done) / static_cast<double>(last_->done);
}

}  // namespace headscope
