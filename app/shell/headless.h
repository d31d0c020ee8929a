// What a test or benchmark asks of the window, driven between its frames:
// with --screenshot, every worker settled before each frame, --frames
// frames, then (after --open-model's model has opened and as many frames
// again) the PNG, --export-json, --export-npy and --export-svg, and the
// window closes; with --screenshot-views, each tab's PNG and layout after
// its --frames frames, named for it, the exports after the last;
// with --frame-times, every 10th frame recomputes the texts as a keystroke
// would and each frame is timed; with --count-idle-frames S, once every
// worker has settled, the frames drawn without input over S seconds and the
// process's CPU time while asleep after the last of them are printed and the
// window closes; with --layout, the
// last frame's layout is written on exit.
#pragma once
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "headscope/base/clock.h"
#include "shell/command_line.h"
#include "shell/main_view.h"

namespace headscope {

class Headless {
public:
    explicit Headless(const Args& args) : args_(args), model_to_open_(args.open_model) {}

    // Screenshot mode: no display needed, the frames come as fast as drawn.
    bool on() const { return !args_.screenshot.empty(); }
    // Before polling events: the keystroke of --frame-times, then waits for the workers.
    void before_frame(MainView& view);
    // After the frame's input is handled, before it is drawn.
    void frame_started();
    // After the frame is rendered, before the swap; true when the window should close.
    bool frame_rendered(MainView& view, int width, int height);
    // The longest an idle window may sleep, in seconds: until the idle count
    // is due; -1 (no limit) without one.
    double longest_sleep() const;
    // Once the loop has ended.
    void finish(const MainView& view) const;

private:
    // --frame-times: each frame's time, from input handled to the frame
    // drawn, and whether it drew the maps of a new compute into their
    // textures (what a keystroke costs) or only showed them. The first frame
    // also builds the font atlas and compiles shaders, so it is reported alone.
    struct FrameTimes {
        std::vector<double> new_maps_ms, redraw_ms;
        double first_ms = -1;
        void add(double ms, bool new_maps);
        void print() const;
    };

    // --screenshot-views: the shown tab's PNG and layout, each named for it;
    // false while another tab the model has is left, which it opens.
    bool shoot_view(MainView& view, int width, int height);

    const Args& args_;
    size_t views_shot_ = 0;      // of --screenshot-views
    std::string model_to_open_;  // opened after the first frames, as the picker does
    int frames_drawn_ = 0;       // since the last model was asked for
    Clock::time_point frame_start_;
    FrameTimes frame_times_;
    uint64_t drawn_generation_ = 0;  // of the maps the last frame drew
    // --count-idle-frames: since when nothing computes, the frames drawn
    // since, and the sleep after the last of them: its start and the CPU time then.
    bool count_idle_frame(const MainView& view);
    std::optional<Clock::time_point> idle_since_;
    int idle_frames_ = 0;
    Clock::time_point asleep_since_;
    double asleep_cpu_start_ = 0, frame_start_cpu_ = 0;
};

}  // namespace headscope
