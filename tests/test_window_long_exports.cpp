// A long text's token view and exports in the window, against core's full
// maps of the same tokens (window_long_fixture.h): the tokens tab's row over
// the whole document, each token's weight and background colour; the JSON
// and NPY exports of the region in view (exact) and of the whole map in
// view (every map pooled to the pixels shown), saying in the file which;
// the SVG figure, which draws every map, refused in one line; the tabs that
// need every map saying so in a line.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "npy_file.h"
#include "screenshot.h"
#include "window_long_fixture.h"

using namespace headscope;
using nlohmann::json;
using test::heads;
using test::layers;
using test::WindowLong;

namespace {

// The query row clicked (--query) over every key of the document, the view
// scrolled to it: each token's weight (null past the query, masked), and
// the drawn tokens' background, the colormap of the weight.
TEST_F(WindowLong, TheTokensTabShowsAQueryRowOverTheWholeText) {
    const int T = length(), query = 1500;
    test::TempDir dir;
    const test::WindowShot shot =
        test::shoot_window({"--model", model_dir(), "--text-file", text_path(), "--window-size", "1280x800", "--view",
                            "tokens", "--layer", "1", "--head", "2", "--query", std::to_string(query)},
                           dir.path, "tokens");
    ASSERT_EQ(shot.run.status, 0) << shot.run.err;
    const json tokens = test::entries(shot.layout, "token");
    ASSERT_EQ(tokens.size(), static_cast<size_t>(T));
    // Scrolled to the query: its token within what the view shows.
    ASSERT_EQ(test::entries(shot.layout, "tokens-scrolled").size(), 1u);
    const json shown = test::entries(shot.layout, "tokens-scrolled")[0];
    const double top = shown["y"], bottom = top + shown["h"].get<double>();
    const auto on_screen = [&](const json& token) {
        return token["y"].get<double>() >= top && token["y"].get<double>() + token["h"].get<double>() <= bottom;
    };
    EXPECT_TRUE(on_screen(tokens[query])) << tokens[query].dump() << " not within " << shown.dump();
    int drawn = 0;
    for (const json& token : tokens) {
        const int k = token["token"];
        if (k > query) {
            EXPECT_TRUE(token["weight"].is_null()) << k;
            continue;
        }
        ASSERT_FALSE(token["weight"].is_null()) << k;
        EXPECT_NEAR(token["weight"].get<double>(), weight(1, 2, query, k), 1e-6) << k;
        // The background at the token's top-left padding, where the view shows it (the query's is outlined).
        if (!on_screen(token) || k == query) continue;
        const int x = static_cast<int>(token["x"].get<double>()) + 1,
                  y = static_cast<int>(token["y"].get<double>()) + 1;
        EXPECT_TRUE(test::near(shot.image.at(x, y), test::viridis(std::min(1.0, weight(1, 2, query, k)))))
            << "token " << k;
        ++drawn;
    }
    EXPECT_GT(drawn, 100);  // many lines of tokens on screen
}

// Every head's region of the map (layers, 1, heads, rows, cols) against the full maps.
void expect_region(const std::vector<float>& values, int row_begin, int rows, int col_begin, int cols,
                   const std::function<double(int, int, int, int)>& weight) {
    ASSERT_EQ(values.size(), static_cast<size_t>(layers * heads * rows * cols));
    for (int l = 0; l < layers; ++l)
        for (int h = 0; h < heads; ++h)
            for (int i = 0; i < rows; ++i)
                for (int j = 0; j < cols; ++j) {
                    const int q = row_begin + i, k = col_begin + j;
                    const double want = k <= q ? weight(l, h, q, k) : 0.0;
                    ASSERT_NEAR(values[((size_t(l) * heads + h) * rows + i) * cols + j], want, 1e-6)
                        << "L" << l << " H" << h << " query " << q << " key " << k;
                }
}

// Nested JSON arrays [layer][0][head][row][col] as one flat vector.
std::vector<float> flat(const json& attention) {
    std::vector<float> values;
    for (const json& layer : attention)
        for (const json& head : layer[0])
            for (const json& row : head)
                for (const json& w : row) values.push_back(w);
    return values;
}

TEST_F(WindowLong, TheExportsOfTheRegionInViewAreItsExactWeights) {
    test::TempDir dir;
    const auto json_path = dir.path / "region.json", npy_path = dir.path / "region.npy";
    const test::ProcessRun run =
        test::run_window({"--model", model_dir(), "--text-file", text_path(), "--rows", "2040:2056", "--cols",
                          "2032:2048", "--screenshot", (dir.path / "shot.png").string(), "--export-json",
                          json_path.string(), "--export-npy", npy_path.string()},
                         dir.path);
    ASSERT_EQ(run.status, 0) << run.err;
    const json got = json::parse(test::read_file(json_path));
    EXPECT_EQ(got["maps"], "region");
    EXPECT_EQ(got["rows"], json::array({2040, 2056}));
    EXPECT_EQ(got["cols"], json::array({2032, 2048}));
    const auto w = [](int l, int h, int q, int k) { return weight(l, h, q, k); };
    expect_region(flat(got["attention"]), 2040, 16, 2032, 16, w);
    EXPECT_EQ(got["summaries"]["entropy"][1][0][2].size(), static_cast<size_t>(length()));
    const test::NpyArray npy = test::read_npy(npy_path);
    EXPECT_EQ(npy.shape, "2, 1, 4, 16, 16");
    expect_region(npy.data, 2040, 16, 2032, 16, w);
}

// The whole map in view: every map pooled to the pixels it is drawn in,
// each cell the mean of its step x step block (masked weights count as 0).
TEST_F(WindowLong, TheExportsOfTheWholeMapInViewArePooled) {
    test::TempDir dir;
    const auto json_path = dir.path / "pooled.json", npy_path = dir.path / "pooled.npy";
    const test::ProcessRun run = test::run_window(
        {"--model", model_dir(), "--text-file", text_path(), "--window-size", "800x600", "--screenshot",
         (dir.path / "shot.png").string(), "--export-json", json_path.string(), "--export-npy", npy_path.string()},
        dir.path);
    ASSERT_EQ(run.status, 0) << run.err;
    const json got = json::parse(test::read_file(json_path));
    ASSERT_EQ(got["maps"], "pooled");
    EXPECT_EQ(got["pool"]["mode"], "mean");
    const int T = length(), step = got["pool"]["step"], cells = got["pool"]["cells"];
    ASSERT_GT(step, 1);
    ASSERT_EQ(cells, (T + step - 1) / step);
    const std::vector<float> values = flat(got["attention"]);
    ASSERT_EQ(values.size(), static_cast<size_t>(layers * heads * cells * cells));
    for (int l = 0; l < layers; ++l)
        for (int h = 0; h < heads; ++h)
            for (int r = 0; r < cells; ++r)
                for (int c = 0; c <= r; c += std::max(1, r / 7)) {  // every row of cells, some of its columns
                    double sum = 0;
                    const int q1 = std::min(T, (r + 1) * step), k1 = std::min(T, (c + 1) * step);
                    for (int q = r * step; q < q1; ++q)
                        for (int k = c * step; k < std::min(k1, q + 1); ++k) sum += weight(l, h, q, k);
                    const double want = sum / ((q1 - r * step) * (k1 - c * step));
                    ASSERT_NEAR(values[((size_t(l) * heads + h) * cells + r) * cells + c], want, 1e-6)
                        << "L" << l << " H" << h << " cell " << r << "," << c;
                }
    const test::NpyArray npy = test::read_npy(npy_path);
    EXPECT_EQ(npy.shape, "2, 1, 4, " + std::to_string(cells) + ", " + std::to_string(cells));
    EXPECT_EQ(npy.data, values);
}

TEST_F(WindowLong, TheFigureOfALongTextIsRefusedInOneLine) {
    test::TempDir dir;
    const test::ProcessRun run =
        test::run_window({"--model", model_dir(), "--text-file", text_path(), "--screenshot",
                          (dir.path / "shot.png").string(), "--export-svg", (dir.path / "figure.svg").string()},
                         dir.path);
    test::expect_one_line_error(run, "headscope", "a long text keeps no map");
    EXPECT_FALSE(std::filesystem::exists(dir.path / "figure.svg"));
}

// Every tab of the window is there for a long text (the router's only for a
// mixture of experts); those that need every map say why in one line, and
// draw nothing else below it (no map, no grid: the view's background to the
// status bar); the mask tab keeps its list of the batch's texts above it.
TEST_F(WindowLong, EveryTabIsThereAndThoseNeedingEveryMapSayWhyInALine) {
    std::map<std::string, int> line_y;
    // Each tab's line names what it would need (patching and checks say so as the dance does).
    const std::map<std::string, std::string> reason = {
        {"model", "overview"}, {"effects", "contributions"}, {"mask", "hatched"}, {"dance", "every map"}};
    // One run shoots the four tabs, as clicks on them would show them (the long forward once).
    test::TempDir dir;
    const auto shots =
        test::shoot_views({"--model", model_dir(), "--text-file", text_path(), "--window-size", "1280x800"},
                          "model,effects,mask,dance", {"model", "effects", "mask", "dance"}, dir.path, "tabs");
    for (const auto& [view, word] : reason) {
        const test::WindowShot& shot = shots.at(view);
        ASSERT_EQ(shot.run.status, 0) << shot.run.err;
        EXPECT_EQ(test::entries(shot.layout, "tab").size(), 9u) << view;
        const json lines = test::entries(shot.layout, "long-text-line");
        ASSERT_EQ(lines.size(), 1u) << view;
        EXPECT_NE(lines[0]["text"].get<std::string>().find(word), std::string::npos) << view;
        line_y[view] = lines[0]["y"].get<int>();
        const int below = lines[0]["y"].get<int>() + lines[0]["h"].get<int>() + 4;
        const std::array<int, 3> background = shot.image.at(20, below);
        int drawn = 0;
        for (int y = below; y < shot.image.height - 60; y += 3)
            for (int x = 4; x < shot.image.width - 4; x += 3) drawn += shot.image.at(x, y) != background;
        EXPECT_EQ(drawn, 0) << view << ": something drawn below the line";
    }
    EXPECT_GT(line_y["mask"], line_y["model"] + 40);  // below the batch's list
}

}  // namespace
