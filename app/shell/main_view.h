// Everything the window shows, drawn once a frame: the controls, the views
// in tabs (heads, tokens, model, a mixture of experts' router, logit lens, what
// heads do, patching, mask, dance, checks) with the predictions panel beside the first
// five, and the status bar, over one
// Session. window.cpp runs it in its frame loop; headless.cpp drives it
// for screenshots and benchmarks.
#pragma once
#include <cmath>
#include <functional>
#include <optional>
#include <utility>

#include "shell/command_line.h"
#include "views/checks_view.h"
#include "views/controls_view.h"
#include "views/dance_view.h"
#include "views/effects_view.h"
#include "views/heads_view.h"
#include "views/lens_view.h"
#include "views/long_view.h"
#include "views/mask_view.h"
#include "views/model_view.h"
#include "views/patching_view.h"
#include "views/router_view.h"
#include "views/status_bar.h"
#include "views/tokens_view.h"

namespace headscope {

class MainView {
public:
    // `args` suit the loaded model (check_start_choices).
    MainView(const Args& args, const Settings& start, LoadedModel loaded, float content_scale,
             std::function<void()> wake);

    void draw();
    // Whether any worker is still computing (screenshot mode waits for them all).
    bool computing() const;
    // Whether the frame just drawn asked for one more (and forgets it).
    bool take_frame_wanted() { return std::exchange(ui_.frame_wanted, false); }
    // What to remember of this run, with the window placed so.
    Settings settings(const WindowPlacement& window) const;

    Session& session() { return session_; }
    // Opens this tab in the next frame, as a click on it would.
    void show(View view) { tab_to_select_ = view; }
    // A file or folder dropped on the window: a .txt or .md file's text replaces the selected text; anything
    // else is opened as a model.
    void open_dropped(const std::string& path);
    const LayoutRecorder& layout() const { return ui_.layout; }
    void set_scale(float scale) { ui_.scale = scale; }
    StatusBar& status_bar() { return status_bar_; }
    // The shown view as Save SVG writes it (svg_figure.h).
    void export_svg(const std::filesystem::path& path) { write_svg_figure(path, state_, session_, ui_, figure_view()); }

private:
    // Where a view goes in the area below the tabs: its child window's size
    // (ImGui's: negative is what to leave free), and the predictions panel's place.
    struct Placement {
        ImVec2 view;
        bool predictions = false, predictions_below = false;
    };
    Placement placement(View view) const;
    float panel_width() const { return std::floor(300 * ui_.scale); }  // the predictions panel's
    void views();
    void long_views();
    static const char* long_text_line(View view);
    void tokens_beside(ImVec2 maps_corner);
    void tokens_child(const char* id, ImVec2 size);
    FigureView figure_view() const { return {shown_view_, heads_view_.large(), &tokens_view_}; }

    WindowState state_;  // before the session, which computes from it
    Session session_;
    Ui ui_;
    std::optional<View> tab_to_select_;  // chosen outside the tab bar (--view, a model-view click), until shown
    View shown_view_ = View::heads;      // the tab the last frame showed
    ControlsView controls_;
    HeadsView heads_view_;
    ModelView model_view_;
    RouterView router_view_;
    LensView lens_view_;
    LongView long_view_;  // a long text's heads tab
    TokensView tokens_view_;
    EffectsView effects_view_;
    PatchingView patching_view_;
    bool patch_at_start_ = false;  // --compute-patching, until both texts are computed
    MaskView mask_view_;
    DanceView dance_view_;
    ChecksView checks_view_;
    StatusBar status_bar_;
};

}  // namespace headscope
