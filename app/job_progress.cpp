// A worker job's progress for the frame, and its bar: see job_progress.h.
#include "job_progress.h"

#include <algorithm>

#include "ui.h"

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

bool progress_bar(JobProgress& job, Ui& ui, const char* name, float width) {
    const std::optional<ProgressReport> report = job.shown();
    if (!report) return false;
    const std::string text = progress_text(*report);
    const float fraction = report->total > 0 ? static_cast<float>(report->done) / static_cast<float>(report->total) : 0;
    ImGui::PushID(name);
    if (ImGui::SmallButton("Cancel")) job.cancel();  // first: on a crowded line it stays in view
    ImGui::SameLine();
    // The text within the bar, ended with an ellipsis where the line is short.
    const float bar = std::min(width, ImGui::GetContentRegionAvail().x);
    const std::string shown = ellipsized(text, ImGui::GetFontSize(), bar - 2 * ImGui::GetStyle().FramePadding.x);
    ImGui::ProgressBar(fraction, ImVec2(bar, 0), shown.c_str());
    ImGui::PopID();
    ui.layout.item({{"view", "progress"}, {"name", name}, {"text", text}});
    return true;
}

}  // namespace headscope
