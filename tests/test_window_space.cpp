// How the window uses its space, at two window sizes: every map lies inside
// the window and no two overlap, nor any the predictions panel, the maps (with their labels) cover a
// share of the area below the tabs, no empty band wider than a quarter of
// the window lies right of them, they grow when the window grows, the large
// head and the dance's memory grid fill their area's height, and
// every token label is whole or cut at a glyph and ended with an ellipsis,
// inside its map's square and off the map itself.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "model_writer.h"
#include "screenshot.h"

using namespace headscope;
using nlohmann::json;

namespace {

struct Rect {
    double x, y, w, h;
    explicit Rect(const json& e) : x(e["x"]), y(e["y"]), w(e["w"]), h(e["h"]) {}
    double area() const { return w * h; }
    bool inside(const Rect& o) const {
        return x >= o.x - 0.5 && y >= o.y - 0.5 && x + w <= o.x + o.w + 0.5 && y + h <= o.y + o.h + 0.5;
    }
    bool overlaps(const Rect& o) const {  // more than the half pixel a rounding can give
        return std::min(x + w, o.x + o.w) - std::max(x, o.x) > 0.5 &&
               std::min(y + h, o.y + o.h) - std::max(y, o.y) > 0.5;
    }
};

// The maps' share of the area below the tabs, after checking each lies in
// the window and none overlaps another; the smallest map's side; the empty
// band between the maps' right edge and what lies right of them (the token
// view beside them, the predictions panel, or the window's edge).
struct Space {
    double share = 0, smallest_side = 1e9, band = 0;
    int maps = 0;
};

// The rectangle around every entry of `view`.
Rect bounds(const json& layout, const std::string& view) {
    double x0 = 1e9, y0 = 1e9, x1 = -1e9, y1 = -1e9;
    for (const json& e : test::entries(layout, view)) {
        const Rect r(e);
        x0 = std::min(x0, r.x), y0 = std::min(y0, r.y), x1 = std::max(x1, r.x + r.w), y1 = std::max(y1, r.y + r.h);
    }
    return Rect(json{{"x", x0}, {"y", y0}, {"w", x1 - x0}, {"h", y1 - y0}});
}

Space measure(const test::WindowShot& shot, int width, int height) {
    EXPECT_EQ(shot.run.status, 0) << shot.run.err;
    EXPECT_EQ(shot.image.width, width);
    EXPECT_EQ(shot.image.height, height);
    const Rect window(json{{"x", 0}, {"y", 0}, {"w", width}, {"h", height}});
    std::vector<Rect> maps, panels, beside;
    double below_tabs = 0;
    for (const json& e : shot.layout) {
        if (e["view"] == "map") maps.emplace_back(e);
        if (e["view"] == "predictions-panel") panels.emplace_back(e);
        if (e["view"] == "predictions-panel" || e["view"] == "tokens-beside") beside.emplace_back(e);
        if (e["view"] == "below-tabs") below_tabs = Rect(e).area();
    }
    EXPECT_EQ(panels.size(), 1u);
    Space space;
    space.maps = static_cast<int>(maps.size());
    for (size_t a = 0; a < maps.size(); ++a) {
        EXPECT_TRUE(maps[a].inside(window)) << "map " << a << " at " << maps[a].x << "," << maps[a].y;
        for (size_t b = a + 1; b < maps.size(); ++b) EXPECT_FALSE(maps[a].overlaps(maps[b])) << a << " and " << b;
        for (const Rect& panel : panels)
            EXPECT_FALSE(maps[a].overlaps(panel)) << "map " << a << " under the predictions";
        space.share += maps[a].area();
        space.smallest_side = std::min(space.smallest_side, std::min(maps[a].w, maps[a].h));
    }
    EXPECT_GT(below_tabs, 0);
    space.share /= below_tabs;
    double right = 0, next = width;
    for (const Rect& map : maps) right = std::max(right, map.x + map.w);
    for (const Rect& b : beside)
        if (b.x >= right - 0.5) next = std::min(next, b.x);
    space.band = next - right;
    return space;
}

class WindowSpaceTest : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        dir_ = new test::TempDir;
        // GPT-2 small's 12 layers of 12 heads, with tiny weights: the model view's grid is what matters.
        test::write_test_model(dir_->path / "small-shape",
                               {.n_layer = 12, .n_head = 12, .n_embd = 48, .n_positions = 256});
        // GPT-2's vocabulary, whose long words are single tokens.
        test::write_test_model(dir_->path / "words", {.n_layer = 1, .n_head = 4, .n_embd = 32});
    }
    static void TearDownTestSuite() { delete dir_; }

    test::WindowShot shoot(const std::string& name, std::vector<std::string> args, const std::string& size) {
        args.insert(args.end(), {"--window-size", size});
        return test::shoot_window(args, dir_->path, name + "-" + size);
    }

    // The view of `args` at both sizes: `maps` maps, covering at least
    // `share` of the area below the tabs at 1920x1080, larger than at 1280x800.
    void expect_fills(const std::string& what, const std::vector<std::string>& args, int maps, double share) {
        const Space small = measure(shoot(what, args, "1280x800"), 1280, 800);
        const Space large = measure(shoot(what, args, "1920x1080"), 1920, 1080);
        EXPECT_EQ(small.maps, maps);
        EXPECT_EQ(large.maps, maps);
        EXPECT_GE(large.share, share);
        EXPECT_GT(large.smallest_side, small.smallest_side * 1.2);
        EXPECT_LT(small.band, 1280 / 4) << "an empty band right of the maps at 1280x800";
        EXPECT_LT(large.band, 1920 / 4) << "an empty band right of the maps at 1920x1080";
        std::printf("%s: %.0f%% of the area below the tabs at 1280x800, %.0f%% at 1920x1080; bands %.0f and %.0f px\n",
                    what.c_str(), 100 * small.share, 100 * large.share, small.band, large.band);
    }

    static test::TempDir* dir_;
    const std::string text_ = "The cat sat on the mat because it was soft, and the dog sat on the rug.";
};
test::TempDir* WindowSpaceTest::dir_ = nullptr;

