// The shown view as an SVG figure: see svg_figure.h.
#include "views/svg_figure.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <ostream>
#include <vector>

#include "headscope/base/error.h"
#include "headscope/io/files.h"
#include "views/lens_view.h"
#include "views/tokens_view.h"

namespace headscope {

namespace {

// Sizes in the figure's user units.
constexpr double cell = 12, label_size = 9, title_size = 11, heading_size = 14, gap = 24, margin = 16;
constexpr double thumb_gap = 6, legend_height = 3 * title_size, heading_line = 1.3 * heading_size;
constexpr double heading_height = heading_size + heading_line;  // two lines

// About the width of `text` at `size`, the room labels take: 0.62 em a
// character (DejaVu Sans on average), a whole em from U+1000 on (CJK, emoji:
// lead bytes from 0xE1).
double text_width(std::string_view text, double size) {
    double ems = 0;
    for (const char c : text) {
        const auto byte = static_cast<unsigned char>(c);
        if ((byte & 0xC0) != 0x80) ems += byte >= 0xE1 ? 1.0 : 0.62;
    }
    return ems * size;
}

// The cells a side of each of `maps` maps of T x T, so that the figure holds at most max_figure_cells.
int pooled_side(int T, size_t maps) {
    const auto side =
        static_cast<int64_t>(std::sqrt(static_cast<double>(max_figure_cells) / static_cast<double>(maps)));
    return static_cast<int>(std::clamp<int64_t>(side, 1, T));
}

// "L3", "H2": a layer's or a head's name. (Printed: GCC 12 warns, wrongly,
// of overlapping copies in "L" + std::to_string(n) once inlined here.)
std::string numbered(char letter, int n) {
    char name[16];
    std::snprintf(name, sizeof name, "%c%d", letter, n);
    return name;
}

// The title lines: the model and the text; the layer (heads tab), the
// options as the command lines spell them, and the device that computed.
using Heading = std::array<std::string, 2>;
Heading heading(const WindowState& state, const Session& s, const Ui& ui, FigureView shown) {
    const AttentionOptions& o = s.shown_options;
    std::string text = s.model_name();
    if (s.shown_texts.size() > 1)
        text += "   text " + std::to_string(state.selected + 1) + " of " + std::to_string(s.shown_texts.size());
    text += "   \"" + visible_text(s.shown_texts[state.selected]) + "\"";
    std::string line = shown.view == View::heads ? "layer " + std::to_string(state.layer) + "   " : "";
    line += std::string("causal ") + (o.causal ? "on" : "off") + ", padding mask " + (o.padding_mask ? "on" : "off");
    if (s.model().config.sliding_window)
        line += ", sliding window " + (o.sliding_window ? std::to_string(o.sliding_window) : std::string("off"));
    line += ", " + std::to_string(s.heads_shown()) + " heads of " + std::to_string(s.shown.attention.hs) + ", scale " +
            word_of(scale_choices, o.scale) + ", split " + word_of(split_choices, o.split) + ", colormap " +
            word_of(colormap_choices, ui.colormap);
    line += ", computed on " + s.computed_on().device;
    return {text, line};
}

// The width a figure needs for its title lines.
double heading_width(const Heading& lines) {
    return 2 * margin + std::max(text_width(lines[0], heading_size), text_width(lines[1], heading_size));
}

// Where a map's key 0 starts, from its left: a learned sink's column
// (gpt-oss's) and a gap come first, as in the window (map_columns).
double sink_room(const Session& s) { return s.model().config.attention_sinks ? cell + cell / 4 : 0; }

class Figure {
public:
    Figure(std::ostream& out, double width, double height, const WindowState& state, const Session& session, Ui& ui)
        : svg_(out, width, height, masked_hatch), state_(state), s_(session), ui_(ui), height_(height) {}

    void heading(const Heading& lines) {
        svg_.begin_group({{"class", "heading"}});
        svg_.text(margin, margin + heading_size, lines[0], heading_size);
        svg_.text(margin, margin + heading_size + heading_line, lines[1], heading_size);
        svg_.end_group();
    }

