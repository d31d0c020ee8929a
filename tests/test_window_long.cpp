// Long texts in the window (session/long_maps.h, views/long_view.h): a text
// of 2,048 tokens or more runs without maps, and what the long view draws is
// checked against the full maps of core's forward of the same tokens (an
// independent computation: every weight kept, summed up here): the
// overview's cells each head's mean entropy and the distance strip the
// selected head's mean distance along the text (each from the smallest to
// the largest), a zoom to single cells each exact weight (or the mask's
// hatch), and the maps the view asks for, pooled, against the full maps
// pooled here; the wheel and a drag zoom and pan it. A short text keeps
// every map; a text past the model's positions is cut there, saying so; a
// missing text file is one line. Typing at the end computes the new rows
// only. The lens tab shows core's lens of the query row and those before
// it, or of the rows last on screen: the zoomed map's, the tokens tab's
// (test_window_long_exports.cpp: the exports and the token view).
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "driven_window.h"
#include "headscope/base/error.h"
#include "headscope/compute/backend.h"
#include "model_writer.h"
#include "screenshot.h"
#include "session/long_maps.h"
#include "window_long_fixture.h"

using namespace headscope;
using nlohmann::json;
using test::heads;
using test::layers;
using test::WindowLong;

namespace {

// The mask's hatch: two greys.
bool hatched(const std::array<int, 3>& got) {
    return got[0] == got[1] && got[1] == got[2] && (std::abs(got[0] - 41) <= 1 || std::abs(got[0] - 77) <= 1);
}

TEST_F(WindowLong, TheTextIsLongAndItsMapsWouldBeFull) {
    ASSERT_GE(length(), long_text_tokens);
    ASSERT_LE(length(), 2304);
    EXPECT_FALSE(is_long_text(layers, heads, long_text_tokens - 1));
    EXPECT_TRUE(is_long_text(layers, heads, long_text_tokens));
    // A 1B Llama's 16 x 32 heads: their maps pass 2 GiB from 1,025 tokens.
    EXPECT_FALSE(is_long_text(16, 32, 1024));
    EXPECT_TRUE(is_long_text(16, 32, 1025));
    const LiveRequest asked{{text_}, AttentionOptions{}};
    EXPECT_EQ(long_text_request(*model_, asked).options.maps, Maps::queries_and_keys);
    EXPECT_TRUE(long_text_request(*model_, asked).options.summaries);
    const LiveRequest short_text{{"The cat sat on the mat."}, AttentionOptions{}};
    EXPECT_EQ(long_text_request(*model_, short_text).options.maps, Maps::full);
}

// A long text whose forward must keep every map (the naive-view split, which
// keeps no queries and keys by head): computed as a short text's where its
// maps fit the window's 2 GiB (this model's 2 x 4 heads), refused in a line
// naming the split and the size where they do not (4 layers of 32 heads:
// 2.3 GB), rather than run to the forward's own 8 GB limit.
TEST_F(WindowLong, TheNaiveSplitOfALongTextKeepsItsMapsOnlyWhereTheyFit) {
    LiveRequest naive{{text_}, AttentionOptions{}};
    naive.options.split = Split::naive_view;
    EXPECT_EQ(long_text_request(*model_, naive).options.maps, Maps::full);
    test::TempDir dir;
    test::write_test_model(dir.path, {.n_layer = 4, .n_head = 32, .n_embd = 64, .n_positions = 2304, .seed = 3});
    const Model wide = load_model(dir.path.string());
    ASSERT_GE(static_cast<int>(wide.tokenizer.encode_texts({text_})[0].size()), long_text_tokens);
    try {
        long_text_request(wide, naive);
        ADD_FAILURE() << "the naive split's 2.3 GB of maps were not refused";
    } catch (const Error& e) {
        const std::string message = e.what();
        EXPECT_NE(message.find("view + transpose"), std::string::npos) << message;
        EXPECT_NE(message.find("2 GB: not computed"), std::string::npos) << message;
        EXPECT_EQ(message.find('\n'), std::string::npos) << message;
    }
    EXPECT_EQ(long_text_request(wide, LiveRequest{{text_}, AttentionOptions{}}).options.maps, Maps::queries_and_keys);
}

TEST_F(WindowLong, TheOverviewIsEachHeadsMeanEntropyAndTheStripItsDistanceAlongTheText) {
    const int T = length();
    test::TempDir dir;
    const test::WindowShot shot = test::shoot_window({"--model", model_dir(), "--text-file", text_path(),
                                                      "--window-size", "1280x800", "--layer", "1", "--head", "2"},
                                                     dir.path, "overview");
    ASSERT_EQ(shot.run.status, 0) << shot.run.err;
    EXPECT_TRUE(test::entries(shot.layout, "heads").empty());  // no map of every cell: the long view
    ASSERT_EQ(test::entries(shot.layout, "long-text").size(), 1u);

    // Each head's entropy, averaged over its rows from 1 (row 0 sees key 0 alone).
    std::vector<double> entropy(layers * heads, 0.0);
    for (int l = 0; l < layers; ++l)
        for (int h = 0; h < heads; ++h) {
            double sum = 0;
            for (int q = 1; q < T; ++q)
                for (int k = 0; k <= q; ++k)
                    if (const double w = weight(l, h, q, k); w > 0) sum -= w * std::log(w);
            entropy[l * heads + h] = sum / (T - 1);
        }
    test::check_overview_cells(shot.image, shot.layout, entropy, heads);

    // The strip: head (1, 2)'s mean distance sum_k w (q - k) over each part's rows.
    const json parts = test::entries(shot.layout, "distance-strip");
    ASSERT_GE(parts.size(), 16u);
    const int step = parts[0]["rows_per_cell"];
    std::vector<double> distance;
    for (size_t p = 0; p < parts.size(); ++p) {
        double sum = 0;
        const int first = 1 + static_cast<int>(p) * step, end = std::min(T, first + step);
        for (int q = first; q < end; ++q)
            for (int k = 0; k <= q; ++k) sum += weight(1, 2, q, k) * (q - k);
        distance.push_back(sum / (end - first));
    }
    const auto [nearest, farthest] = std::minmax_element(distance.begin(), distance.end());
    EXPECT_GT(*farthest - *nearest, 100);  // a head that reads farther back along the text: the strip is not flat
    for (const json& part : parts) {
        EXPECT_EQ(part["layer"], 1);
        EXPECT_EQ(part["head"], 2);
        const int p = part["part"];
        const std::array<int, 3> got = test::centre(shot.image, part);
        const double want = (distance[p] - *nearest) / (*farthest - *nearest);
        EXPECT_TRUE(test::near(got, test::viridis(want)))
            << "part " << p << ": " << want << ", drawn " << got[0] << "," << got[1] << "," << got[2];
    }
}

TEST_F(WindowLong, ZoomedToSingleCellsTheMapIsEachWeightExactly) {
    test::TempDir dir;
    const test::WindowShot shot =
        test::shoot_window({"--model", model_dir(), "--text-file", text_path(), "--window-size", "1280x800", "--layer",
                            "1", "--head", "2", "--rows", "2040:2056", "--cols", "2032:2048"},
                           dir.path, "zoom");
    ASSERT_EQ(shot.run.status, 0) << shot.run.err;
    const json cells = test::entries(shot.layout, "long-map");
    ASSERT_EQ(cells.size(), 16u * 16u);
    int masked = 0;
    for (const json& cell : cells) {
        EXPECT_EQ(cell["step_rows"], 1);
        EXPECT_EQ(cell["step_cols"], 1);
        const int q = cell["row_begin"].get<int>() + cell["cell_row"].get<int>();
        const int k = cell["col_begin"].get<int>() + cell["cell_col"].get<int>();
        const std::array<int, 3> got = test::centre(shot.image, cell);
        if (k > q) {
            EXPECT_TRUE(hatched(got)) << q << "," << k;
            ++masked;
        } else
            EXPECT_TRUE(test::near(got, test::viridis(weight(1, 2, q, k))))
                << "query " << q << " key " << k << ": " << weight(1, 2, q, k) << ", drawn " << got[0] << "," << got[1]
                << "," << got[2];
    }
    EXPECT_EQ(masked, 28);  // keys 2041..2047 past queries 2040..2046
}

TEST_F(WindowLong, AShortTextKeepsEveryMap) {
    test::TempDir dir;
    const test::WindowShot shot = test::shoot_window(
        {"--model", model_dir(), "--text", "The cat sat on the mat.", "--window-size", "1280x800"}, dir.path, "short");
    ASSERT_EQ(shot.run.status, 0) << shot.run.err;
    EXPECT_TRUE(test::entries(shot.layout, "long-text").empty());
    EXPECT_EQ(test::entries(shot.layout, "heads").size(), static_cast<size_t>(heads * 7 * 7));  // 7 tokens
}

// Driven as a person drives it: the wheel over the map zooms about the
// mouse (the token under it stays there) down to every cell, and a drag
// pans by as many tokens as it moved pixels' worth.
TEST_F(WindowLong, TheWheelZoomsTheMapAboutTheMouseAndADragPansIt) {
    test::TempDir dir;
    const std::vector<std::string> args = {"--model", model_dir(), "--text-file", text_path()};
    std::vector<std::string> shot_args = args;
    shot_args.insert(shot_args.end(), {"--window-size", "1280x800"});
    const test::WindowShot first = test::shoot_window(shot_args, dir.path, "whole");
    ASSERT_EQ(first.run.status, 0) << first.run.err;
    const json whole = test::entries(first.layout, "long-map");
    ASSERT_FALSE(whole.empty());
    const double left = whole.front()["x"], top = whole.front()["y"];
    const double side = whole.back()["x"].get<double>() + whole.back()["w"].get<double>() - left;
    const int x = static_cast<int>(left + side / 2), y = static_cast<int>(top + side / 2);

    const test::VirtualScreen screen;
    ASSERT_FALSE(screen.name().empty()) << "Xvfb did not start";
    const auto layout = dir.path / "driven.json";
    std::vector<std::string> driven_args = args;
    driven_args.insert(driven_args.end(), {"--layout", layout.string()});
    test::DrivenWindow window(screen.name(), driven_args, dir.path);
    window.settled_screen();
    EXPECT_EQ(window.xdotool({"mousemove", std::to_string(x), std::to_string(y)}).status, 0);
    const int notches = 12;
    for (int n = 0; n < notches; ++n)  // each notch held apart: ImGui 1.86 reads one wheel step a frame
        EXPECT_EQ(window.xdotool({"click", "4", "sleep", "0.15"}).status, 0);
    window.settled_screen();
    const int drag = 100;  // pixels to the right
    const std::string to = std::to_string(x + drag), at = std::to_string(y);
    EXPECT_EQ(
        window.xdotool({"mousedown", "1", "sleep", "0.3", "mousemove", to, at, "sleep", "0.5", "mouseup", "1"}).status,
        0);
    window.settled_screen();
    ASSERT_EQ(window.quit(), 0);

    int zoomed = length();
    for (int n = 0; n < notches; ++n) zoomed = std::max(4, static_cast<int>(std::lround(zoomed * 0.8)));
    const json cells = test::entries(test::read_layout(layout), "long-map");
    ASSERT_EQ(cells.size(), static_cast<size_t>(zoomed * zoomed)) << "the wheel did not zoom to every cell";
    EXPECT_EQ(cells[0]["step_rows"], 1);
    // The token under the mouse stayed there (each notch rounds to a
    // token); the mouse at the map's centre zoomed rows and keys alike, then
    // the drag moved the keys alone.
    const int row_begin = cells[0]["row_begin"], col_begin = cells[0]["col_begin"];
    EXPECT_NEAR(row_begin + zoomed / 2.0, length() / 2.0, notches + 1);
    EXPECT_NEAR(row_begin - col_begin, drag / side * zoomed, 2);
}

// Typing at the end of the long text, driven by xdotool: each keystroke's
// forward reuses the text before it (the status bar says how many rows it
// computed), and what the window shows afterwards is a fresh forward's of
// the whole typed text: its length, the whole map of it (the mouse was over
// the map before), and the overview's entropies (each head's mean over its
// rows from 1, core's summaries of that forward).
TEST_F(WindowLong, TypingAtTheEndComputesTheNewRowsOnly) {
    test::TempDir dir;
    const std::vector<std::string> args = {"--model", model_dir(), "--text-file", text_path()};
    std::vector<std::string> shot_args = args;
    shot_args.insert(shot_args.end(), {"--window-size", "1280x800"});
    const test::WindowShot first = test::shoot_window(shot_args, dir.path, "before");
    ASSERT_EQ(first.run.status, 0) << first.run.err;
    const test::Centres controls = test::control_centres(first.layout);
    ASSERT_TRUE(controls.contains("text"));

    const test::VirtualScreen screen;
    ASSERT_FALSE(screen.name().empty()) << "Xvfb did not start";
    const auto layout = dir.path / "typed.json";
    std::vector<std::string> driven_args = args;
    driven_args.insert(driven_args.end(), {"--layout", layout.string()});
    test::DrivenWindow window(screen.name(), driven_args, dir.path);
    window.settled_screen();
    // The mouse over the whole map first: the map then grows with the text.
    const json map = test::entries(first.layout, "long-map");
    ASSERT_FALSE(map.empty());
    EXPECT_EQ(window
                  .xdotool({"mousemove", std::to_string(map[0]["x"].get<int>() + 20),
                            std::to_string(map[0]["y"].get<int>() + 20)})
                  .status,
              0);
    window.settled_screen();
    window.click(controls.at("text"));
    const std::string typed = " cat sat";
    EXPECT_EQ(window.xdotool({"type", "--delay", "80", typed}).status, 0);
    const test::Image shot = window.settled_screen();
    ASSERT_EQ(window.quit(), 0);

    auto backend = make_cpu_backend();
    backend->load_weights(*model_);
    const Batch batch{model_->tokenizer.encode_texts({text_ + typed}), model_->config.pad_id()};
    const int T = batch.T();
    ASSERT_EQ(T, length() + 2);
    AttentionResult fresh;
    backend->forward(batch, long_text_options(AttentionOptions{}), fresh);
    const json entries = test::read_layout(layout);
    ASSERT_EQ(test::entries(entries, "long-text").size(), 1u);
    EXPECT_EQ(test::entries(entries, "long-text")[0]["tokens"], T);
    const json typed_map = test::entries(entries, "long-map");
    ASSERT_FALSE(typed_map.empty());
    EXPECT_EQ(typed_map[0]["row_end"], T);  // not the length the mouse found it at
    EXPECT_EQ(typed_map[0]["col_end"], T);
    std::string status;
    for (const json& entry : entries)
        if (entry.value("view", "") == "status" && entry.value("name", "") == "tokens") status = entry["text"];
    // The last keystroke computed its token's row, or with the one before it where BPE joined them.
    const bool one_row =
        status == "reused " + std::to_string(T - 1) + " of " + std::to_string(T) + " tokens, computed 1";
    const bool two_rows =
        status == "reused " + std::to_string(T - 2) + " of " + std::to_string(T) + " tokens, computed 2";
    EXPECT_TRUE(one_row || two_rows) << status;

    std::vector<double> entropy(layers * heads, 0.0);
    for (int l = 0; l < layers; ++l)
        for (int h = 0; h < heads; ++h) {
            for (int q = 1; q < T; ++q) entropy[l * heads + h] += fresh.summary(&RowSummaries::entropy, l, 0, h)[q];
            entropy[l * heads + h] /= T - 1;
        }
    test::check_overview_cells(shot, entries, entropy, heads);
}

// Past the model's 2,304 positions a text is cut there, and the status bar
// and the text box say so; the long view shows the tokens kept.
TEST_F(WindowLong, ATextPastTheModelsPositionsIsCutThereAndSaysSo) {
    test::TempDir dir;
    std::ofstream(dir.path / "longer.txt") << text_ << text_;
    const test::WindowShot shot = test::shoot_window(
        {"--model", model_dir(), "--text-file", (dir.path / "longer.txt").string(), "--window-size", "1280x800"},
        dir.path, "cut");
    ASSERT_EQ(shot.run.status, 0) << shot.run.err;
    const json long_text = test::entries(shot.layout, "long-text");
    ASSERT_EQ(long_text.size(), 1u);
    EXPECT_EQ(long_text[0]["tokens"], 2304);
    int cut_notes = 0;
    for (const json& entry : shot.layout)
        if (entry.value("name", "") == "cut" || entry.value("name", "") == "text cut") {
            EXPECT_NE(entry["text"].get<std::string>().find("2304"), std::string::npos) << entry.dump();
            ++cut_notes;
        }
    EXPECT_EQ(cut_notes, 2);  // the status bar's and the text box's
}

TEST_F(WindowLong, AMissingTextFileIsAOneLineError) {
    test::TempDir dir;
    const std::string missing = (dir.path / "missing.txt").string();
    test::expect_one_line_error(test::run_window({"--model", model_dir(), "--text-file", missing}, dir.path),
                                "headscope", missing);
}

// The maps the view asks for, computed from the kept queries and keys,
// against the full maps pooled here: each cell the largest weight of its
// block (max) or its rows' weight on its keys, averaged over its rows
// (mean); masked where no query of the block sees a key of it.
TEST_F(WindowLong, AskedMapsArePooledFromTheExactWeights) {
    auto backend = make_cpu_backend();
    backend->load_weights(*model_);
    KeptMaps kept{
        std::shared_ptr<const Model>(model_, [](const Model*) {}), *batch_, long_text_options(AttentionOptions{}), {}};
    backend->forward(kept.batch, kept.options, kept.result);
    const int T = length();
    for (const Pooling pooling : {Pooling::max, Pooling::mean}) {
        const MapAsk ask{1, 3, 0, {100, T, 7, 1900}, 97, pooling};
        const MapAnswer answer = compute_map(kept, ask);
        const int sr = answer.step_rows, sc = answer.step_cols;
        ASSERT_EQ(sr, (T - 100 + 96) / 97);
        ASSERT_EQ(answer.image.rows, (T - 100 + sr - 1) / sr);
        ASSERT_EQ(answer.image.cols, (1893 + sc - 1) / sc);
        for (int r = 0; r < answer.image.rows; ++r)
            for (int c = 0; c < answer.image.cols; ++c) {
                const int q0 = 100 + r * sr, q1 = std::min(T, q0 + sr), k0 = 7 + c * sc, k1 = std::min(1900, k0 + sc);
                double largest = 0, sum = 0;
                for (int q = q0; q < q1; ++q)
                    for (int k = k0; k < k1; ++k)
                        largest = std::max(largest, weight(1, 3, q, k)), sum += weight(1, 3, q, k);
                const float got = answer.image.cells[static_cast<size_t>(r) * answer.image.cols + c];
                if (k0 > q1 - 1)
                    EXPECT_EQ(got, masked_cell) << r << "," << c;
                else
                    EXPECT_NEAR(got, pooling == Pooling::max ? largest : sum / (q1 - q0), 1e-5) << r << "," << c;
            }
    }
    const std::vector<float> row = query_row(kept, 0, 1, 0, 1500);
    ASSERT_EQ(row.size(), static_cast<size_t>(T));
    for (int k = 0; k < T; ++k) EXPECT_NEAR(row[k], k <= 1500 ? weight(0, 1, 1500, k) : 0.0, 1e-6) << k;
}

}  // namespace

