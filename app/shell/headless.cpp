// The window driven by a test or benchmark: see headless.h.
#include "shell/headless.h"

#include <sys/resource.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <thread>

#include "headscope/base/clock.h"
#include "widgets/gl.h"

namespace headscope {

void Headless::before_frame(MainView& view) {
    if (!on()) return;
    if (args_.frame_times && frames_drawn_ % 10 == 9) view.session().submit();
    // The real maps and labels: the compute, the probe scores, the checks' figures, a model loading.
    while (view.computing()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        view.session().collect();
    }
}

namespace {

// The process's user and system CPU time, in seconds.
double cpu_seconds() {
    rusage usage{};
    getrusage(RUSAGE_SELF, &usage);
    const auto seconds = [](const timeval& t) { return static_cast<double>(t.tv_sec) + t.tv_usec / 1e6; };
    return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

}  // namespace

void Headless::frame_started() {
    frame_start_ = Clock::now();
    if (args_.idle_seconds > 0) frame_start_cpu_ = cpu_seconds();
}

double Headless::longest_sleep() const {
    if (args_.idle_seconds <= 0) return -1;
    if (!idle_since_) return 0.05;  // not counting yet: look again soon
    return std::max(0.001, args_.idle_seconds - ms_since(*idle_since_) / 1000);
}

bool Headless::count_idle_frame(const MainView& view) {
    if (view.computing()) {
        idle_since_.reset();
        return false;
    }
    const auto asleep_from_here = [&] {
        asleep_since_ = Clock::now();
        asleep_cpu_start_ = cpu_seconds();
    };
    if (!idle_since_) {
        idle_since_ = Clock::now();
        idle_frames_ = 0;
        asleep_from_here();
        return false;
    }
    const double seconds = ms_since(*idle_since_) / 1000;
    if (seconds < args_.idle_seconds) {
        ++idle_frames_;
        asleep_from_here();  // the sleep is measured from the last frame drawn
        return false;
    }
    // Up to this frame's start: the frames themselves (llvmpipe draws on the
    // CPU) are counted, not charged to the sleep.
    const double asleep = std::chrono::duration<double>(frame_start_ - asleep_since_).count();
    std::printf("idle: %d frames in %.2f s; asleep %.2f s at %.2f%% of a core\n", idle_frames_, seconds, asleep,
                100 * (frame_start_cpu_ - asleep_cpu_start_) / asleep);
    return true;
}

bool Headless::frame_rendered(MainView& view, int width, int height) {
    if (args_.idle_seconds > 0) return count_idle_frame(view);
    if (args_.frame_times) {
        glFinish();  // the GPU's (llvmpipe's) work counts too
        const uint64_t generation = view.session().shown_generation;
        frame_times_.add(ms_since(frame_start_), generation != drawn_generation_);
        drawn_generation_ = generation;
    }
    if (!on() || ++frames_drawn_ < args_.frames) return false;
    if (!model_to_open_.empty()) {
        view.session().open_model(std::exchange(model_to_open_, std::string()));
        frames_drawn_ = 0;
        return false;
    }
    if (args_.screenshot_views.empty())
        write_screenshot(args_.screenshot, width, height);
    else if (!shoot_view(view, width, height))
        return false;
    if (!args_.export_json.empty()) export_json(view.session(), args_.export_json);
    if (!args_.export_npy.empty()) export_npy(view.session(), args_.export_npy);
    if (!args_.export_svg.empty()) view.export_svg(args_.export_svg);
    return true;
}

namespace {

// shot.png as shot-lens.png for the lens tab.
std::filesystem::path with_view(const std::filesystem::path& path, View view) {
    return path.parent_path() / (path.stem().string() + "-" + word_of(view_choices, view) + path.extension().string());
}

}  // namespace

bool Headless::shoot_view(MainView& view, int width, int height) {
    const View shot = args_.screenshot_views[views_shot_];
    write_screenshot(with_view(args_.screenshot, shot), width, height);
    if (!args_.layout.empty()) view.layout().write(with_view(args_.layout, shot));
    const bool experts = view.session().model().config.has_experts();
    while (++views_shot_ < args_.screenshot_views.size()) {
        const View next = args_.screenshot_views[views_shot_];
        if (next == View::router && !experts) continue;  // a dense model has no such tab
        view.show(next);
        frames_drawn_ = 0;
        return false;
    }
    return true;
}

void Headless::finish(const MainView& view) const {
    // The last frame's layout (a test driving the window reads it after Ctrl+Q); each tab's was written already.
    if (!args_.layout.empty() && args_.screenshot_views.empty()) view.layout().write(args_.layout);
    if (args_.frame_times) frame_times_.print();
}

void Headless::FrameTimes::add(double ms, bool new_maps) {
    if (first_ms < 0)
        first_ms = ms;
    else
        (new_maps ? new_maps_ms : redraw_ms).push_back(ms);
}

void Headless::FrameTimes::print() const {
    auto median = [](std::vector<double> v) {
        std::sort(v.begin(), v.end());
        return v.empty() ? 0.0 : v[v.size() / 2];
    };
    std::printf("first frame %.2f ms; frames with new maps: %zu, median %.2f ms; other frames: %zu, median %.2f ms\n",
                first_ms, new_maps_ms.size(), median(new_maps_ms), redraw_ms.size(), median(redraw_ms));
}

}  // namespace headscope