    // `image`'s cells as w x h rectangles from (x, y), row-major, coloured
    // as the window's shader colours them, masked cells hatched.
    void cells(const HeatmapImage& image, double x, double y, double w, double h, const char* css_class = "cells") {
        const std::vector<Rgb> colours = ui_.renderer.cell_colours(ui_.colormap, image);
        svg_.begin_group({{"class", css_class},
                          {"data-rows", std::to_string(image.rows)},
                          {"data-cols", std::to_string(image.cols)}});
        for (int r = 0; r < image.rows; ++r)
            for (int c = 0; c < image.cols; ++c) {
                const size_t n = static_cast<size_t>(r) * image.cols + c;
                if (image.cells[n] < 0)
                    svg_.masked_rect(x + c * w, y + r * h, w, h);
                else
                    svg_.rect(x + c * w, y + r * h, w, h, colours[n]);
            }
        svg_.end_group();
    }

    // Map (layer, head) of the selected text, `side` cells a side (the
    // learned sink's column first, <g class="sink">), its top left at (x, y).
    void map(int layer, int head, int side, double x, double y) {
        const int b = state_.selected;
        const AttentionOptions options = s_.shown_options_at(layer);
        if (sink_room(s_) > 0)
            cells(
                sink_column_image(s_.shown.attention, options, layer, b, head, s_.length(b), side, s_.shown_shading()),
                x, y, cell, cell, "sink");
        cells(heatmap_image(s_.shown.attention, options, layer, b, head, s_.length(b), side, s_.shown_shading()),
              x + sink_room(s_), y, cell, cell);
    }

    // The selected text's first `count` tokens above columns `step` wide from x, turned, ending at y.
    void column_labels(const char* css_class, int count, double x, double y, double step) {
        svg_.begin_group({{"class", css_class}});
        for (int j = 0; j < count; ++j)
            svg_.text(x + (j + 0.5) * step + 0.35 * label_size, y - 3, shown_token(s_, state_.selected, j), label_size,
                      TextAnchor::start, -90);
        svg_.end_group();
    }

    // The selected text's tokens along a map whose top left is (x, y): the
    // queries down its left, the keys above it ("sink" above a learned sink's column).
    void token_labels(double x, double y) {
        const int T = s_.shown.attention.T;
        svg_.begin_group({{"class", "queries"}});
        for (int i = 0; i < T; ++i)
            svg_.text(x - 3, y + (i + 0.5) * cell + 0.35 * label_size, shown_token(s_, state_.selected, i), label_size,
                      TextAnchor::end);
        svg_.end_group();
        if (sink_room(s_) > 0) {
            svg_.begin_group({{"class", "sink-label"}});
            svg_.text(x + 0.5 * cell + 0.35 * label_size, y - 3, "sink", label_size, TextAnchor::start, -90);
            svg_.end_group();
        }
        column_labels("keys", T, x + sink_room(s_), y, cell);
    }

    // `texts` at title size, text n with its baseline starting at at[n].
    void labels(const char* css_class, const std::vector<std::pair<double, double>>& at,
                const std::vector<std::string>& texts) {
        svg_.begin_group({{"class", css_class}});
        for (size_t n = 0; n < texts.size(); ++n) svg_.text(at[n].first, at[n].second, texts[n], title_size);
        svg_.end_group();
    }

    // The colormap from 0 to 1 as 64 steps, and the hatch, along the bottom.
    void legend() {
        constexpr int steps = 64;
        constexpr double step = 4;
        HeatmapImage ramp{.rows = 1, .cols = steps, .cells = {}};
        for (int x = 0; x < steps; ++x) ramp.cells.push_back((x + 0.5f) / steps);
        const std::vector<Rgb> colours = ui_.renderer.cell_colours(ui_.colormap, ramp);
        const double y = height_ - margin - cell, baseline = y + cell - 2, x = margin + text_width("0", title_size) + 4;
        svg_.begin_group({{"class", "legend"}});
        svg_.text(margin, baseline, "0", title_size);
        for (int n = 0; n < steps; ++n) svg_.rect(x + n * step, y, step, cell, colours[n]);
        const double end = x + steps * step + 4;
        svg_.text(end, baseline, "1", title_size);
        const double masked = end + text_width("1", title_size) + 3 * title_size;
        svg_.masked_rect(masked, y, cell, cell);
        svg_.text(masked + cell + 4, baseline, "masked", title_size);
        svg_.end_group();
    }