TEST_F(WindowSpaceTest, HeadsOfTheBuiltInModelFillTheWindowAndGrowWithIt) {
    expect_fills("heads view, built-in model", {"--text", text_}, 4, 0.45);
}

// GPT-2's 12 heads under a text that fills the text box (maps in two rows
// of six): the grid's columns are as wide as their maps (a title wider ends
// in an ellipsis), so none runs under the predictions panel.
TEST_F(WindowSpaceTest, TwelveHeadsFitBesideThePredictions) {
    std::string long_text;
    for (int n = 0; n < 8; ++n) long_text += text_ + " ";
    expect_fills("heads view, 12 heads", {"--model", (dir_->path / "small-shape").string(), "--text", long_text}, 12,
                 0.3);
}

// The model view's 12 rows fix the thumbnails' height, so the share is lower
// (a line of head numbers heads the grid); the token view takes the width left.
TEST_F(WindowSpaceTest, ModelViewOfAGpt2SmallShapeFillsTheWindowAndGrowsWithIt) {
    expect_fills("model view, 12 x 12 heads",
                 {"--model", (dir_->path / "small-shape").string(), "--text", text_, "--view", "model"}, 144, 0.36);
}

// One head large: a square as tall as the area allows, the token view in the width beside it.
TEST_F(WindowSpaceTest, TheLargeHeadFillsTheAreaHeight) {
    for (const std::string size : {"1280x800", "1920x1080"}) {
        const test::WindowShot shot = shoot("large", {"--text", text_, "--head", "1"}, size);
        const int width = size == "1280x800" ? 1280 : 1920, height = size == "1280x800" ? 800 : 1080;
        const Space space = measure(shot, width, height);
        EXPECT_EQ(space.maps, 1);
        EXPECT_LT(space.band, width / 4) << size;
        const Rect area(test::entries(shot.layout, "below-tabs").at(0)), map = bounds(shot.layout, "map");
        EXPECT_GT(map.h, 0.8 * area.h) << size;
        EXPECT_FALSE(test::entries(shot.layout, "tokens-beside").empty()) << size;
    }
}

// The dance's step 2 shows the memory in storage order and in the view's
// order; the memory grid's rows fill the height left below the step's text.
TEST_F(WindowSpaceTest, TheDanceMemoryGridFillsTheHeightLeft) {
    for (const std::string size : {"1280x800", "1920x1080"}) {
        const test::WindowShot shot = shoot("dance", {"--text", text_, "--view", "dance", "--dance-step", "2"}, size);
        ASSERT_EQ(shot.run.status, 0) << shot.run.err;
        const Rect area(test::entries(shot.layout, "below-tabs").at(0)), memory = bounds(shot.layout, "dance");
        const double bottom = area.y + area.h;
        EXPECT_GT(memory.y + memory.h, bottom - 0.12 * area.h) << size << ": the grid ends well above the area's end";
        EXPECT_LE(memory.y + memory.h, bottom) << size;
    }
}

