// A one-line progress bar on stderr for a person at a terminal: the CLI's
// long work, and the window's model load before the window opens.
#pragma once
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>

#include "headscope/base/progress.h"

namespace headscope {

// A one-line bar on stderr while long work reports (core's progress.h), for
// a person at a terminal: only when stderr is one, redrawn at most every
// 100 ms, and cleared when a stage ends or this goes (an error, say), so that
// what follows starts on a clean line.
class TerminalProgress {
public:
    TerminalProgress() : on_(isatty(STDERR_FILENO) == 1) {}
    ~TerminalProgress() { clear(); }
    TerminalProgress(const TerminalProgress&) = delete;
    TerminalProgress& operator=(const TerminalProgress&) = delete;

    // The callback for the work; none when stderr is not a terminal.
    Progress progress() {
        if (!on_) return {};
        return [this](const ProgressReport& report) { draw(report); };
    }

private:
    void draw(const ProgressReport& report) {
        if (report.done >= report.total) return clear();
        const std::chrono::steady_clock::time_point now = std::chrono::steady_clock::now();
        if (drawn_ && now - drawn_at_ < std::chrono::milliseconds(100)) return;
        constexpr int width = 30;
        const auto filled = static_cast<size_t>(width * report.done / report.total);
        const std::string bar = std::string(filled, '#') + std::string(width - filled, '.');
        std::fprintf(stderr, "\r[%s] %s\033[K", bar.c_str(), progress_text(report).c_str());
        std::fflush(stderr);
        drawn_ = true;
        drawn_at_ = now;
    }
    void clear() {
        if (!drawn_) return;
        std::fputs("\r\033[K", stderr);
        std::fflush(stderr);
        drawn_ = false;
    }

    bool on_;
    bool drawn_ = false;
    std::chrono::steady_clock::time_point drawn_at_;
};

}  // namespace headscope