    SvgWriter& svg() { return svg_; }

private:
    SvgWriter svg_;
    const WindowState& state_;
    const Session& s_;
    Ui& ui_;
    double height_;
};

constexpr double legend_width = 2 * margin + 64 * 4 + 14 * title_size;

// The heads tab: every head of the selected layer in a near-square grid (or
// the one head shown large), each titled, with the tokens along it.
void heads_figure(std::ostream& out, const WindowState& state, const Session& s, Ui& ui, FigureView shown) {
    const AttentionResult& att = s.shown.attention;
    const int NH = s.heads_shown(), group = NH / att.NKV, T = att.T;
    std::vector<int> heads;
    for (int h = 0; h < NH; ++h)
        if (!shown.large_head || h == state.head) heads.push_back(h);
    const int n = static_cast<int>(heads.size()), side = pooled_side(T, heads.size());
    double label_room = 0;
    if (side == T)  // every cell: a token per row
        for (int t = 0; t < T; ++t)
            label_room = std::max(label_room, text_width(shown_token(s, state.selected, t), label_size) + 6);
    const int columns = static_cast<int>(std::ceil(std::sqrt(n))), rows = (n + columns - 1) / columns;
    const double map_side = side * cell, title_h = title_size + 8;
    const double block_w = label_room + sink_room(s) + map_side, block_h = title_h + label_room + map_side;
    const Heading lines = heading(state, s, ui, shown);
    const double top = margin + heading_height + gap;
    const double width =
        std::max({2 * margin + columns * block_w + (columns - 1) * gap, heading_width(lines), legend_width});
    const double height = top + rows * block_h + (rows - 1) * gap + gap + legend_height;
    Figure figure(out, width, height, state, s, ui);
    figure.heading(lines);
    for (int k = 0; k < n; ++k) {
        const int h = heads[k];
        const double x = margin + (k % columns) * (block_w + gap), y = top + (k / columns) * (block_h + gap);
        const double map_x = x + label_room, map_y = y + title_h + label_room;
        figure.svg().begin_group(
            {{"class", "map"}, {"data-layer", std::to_string(state.layer)}, {"data-head", std::to_string(h)}});
        const std::string kv = group > 1 ? "  kv " + std::to_string(h / group) : "";
        figure.labels("title", {{map_x, y + title_size}}, {head_label(s, state.layer, h) + kv});
        if (label_room > 0) figure.token_labels(map_x, map_y);
        figure.map(state.layer, h, side, map_x, map_y);
        figure.svg().end_group();
    }
    figure.legend();
    figure.svg().finish();
}

// The model tab: a row of thumbnails per layer, a gap between key/value groups.
void model_figure(std::ostream& out, const WindowState& state, const Session& s, Ui& ui, FigureView shown) {
    const AttentionResult& att = s.shown.attention;
    const int L = static_cast<int>(att.layers.size()), NH = s.heads_shown(), group = NH / att.NKV;
    const int side = pooled_side(att.T, static_cast<size_t>(L) * NH);
    const double map_side = side * cell, map_width = sink_room(s) + map_side, group_gap = group > 1 ? gap : 0;
    const double row_label = text_width(numbered('L', att.layers.back()), title_size) + 8;
    const double header = title_size + 8;
    const auto column_x = [&](int h) {
        return margin + row_label + h * (map_width + thumb_gap) + h / group * group_gap;
    };
    const auto row_y = [&](int l) { return margin + heading_height + gap + header + l * (map_side + thumb_gap); };
    const Heading lines = heading(state, s, ui, shown);
    const double width = std::max({column_x(NH - 1) + map_width + margin, heading_width(lines), legend_width});
    const double height = row_y(L) + gap + legend_height;
    Figure figure(out, width, height, state, s, ui);
    figure.heading(lines);
    std::vector<std::pair<double, double>> at;
    std::vector<std::string> texts;
    for (int h = 0; h < NH; ++h) {
        at.emplace_back(column_x(h), row_y(0) - 6);
        texts.push_back(numbered('H', h) + (group > 1 && h % group == 0 ? "  kv " + std::to_string(h / group) : ""));
    }
    figure.labels("heads", at, texts);
    at.clear();
    texts.clear();
    for (int l = 0; l < L; ++l) {
        at.emplace_back(margin, row_y(l) + title_size);
        texts.push_back(numbered('L', att.layers[l]));
    }
    figure.labels("layers", at, texts);
    for (int l = 0; l < L; ++l)
        for (int h = 0; h < NH; ++h) {
            figure.svg().begin_group(
                {{"class", "map"}, {"data-layer", std::to_string(att.layers[l])}, {"data-head", std::to_string(h)}});
            figure.map(l, h, side, column_x(h), row_y(l));
            figure.svg().end_group();
        }
    figure.legend();
    figure.svg().finish();
}

// The logit-lens tab: a row per layer, a column per token of the selected
// text, each cell coloured by its top-1 probability with that token in it.
void lens_figure(std::ostream& out, const WindowState& state, const Session& s, Ui& ui, FigureView shown) {
    const AttentionResult& att = s.shown.attention;
    const HeatmapImage probabilities = lens_probabilities(state, s);
    const int L = probabilities.rows, length = probabilities.cols, b = state.selected;
    const Tokenizer& tokenizer = s.model().tokenizer;
    std::vector<std::string> tops;  // (L, length)
    double cell_w = 2 * cell, label_room = 0;
    for (int slot = 0; slot < L; ++slot)
        for (int t = 0; t < length; ++t) {
            tops.push_back(shown_token(tokenizer, att.lens_at(slot, b, t)[0].id));
            cell_w = std::max(cell_w, text_width(tops.back(), label_size) + 6);
        }
    for (int t = 0; t < length; ++t)
        label_room = std::max(label_room, text_width(shown_token(s, state.selected, t), label_size) + 6);
    const double cell_h = 2 * cell;
    const double row_label = text_width(numbered('L', att.layers.back()), title_size) + 8;
    const double x0 = margin + row_label, y0 = margin + heading_height + gap + label_room;
    const Heading lines = heading(state, s, ui, shown);
    const double width = std::max({x0 + length * cell_w + margin, heading_width(lines), legend_width});
    Figure figure(out, width, y0 + L * cell_h + gap + legend_height, state, s, ui);
    figure.heading(lines);
    figure.column_labels("positions", length, x0, y0, cell_w);
    std::vector<std::pair<double, double>> at;
    std::vector<std::string> layers;
    for (int slot = 0; slot < L; ++slot) {
        at.emplace_back(margin, y0 + slot * cell_h + cell_h / 2 + 0.35 * title_size);
        layers.push_back(numbered('L', att.layers[slot]));
    }
    figure.labels("layers", at, layers);
    figure.cells(probabilities, x0, y0, cell_w, cell_h);
    // Each cell's token, dark on the colormap's bright end as on screen.
    figure.svg().begin_group({{"class", "predictions"}});
    for (int slot = 0; slot < L; ++slot)
        for (int t = 0; t < length; ++t) {
            const size_t n = static_cast<size_t>(slot) * length + t;
            const Rgb ink = probabilities.cells[n] > lens_dark_text_above ? Rgb{0, 0, 0} : Rgb{255, 255, 255};
            figure.svg().text(x0 + t * cell_w + 3, y0 + slot * cell_h + cell_h / 2 + 0.35 * label_size, tops[n],
                              label_size, TextAnchor::start, 0, ink);
        }
    figure.svg().end_group();
    figure.legend();
    figure.svg().finish();
}

// The tokens tab: the selected text's tokens wrapped in lines (as the
// window wraps them, at the figure's width), each on the colour of its
// weight from the query rows (outlined), as the tab last drew them.
void tokens_figure(std::ostream& out, const WindowState& state, const Session& s, Ui& ui, FigureView shown) {
    const TokensView& view = *shown.tokens;
    constexpr double line_width = 720, pad = 3, box_h = title_size + 2 * pad, line_h = box_h + 4;
    const ShownMaps maps = s.maps();  // the keys' tokens: an encoder–decoder's cross-attention colours the source's
    const std::vector<WrappedToken> wrapped = wrap_tokens(
        s.model().tokenizer, *maps.key_ids,
        [](const std::string& text) { return static_cast<float>(text_width(text, title_size) + 2 * pad); }, line_width,
        pad);
    const double top = margin + heading_height + gap + heading_line;
    const int lines_drawn = wrapped.empty() ? 0 : wrapped.back().line + 1;
    const Heading lines = heading(state, s, ui, shown);
    const double width = std::max({2 * margin + line_width, heading_width(lines), legend_width});
    Figure figure(out, width, top + lines_drawn * line_h + gap + legend_height, state, s, ui);
    figure.heading(lines);
    figure.labels("description", {{margin, top - heading_line + title_size}}, {view.description()});
    const std::vector<int> queries = maps.kind == AttentionKind::cross ? std::vector<int>{} : view.queries();
    figure.svg().begin_group({{"class", "tokens"}});
    for (int t = 0; t < static_cast<int>(wrapped.size()); ++t) {
        const WrappedToken& token = wrapped[t];
        const double x = margin + token.x, y = top + token.line * line_h;
        if (std::find(queries.begin(), queries.end(), t) != queries.end())
            figure.svg().rect(x - 1.5, y - 1.5, token.width + 3, box_h + 3, Rgb{255, 158, 64});  // the window's outline
        const Rgb fill = std::isnan(view.weights()[t]) ? Rgb{255, 255, 255} : view.colours()[t];
        figure.svg().rect(x, y, token.width, box_h, fill);
        figure.svg().text(x + pad, y + box_h - pad - 0.15 * title_size, token.text, title_size, TextAnchor::start, 0,
                          dark_text_on(fill) ? Rgb{0, 0, 0} : Rgb{255, 255, 255});
    }
    figure.svg().end_group();
    figure.legend();
    figure.svg().finish();
}

}  // namespace

const char* svg_refusal(View view, AttentionKind kind) {
    if ((view == View::heads || view == View::model) && kind != AttentionKind::decoder)
        return "Save SVG draws the heads and model tabs' self-attention of the decoder: choose it in the attention "
               "menu";
    if (view == View::heads || view == View::tokens || view == View::model || view == View::lens) return nullptr;
    return "Save SVG draws the heads, tokens, model and logit-lens tabs: show one of them";
}

void write_svg_figure(const std::filesystem::path& path, const WindowState& state, const Session& session, Ui& ui,
                      FigureView shown) {
    if (const char* refusal = svg_refusal(shown.view, session.maps().kind)) throw Error(path.string() + ": " + refusal);
    if (session.long_text())
        throw Error(path.string() + ": a long text keeps no map: the figures are for shorter texts");
    if (session.shown.attention.weights.empty()) throw Error(path.string() + ": no maps computed yet");
    if (shown.view == View::lens && session.shown.attention.lens_k == 0)
        throw Error(path.string() + ": the logit lens is not computed");
    if (shown.view == View::tokens &&
        (!shown.tokens || shown.tokens->weights().size() < static_cast<size_t>(session.length(state.selected))))
        throw Error(path.string() + ": the tokens tab has not drawn these tokens yet");
    write_file_atomically(path, "the SVG figure", [&](std::ostream& out) {
        switch (shown.view) {
            case View::heads: heads_figure(out, state, session, ui, shown); break;
            case View::model: model_figure(out, state, session, ui, shown); break;
            case View::tokens: tokens_figure(out, state, session, ui, shown); break;
            default: lens_figure(out, state, session, ui, shown); break;
        }
    });
}

}  // namespace headscope