// Labels of a text with long tokens: each is its whole token or a prefix of
// it cut at a character and ended with an ellipsis; each lies in its map's
// square, left of the map (queries) or above it (keys).
TEST_F(WindowSpaceTest, TokenLabelsAreWholeOrEndInAnEllipsis) {
    const std::string text =
        "Their responsibilities include international cooperation and environmental sustainability, so it is.";
    for (const std::string size : {"1280x800", "1920x1080"}) {
        const test::WindowShot shot =
            shoot("labels", {"--model", (dir_->path / "words").string(), "--text", text}, size);
        ASSERT_EQ(shot.run.status, 0) << shot.run.err;
        std::map<std::pair<int, int>, Rect> squares;                // (layer, head): the map with its labels
        std::map<std::pair<int, int>, std::array<double, 4>> maps;  // the map's cells: x0, y0, x1, y1
        for (const json& e : shot.layout) {
            const std::pair<int, int> key{e.value("layer", -1), e.value("head", -1)};
            if (e["view"] == "map" && e["of"] == "heads") squares.emplace(key, Rect(e));
            if (e["view"] != "heads") continue;
            const Rect cell(e);
            auto [at, fresh] = maps.try_emplace(key, std::array{cell.x, cell.y, cell.x + cell.w, cell.y + cell.h});
            at->second = {std::min(at->second[0], cell.x), std::min(at->second[1], cell.y),
                          std::max(at->second[2], cell.x + cell.w), std::max(at->second[3], cell.y + cell.h)};
        }
        int labels = 0, cut = 0;
        for (const json& e : shot.layout) {
            if (e["view"] != "label") continue;
            ++labels;
            const std::string shown = e["shown"], token = e["text"];
            cut += shown != token;
            EXPECT_EQ(test::label_fault(shown, token), "");
            const Rect label(e);
            const std::pair<int, int> key{e["layer"], e["head"]};
            EXPECT_TRUE(label.inside(squares.at(key))) << shown;
            const std::array<double, 4>& m = maps.at(key);
            EXPECT_FALSE(label.overlaps(Rect(json{{"x", m[0]}, {"y", m[1]}, {"w", m[2] - m[0]}, {"h", m[3] - m[1]}})))
                << shown;
        }
        EXPECT_GT(labels, 0) << size;
        EXPECT_GT(cut, 0) << size;  // the long words do not fit whole
    }
}

// A text too long for a label on every row of the grid's maps: every k-th
// token is labelled (k > 1, the same k for queries and keys), in order, the
// labels apart from each other, each in its map's square.
TEST_F(WindowSpaceTest, LongTextsLabelEveryKthToken) {
    const std::string text =
        "The cat sat on the mat because it was soft, and the dog sat on the rug. "
        "The cat sat on the mat because it was soft, and the dog sat on the rug.";
    const test::WindowShot shot =
        shoot("every-kth", {"--model", (dir_->path / "words").string(), "--text", text}, "1280x800");
    ASSERT_EQ(shot.run.status, 0) << shot.run.err;
    std::map<std::pair<int, int>, Rect> squares;
    for (const json& e : shot.layout)
        if (e["view"] == "map" && e["of"] == "heads")
            squares.emplace(std::pair{e["layer"].get<int>(), e["head"].get<int>()}, Rect(e));
    std::vector<int> tokens;  // the first map's labels along one axis, in the order drawn
    std::vector<Rect> rects;
    for (const json& e : shot.layout) {
        if (e["view"] != "label" || e["head"] != 0) continue;
        EXPECT_TRUE(Rect(e).inside(squares.at({e["layer"], e["head"]})));
        if (!tokens.empty() && e["token"].get<int>() <= tokens.back()) break;  // the keys' labels begin
        tokens.push_back(e["token"]);
        rects.emplace_back(e);
    }
    ASSERT_GE(tokens.size(), 3u);
    const int every = tokens[1] - tokens[0];
    EXPECT_GT(every, 1) << "every row labelled: the text is not long enough for this test";
    for (size_t n = 0; n < tokens.size(); ++n) {
        EXPECT_EQ(tokens[n], int(n) * every);
        if (n) {
            EXPECT_FALSE(rects[n].overlaps(rects[n - 1])) << "labels " << tokens[n - 1] << " and " << tokens[n];
        }
    }
}

}  // namespace