namespace {

// The lens cells of `shot` (view "lens"), each coloured by the top-1 p of
// core's lens of one forward of the whole text there (sampled in its lower
// right corner, clear of the token drawn at its left), every layer's; the
// first and last positions drawn.
std::pair<int, int> expect_lens_cells(const test::WindowShot& shot, const Model& model, const Batch& batch) {
    AttentionOptions options;
    options.maps = Maps::none, options.lens_k = 5;
    AttentionResult lens;
    auto backend = make_cpu_backend();
    backend->load_weights(model);
    backend->forward(batch, options, lens);
    const json cells = test::entries(shot.layout, "lens");
    int first = static_cast<int>(batch.token_ids[0].size()), last = -1;
    for (const json& cell : cells) {
        const int t = cell["position"], l = cell["layer"];
        first = std::min(first, t), last = std::max(last, t);
        const int x = static_cast<int>(cell["x"].get<double>() + cell["w"].get<double>()) - 3;
        const int y = static_cast<int>(cell["y"].get<double>() + cell["h"].get<double>()) - 3;
        const std::array<int, 3> got = shot.image.at(x, y);
        const float p = lens.lens_at(l, 0, t)[0].p;
        EXPECT_TRUE(test::near(got, test::viridis(p))) << "layer " << l << " position " << t << ": " << p << ", drawn "
                                                       << got[0] << "," << got[1] << "," << got[2];
    }
    EXPECT_EQ(cells.size(), static_cast<size_t>(layers * (last - first + 1)));
    return {first, last};
}

}  // namespace

