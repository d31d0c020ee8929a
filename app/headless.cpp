// The window driven by a test or benchmark: see headless.h.
#include "headless.h"

#include <algorithm>
#include <cstdio>
#include <thread>

#include "gl.h"
#include "headscope/base/clock.h"

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

bool Headless::frame_rendered(MainView& view, int width, int height) {
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
    write_screenshot(args_.screenshot, width, height);
    if (!args_.export_json.empty()) export_json(view.session(), args_.export_json);
    if (!args_.export_npy.empty()) export_npy(view.session(), args_.export_npy);
    if (!args_.export_svg.empty()) view.export_svg(args_.export_svg);
    return true;
}

void Headless::finish(const MainView& view) const {
    // The last frame's layout (a test driving the window reads it after Ctrl+Q).
    if (!args_.layout.empty()) view.layout().write(args_.layout);
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
