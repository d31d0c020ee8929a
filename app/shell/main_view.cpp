// Everything the window shows: see main_view.h.
#include "shell/main_view.h"

#include <cmath>
#include <iterator>

#include "views/predictions_view.h"
#include "widgets/texts.h"

namespace headscope {

MainView::MainView(const Args& args, const Settings& start, LoadedModel loaded, float content_scale,
                   std::function<void()> wake)
    : state_{.texts = start.texts, .options = start.options, .sliding_window_on = start.sliding_window},
      session_(std::move(loaded), state_, std::move(wake)),
      ui_(content_scale, args.screenshot.empty(), !args.layout.empty()),
      tab_to_select_(args.view),
      dance_view_(session_.wake()),
      checks_view_(session_.wake()),
      status_bar_(start.export_dir) {
    ui_.colormap = start.colormap;
    state_.layer = args.layer;
    state_.query = args.query;
    state_.attention_kind = args.attention_kind;
    if ((args.causal_given && state_.options.causal != args.options.causal) || !args.text_pairs.empty() ||
        !args.targets.empty()) {
        state_.options.causal =
            args.causal_given ? args.options.causal : state_.options.causal;  // over the model's own
        state_.text_pairs = args.text_pairs;
        state_.targets = args.targets;
        session_.submit();
    }
    if (args.region.rows() > 0) {
        long_view_.show_region(args.region);
        state_.rows_shown_begin = args.region.row_begin, state_.rows_shown_end = args.region.row_end;
    }
    if (args.head >= 0) {
        state_.head = args.head;
        heads_view_.open_large();
    }
    dance_view_.set_step(args.dance_step);
    state_.shading = {args.value_weighted, args.hide_first_key, args.sentences, 0};
    if (args.value_weighted) session_.submit();  // with the norms
    state_.compare_text = start.compare_text;
    state_.compare_target = start.compare_target;
    state_.compare_pair = start.compare_pair;
    state_.diff_shown = start.diff;
    state_.patch.metric = start.patch_metric;
    state_.patch.direction = start.patch_direction;
    state_.patch.stack = start.patch_stack;
    state_.patch.method = args.patch_method;
    if (!start.compare_text.empty()) session_.submit_compare();
    patch_at_start_ = args.compute_patching;
    state_.effects_of = start.effects_of;
    state_.effects_all_exact = start.effects_all_exact;
    if (args.compute_effects) session_.compute_effects();
}

bool MainView::computing() const {
    return !session_.loading().empty() || session_.busy() || session_.probes_pending() || session_.effects_pending() ||
           session_.intact_pending() || session_.comparison().busy() || session_.map_pending() ||
           session_.long_lens().pending() || checks_view_.computing() || dance_view_.computing();
}

void MainView::draw() {
    session_.collect();
    if (patch_at_start_ && !session_.busy() && !session_.comparison().busy() && session_.same_lengths()) {
        PatchingView::compute(state_, session_);
        patch_at_start_ = false;
    }
    state_.hovered_query = state_.hovered_layer = state_.hovered_head = -1;  // until a map says otherwise
    ui_.layout.clear();
    const ImGuiViewport* viewport = ImGui::GetMainViewport();
    ImGui::SetNextWindowPos(viewport->WorkPos);
    ImGui::SetNextWindowSize(viewport->WorkSize);
    ImGui::Begin("Headscope", nullptr,
                 ImGuiWindowFlags_NoDecoration | ImGuiWindowFlags_NoMove | ImGuiWindowFlags_NoSavedSettings |
                     ImGuiWindowFlags_NoBringToFrontOnFocus);
    controls_.draw(state_, session_, ui_);
    ImGui::Separator();
    views();
    status_bar_.draw(state_, session_, ui_, figure_view());
    ImGui::End();
}

// The views with query rows have the predictions panel beside them or,
// where that leaves their maps larger (a wide window with few heads), below
// them; room is left for the status bar at the bottom.
MainView::Placement MainView::placement(View view) const {
    const float status_bar = -ImGui::GetFrameHeightWithSpacing();
    if (view != View::heads && view != View::tokens && view != View::model && view != View::lens &&
        view != View::router)
        return {ImVec2(0, status_bar)};
    if (view == View::tokens || view == View::router) return {ImVec2(-panel_width(), status_bar), true, false};
    const float panel_w = panel_width(), spacing = ImGui::GetStyle().ItemSpacing.x;
    // The panel's lines: the query, a note, the top predictions, the next token and the loss; with heads
    // or experts knocked out, the intact model's top 5 (a title, a header, 5 rows, the losses).
    const int intact_lines = knocks_anything_out(session_.shown_options) ? 9 : 0;
    // With a compare text: a title, a header and 5 rows, and a line on the lengths.
    const int compare_lines = session_.comparison().length() > 0 ? 8 + !session_.same_lengths() : 0;
    // With a patched run shown: its label (two lines where it wraps), a header and 5 rows.
    const int patched_lines = session_.patched_run_shown() ? 9 : 0;
    const float panel_h = (Session::predictions_k + 5 + intact_lines + compare_lines + patched_lines) *
                          ImGui::GetTextLineHeightWithSpacing();
    const ImVec2 area(ImGui::GetContentRegionAvail().x, ImGui::GetContentRegionAvail().y + status_bar);
    const auto side = [&](ImVec2 a) {
        return view == View::heads ? heads_view_.map_side(session_, ui_, a) : ModelView::map_side(session_, ui_, a);
    };
    const bool below = view != View::lens && side(ImVec2(area.x, area.y - panel_h - spacing)) >
                                                 side(ImVec2(area.x - panel_w - spacing, area.y));
    return below ? Placement{ImVec2(0, status_bar - panel_h), true, true}
                 : Placement{ImVec2(-panel_w, status_bar), true, false};
}

// Maps whose shape leaves a band wider than a quarter of the window beside
// them (a window wider than the grid is) give it to the token view, which
// follows the map under the mouse.
void MainView::tokens_beside(ImVec2 maps_corner) {
    const float spacing = ImGui::GetStyle().ItemSpacing.x;
    const float band = ImGui::GetWindowPos().x + ImGui::GetWindowWidth() - maps_corner.x - spacing;
    if (maps_corner.x <= 0 || band < ImGui::GetMainViewport()->WorkSize.x / 4) return;
    ImGui::SetCursorScreenPos(ImVec2(maps_corner.x + spacing, maps_corner.y));
    tokens_child("tokens-beside", ImVec2(0, 0));
}

// The token view, following the maps, in a child of `size` at the cursor.
void MainView::tokens_child(const char* id, ImVec2 size) {
    begin_child(ui_, {{"view", "tokens-beside"}}, id, size);
    tokens_view_.draw(state_, session_, ui_, true);
    ImGui::EndChild();
}

void MainView::views() {
    const Session& s = session_;
    if (!s.computed()) {
        ImGui::TextUnformatted(s.message.empty() ? "computing..." : s.message.c_str());
        if (!s.message.empty() && state_.texts.size() > 1) mask_view_.batch_list(state_, session_, ui_);
        return;
    }
    if (!s.message.empty()) ImGui::TextColored(error_colour, "%s (showing the last good maps)", s.message.c_str());
    if (s.long_text()) return long_views();
    if (!ImGui::BeginTabBar("views")) return;
    bool lens_shown = false, contributions_shown = false;
    for (int v = 0; v < static_cast<int>(std::size(view_choices.labels)); ++v) {
        const View view = static_cast<View>(v);
        if (view == View::router && !s.model().config.has_experts()) continue;  // a dense model routes nothing
        const ImGuiTabItemFlags flags = tab_to_select_ == view ? ImGuiTabItemFlags_SetSelected : 0;
        const bool open = ImGui::BeginTabItem(view_choices.labels[v], nullptr, flags);
        ui_.layout.item({{"view", "tab"}, {"name", view_choices.words[v]}});  // the tab's button
        if (!open) continue;
        if (tab_to_select_ == view) tab_to_select_.reset();  // shown: the user's clicks choose again
        shown_view_ = view;
        // What the views share: everything below the tabs, the status bar included (for --layout).
        region_left(ui_, {{"view", "below-tabs"}});
        // Every tab says so while a patched run's maps and predictions are shown (the tabs stay where they are).
        if (const Comparison::PatchedRun* run = s.patched_run_shown())
            PatchingView::patched_run_line(session_, ui_, *run);
        const Placement place = placement(view);
        const float status_bar = -ImGui::GetFrameHeightWithSpacing();
        ImGui::BeginChild("view", place.view);
        switch (view) {
            case View::heads:
                heads_view_.draw(state_, session_, ui_);
                tokens_beside(heads_view_.maps_corner());
                break;
            case View::tokens: tokens_view_.draw(state_, session_, ui_); break;
            case View::model:
                if (model_view_.draw(state_, session_, ui_)) {
                    heads_view_.open_large();
                    tab_to_select_ = View::heads;
                } else
                    tokens_beside(model_view_.maps_corner());
                break;
            case View::router: router_view_.draw(state_, session_, ui_); break;
            case View::lens:
                lens_view_.draw(state_, session_, ui_);
                lens_shown = true;
                break;
            case View::effects:
                effects_view_.draw(state_, session_, ui_);
                contributions_shown = true;
                break;
            case View::patching: patching_view_.draw(state_, session_, ui_); break;
            case View::mask: mask_view_.draw(state_, session_, ui_); break;
            case View::dance: dance_view_.draw(state_, session_, ui_); break;
            case View::checks: checks_view_.draw(state_, session_, ui_); break;
        }
        ImGui::EndChild();
        if (place.predictions) {
            if (!place.predictions_below) ImGui::SameLine();
            // Below the maps the panel takes its own width; the token view, the rest of the row.
            const bool tokens_after = place.predictions_below && view != View::tokens;
            begin_child(ui_, {{"view", "predictions-panel"}}, "predictions",
                        ImVec2(tokens_after ? panel_width() : 0, status_bar));
            predictions_panel(state_, session_, ui_);
            ImGui::EndChild();
            if (tokens_after) {
                ImGui::SameLine();
                tokens_child("tokens-below", ImVec2(0, status_bar));
            }
        }
        ImGui::EndTabItem();
    }
    ImGui::EndTabBar();
    // The lens and the contributions are computed only while their tab is shown.
    if (lens_shown != state_.lens_shown) {
        state_.lens_shown = lens_shown;
        // A long text's lens is asked for the positions in view, not of the forward (lens_view.h).
        if (lens_shown && session_.shown.attention.lens_k == 0 && !session_.long_text()) session_.submit();
    }
    if (contributions_shown != state_.contributions_shown) {
        state_.contributions_shown = contributions_shown;
        if (contributions_shown && session_.shown.attention.value_weighted.empty()) session_.submit();
    }
}

// A long text's tabs: its heads in the long view, its tokens (each row
// computed from the kept queries and keys), the lens of the positions in
// view (asked of its worker), the router (each token's experts, kept as for
// a short text) and the mask tab's batch; the others read every head's map
// or run the model again with them, and say so in a line.
void MainView::long_views() {
    if (!ImGui::BeginTabBar("views")) return;
    for (int v = 0; v < static_cast<int>(std::size(view_choices.labels)); ++v) {
        const View view = static_cast<View>(v);
        if (view == View::router && !session_.model().config.has_experts()) continue;
        const ImGuiTabItemFlags flags = tab_to_select_ == view ? ImGuiTabItemFlags_SetSelected : 0;
        const bool open = ImGui::BeginTabItem(view_choices.labels[v], nullptr, flags);
        ui_.layout.item({{"view", "tab"}, {"name", view_choices.words[v]}});
        if (!open) continue;
        if (tab_to_select_ == view) tab_to_select_.reset();
        shown_view_ = view;
        ImGui::BeginChild("view", ImVec2(0, -ImGui::GetFrameHeightWithSpacing()));
        if (view == View::heads)
            long_view_.draw(state_, session_, ui_);
        else if (view == View::tokens)
            tokens_view_.draw(state_, session_, ui_);
        else if (view == View::lens)
            lens_view_.draw(state_, session_, ui_);
        else if (view == View::router)
            router_view_.draw(state_, session_, ui_);
        else if (view == View::mask)
            mask_view_.batch_list(state_, session_, ui_);
        if (const char* line = long_text_line(view))
            text_wrapped(ui_, {{"view", "long-text-line"}, {"text", line}}, "%s", line);
        ImGui::EndChild();
        ImGui::EndTabItem();
    }
    ImGui::EndTabBar();
}

// Why a tab shows a long text only in part, or not at all (null: it shows it whole).
const char* MainView::long_text_line(View view) {
    switch (view) {
        case View::model:
            return "A long text keeps no map: every head of the model is in the heads tab's overview, coloured by "
                   "its summaries, and a click there opens its map.";
        case View::effects:
            return "What heads do reads what every head writes at every token (the contributions, each layer's T x T "
                   "weights times the values): for a text short enough to keep every map.";
        case View::patching:
            return "Patching runs the text and the compare text once for every head with every map: for a text short "
                   "enough to keep every map.";
        case View::mask:
            return "The masks' grids draw every query and key, a cell each: on a long text the heads tab's map shows "
                   "the masked cells (hatched) at any zoom.";
        case View::dance:
            return "The reshape dance draws the batch's buffers a float a cell and checks the naive split with two "
                   "forwards that keep every map: for a text short enough to keep them.";
        case View::checks:
            return "The checks run the model again with every head's map (the causality check, each head alone): "
                   "for a text short enough to keep every map.";
        default: return nullptr;
    }
}

void MainView::open_dropped(const std::string& path) {
    const std::string extension = std::filesystem::path(path).extension().string();
    if (extension == ".txt" || extension == ".md")
        session_.open_text_file(path);
    else
        session_.open_model(path);
}

Settings MainView::settings(const WindowPlacement& window) const {
    Settings s;
    s.model = session_.model_name();
    s.texts = state_.texts;
    s.colormap = ui_.colormap;
    s.options = state_.options;
    s.sliding_window = state_.sliding_window_on;
    s.effects_of = state_.effects_of;
    s.effects_all_exact = state_.effects_all_exact;
    s.export_dir = status_bar_.export_dir();
    s.compare_text = state_.compare_text;
    s.compare_target = state_.compare_target;
    s.compare_pair = state_.compare_pair;
    s.diff = state_.diff_shown;
    s.patch_metric = state_.patch.metric;
    s.patch_direction = state_.patch.direction;
    s.patch_stack = state_.patch.stack;
    s.window = window;
    return s;
}

}  // namespace headscope