// The lens tab on a long text: the query row (--query) and the positions
// before it that fit the width.
TEST_F(WindowLong, TheLensTabShowsTheLensOfTheQueryRowAndThoseBeforeIt) {
    const int q = 1500;
    test::TempDir dir;
    const test::WindowShot shot =
        test::shoot_window({"--model", model_dir(), "--text-file", text_path(), "--window-size", "1280x800", "--view",
                            "lens", "--query", std::to_string(q)},
                           dir.path, "lens");
    ASSERT_EQ(shot.run.status, 0) << shot.run.err;
    const auto [first, last] = expect_lens_cells(shot, *model_, *batch_);
    EXPECT_EQ(last, q);
    EXPECT_GE(last - first + 1, 16) << "as many positions as fit 1280 pixels";
}

// The lens follows the rows on screen: the map zoomed to queries 1000-1099
// (--rows) gives the lens from position 1000 on; the tokens tab scrolled
// down by 3 notches of the wheel, then the lens tab clicked, the lens from
// the first row the tokens tab had on screen: past the text's start, before its last rows
// (the lens of the last token and those before it, where nothing is on screen).
TEST_F(WindowLong, TheLensFollowsTheRowsOnScreen) {
    test::TempDir dir;
    const test::WindowShot zoomed =
        test::shoot_window({"--model", model_dir(), "--text-file", text_path(), "--window-size", "1280x800", "--view",
                            "lens", "--rows", "1000:1100"},
                           dir.path, "zoomed");
    ASSERT_EQ(zoomed.run.status, 0) << zoomed.run.err;
    const auto [zoomed_first, zoomed_last] = expect_lens_cells(zoomed, *model_, *batch_);
    EXPECT_EQ(zoomed_first, 1000);
    const int fit = zoomed_last - zoomed_first + 1;
    json lens_tab;
    for (const json& tab : test::entries(zoomed.layout, "tab"))
        if (tab["name"] == "lens") lens_tab = tab;
    ASSERT_FALSE(lens_tab.is_null());

    const test::VirtualScreen screen;
    ASSERT_FALSE(screen.name().empty()) << "Xvfb did not start";
    const auto layout = dir.path / "scrolled.json";
    test::DrivenWindow window(
        screen.name(), {"--model", model_dir(), "--text-file", text_path(), "--view", "tokens", "--layout", layout},
        dir.path);
    window.settled_screen();
    EXPECT_EQ(window.xdotool({"mousemove", "640", "500"}).status, 0);
    for (int n = 0; n < 3; ++n) EXPECT_EQ(window.xdotool({"click", "5", "sleep", "0.15"}).status, 0);  // of ~90 lines
    window.settled_screen();
    window.click({std::to_string(static_cast<int>(lens_tab["x"].get<double>() + lens_tab["w"].get<double>() / 2)),
                  std::to_string(static_cast<int>(lens_tab["y"].get<double>() + lens_tab["h"].get<double>() / 2))});
    window.settled_screen();
    ASSERT_EQ(window.quit(), 0);
    const json cells = test::entries(test::read_layout(layout), "lens");
    ASSERT_FALSE(cells.empty()) << "the lens tab was not shown";
    int first = length(), last = -1;
    for (const json& cell : cells)
        first = std::min<int>(first, cell["position"]), last = std::max<int>(last, cell["position"]);
    EXPECT_GT(first, 0) << "positions " << first << " to " << last;
    EXPECT_LT(last, length() - 1) << "positions " << first << " to " << last;
    EXPECT_EQ(last - first + 1, fit);
}
