// The dance view as a user sees it: headscope renders `--view dance` at each
// step of the reshape dance under Xvfb, for a batch of two texts, and every
// float cell it reports drawing is checked pixel by pixel against the colour
// of the float's owner. Owners are worked out here from the buffers' shapes
// (which float of a (B, T, C) buffer belongs to which token and head, ...),
// independently of core's Dance::owner; the colour rule is the one
// documented in app/views/dance_view.h. The step's shape, strides, offset
// and contiguity, the weights its projection names, and the naive split's
// error, must be what headscope-cli dance prints.
#include <gtest/gtest.h>

#include <array>
#include <nlohmann/json.hpp>
#include <set>

#include "model_writer.h"
#include "process.h"
#include "screenshot.h"

using namespace headscope;
using nlohmann::json;

namespace {

constexpr int B = 2, C = 32, NH = 4, hs = C / NH;  // the test model's, and the batch's B

// The sizes a window ran at.
struct Sizes {
    int T, C, NH;
};

struct Owner {
    int t, head;
};

// app/views/dance_view.h: hue = head / NH, saturation 0.65, value from 0.4 (first
// token) to 1 (last), a third of that for a float the step's view does not read.
std::array<double, 3> owner_rgb(const Owner& o, const Sizes& s, bool read) {
    return test::hsv_to_rgb(double(o.head) / s.NH, 0.65, (0.4 + 0.6 * o.t / (s.T - 1)) / (read ? 1 : 3));
}

// Who wrote float n of the buffer a step views, from the buffer's shape:
// c_attn's output is (B, T, 3C), [Q | K | V] with head h in channels
// [h*hs, (h+1)*hs) of each third; the naive split's copy of Q and the merged
// output are (B, T, C) alike; the weights are (B, NH, T, T) with the query
// token third; the per-head output is (B, NH, T, hs).
Owner owner(const std::string& buffer, int64_t n, const Sizes& s) {
    const int T = s.T, hs = s.C / s.NH;
    if (buffer == "qkv") return {int(n / (3 * s.C) % T), int(n % (3 * s.C) % s.C / hs)};
    if (buffer == "q_copied" || buffer == "y_merged") return {int(n / s.C % T), int(n % s.C / hs)};
    if (buffer == "att") return {int(n / T % T), int(n / (T * T) % s.NH)};
    EXPECT_EQ(buffer, "y");
    return {int(n / hs % T), int(n / (T * hs) % s.NH)};
}

// The storage element at row-major position m of a strided view.
int64_t storage_at(const json& step, int64_t m) {
    int64_t at = step["offset"];
    for (size_t d = step["shape"].size(); d-- > 0;) {
        const int64_t size = step["shape"][d];
        at += m % size * step["strides"][d].get<int64_t>();
        m /= size;
    }
    return at;
}

class DanceViewTest : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        dir_ = new test::TempDir;
        test::write_test_model(dir_->path / "model", {.n_layer = 2, .n_head = NH, .n_embd = C, .n_positions = 32});
    }
    static void TearDownTestSuite() { delete dir_; }

    std::string model(const std::string& name = "model") const { return (dir_->path / name).string(); }

    json cli_dance(const std::string& split) {
        const test::ProcessRun run = test::run_program(
            {test::cli_program(), "dance", "--model", model(), "--text", long_, "--text", short_, "--split", split},
            dir_->path);
        EXPECT_EQ(run.status, 0) << run.err;
        return json::parse(run.out);
    }

    struct Shot {
        test::Image image;
        json description;   // the step's shape, strides, ... as the window shows them
        json memory, read;  // the cells of the buffer in storage order and in the view's order
    };

    Shot shoot(const std::string& split, int step, const std::string& model_name = "model") {
        const std::string name = model_name + "-" + split + "-" + std::to_string(step);
        const test::WindowShot window =
            test::shoot_window({"--model", model(model_name), "--view", "dance", "--split", split, "--dance-step",
                                std::to_string(step), "--text", long_, "--text", short_},
                               dir_->path, name);
        EXPECT_EQ(window.run.status, 0);
        Shot shot{window.image, nullptr, json::array(), json::array()};
        for (const json& cell : window.layout) {
            if (cell["view"] == "dance-step")
                shot.description = cell;
            else if (cell["view"] == "dance")
                shot.memory.push_back(cell);
            else if (cell["view"] == "dance-read")
                shot.read.push_back(cell);
        }
        return shot;
    }

    // Every cell's centre pixel has its float's owner's colour, dark where
    // the step's view does not read it (GPT-2's steps on c_attn's output read
    // Q's third of each row); returns the owners in the cells' order.
    std::vector<Owner> check_pixels(const Shot& shot, const json& cells, const std::string& buffer, const Sizes& s) {
        std::vector<Owner> owners;
        for (const json& cell : cells) {
            const Owner o = owner(buffer, cell["index"], s);
            const bool read = buffer != "qkv" || cell["index"].get<int64_t>() % (3 * s.C) < s.C;
            owners.push_back(o);
            const int x = int(cell["x"].get<double>() + cell["w"].get<double>() / 2);
            const int y = int(cell["y"].get<double>() + cell["h"].get<double>() / 2);
            const std::array<int, 3> got = shot.image.at(x, y);
            const std::array<double, 3> want = owner_rgb(o, s, read);
            for (int c = 0; c < 3; ++c)
                EXPECT_NEAR(got[c], want[c], 2.0)
                    << buffer << " float " << cell["index"] << " token " << o.t << " head " << o.head;
        }
        return owners;
    }

    // One walk, every step: the description against the CLI's, one memory
    // cell per float of the buffer with its owner's colour, and where the
    // view's order is drawn, each position at the storage the CLI's strides give.
    // Returns the owners of every step's cells in storage order.
    std::vector<std::vector<Owner>> check_walk(const std::string& split, size_t steps) {
        const json cli = cli_dance(split);
        const int T = cli["T"];
        EXPECT_EQ(cli["B"], B);
        EXPECT_EQ(T, 11);  // long_'s tokens
        EXPECT_EQ(cli["steps"].size(), steps);
        std::vector<std::vector<Owner>> owners;
        for (size_t k = 1; k <= steps; ++k) {
            SCOPED_TRACE(split + " step " + std::to_string(k));
            const json& want = cli["steps"][k - 1];
            const std::string buffer = want["buffer"];
            const Shot shot = shoot(split, static_cast<int>(k));
            EXPECT_EQ(shot.image.width, 1280);
            EXPECT_EQ(shot.description["step"], k);
            for (const char* field : {"buffer", "shape", "strides", "offset", "contiguous"})
                EXPECT_EQ(shot.description[field], want[field]) << field;
            // The stored weights of the step's projection (layer 0's in both), where it has one.
            EXPECT_EQ(shot.description["weights"], want.value("weights", json::array()));
            EXPECT_NEAR(shot.description["naive_view_max_diff"].get<double>(), cli["naive_view_max_diff"].get<double>(),
                        1e-6);

            const int64_t numel = buffer == "att"   ? int64_t(B) * NH * T * T
                                  : buffer == "qkv" ? int64_t(B) * T * 3 * C
                                                    : int64_t(B) * T * C;
            EXPECT_EQ(shot.memory.size(), size_t(numel));
            std::set<int64_t> indices;
            for (const json& cell : shot.memory) {
                EXPECT_EQ(cell["step"], k);
                EXPECT_EQ(cell["position"], cell["index"]);  // storage order
                indices.insert(cell["index"].get<int64_t>());
            }
            EXPECT_EQ(indices.size(), size_t(numel));
            EXPECT_EQ(*indices.begin(), 0);
            EXPECT_EQ(*indices.rbegin(), numel - 1);
            owners.push_back(check_pixels(shot, shot.memory, buffer, {T, C, NH}));

            // A transposed or split view must be drawn in its own order too.
            if (!want["contiguous"].get<bool>()) {
                int64_t viewed = 1;
                for (const json& size : want["shape"]) viewed *= size.get<int64_t>();
                EXPECT_EQ(shot.read.size(), size_t(viewed));
            }
            for (const json& cell : shot.read) EXPECT_EQ(cell["index"], storage_at(want, cell["position"]));
            check_pixels(shot, shot.read, buffer, {T, C, NH});
        }
        return owners;
    }

    static test::TempDir* dir_;
    const std::string long_ = "The cat sat on the mat because it was soft.", short_ = "It was";
};
test::TempDir* DanceViewTest::dir_ = nullptr;

TEST_F(DanceViewTest, TransposeWalkDrawsEveryFloatInItsOwnersColour) {
    const std::vector<std::vector<Owner>> owners = check_walk("transpose", 8);
    // view and transpose draw the memory of step 1 unchanged: no float moved.
    for (size_t n = 0; n < owners[0].size(); ++n) {
        EXPECT_EQ(owners[1][n].t, owners[0][n].t);
        EXPECT_EQ(owners[2][n].head, owners[0][n].head);
    }
    // The merged output's first row of C floats is token 0's, every head in turn.
    for (int c = 0; c < C; ++c) {
        EXPECT_EQ(owners[7][c].t, 0);
        EXPECT_EQ(owners[7][c].head, c / hs);
    }
}

TEST_F(DanceViewTest, NaiveWalkMixesTokensIntoOneRow) {
    const std::vector<std::vector<Owner>> owners = check_walk("naive-view", 5);
    // Viewed back to (B, T, C), "token 0's" row holds head 0's output rows of tokens 0..C/hs-1.
    std::set<int> tokens;
    for (int c = 0; c < C; ++c) tokens.insert(owners[4][c].t);
    EXPECT_EQ(tokens, (std::set<int>{0, 1, 2, 3}));
}

// The naive view of Q read in its own order: "head 0" of text 0 is its first
// T*hs floats, which are whole tokens' channels of every head.
TEST_F(DanceViewTest, NaiveSplitsHeadsHoldSeveralHeadsChannels) {
    const int T = 11;
    const Shot naive = shoot("naive-view", 2), correct = shoot("transpose", 3);
    auto first_head_owners = [&](const Shot& shot) {
        const std::vector<Owner> owners = check_pixels(shot, shot.read, shot.description["buffer"], {T, C, NH});
        std::set<int> heads;
        for (size_t i = 0; i < owners.size(); ++i)
            if (shot.read[i]["position"].get<int64_t>() < T * hs) heads.insert(owners[i].head);
        return heads;
    };
    const std::set<int> naive_heads = first_head_owners(naive), correct_heads = first_head_owners(correct);
    EXPECT_EQ(naive_heads, (std::set<int>{0, 1, 2, 3}));
    EXPECT_EQ(correct_heads, (std::set<int>{0}));
}

TEST_F(DanceViewTest, StepOutOfRangeShowsTheNearestStep) {
    EXPECT_EQ(shoot("transpose", 12).description["step"], 8);
    EXPECT_EQ(shoot("naive-view", 0).description["step"], 1);
}

// C = 256: Q and the view's order do not fit across one float per cell, so
// each cell is a few floats of one owner, every float still recorded in it.
TEST_F(DanceViewTest, WideBuffersDrawOneCellPerFewFloatsOfOneOwner) {
    const Sizes wide{11, 256, 4};
    test::write_test_model(dir_->path / "wide", {.n_layer = 1, .n_head = wide.NH, .n_embd = wide.C, .n_positions = 16});
    const Shot shot = shoot("transpose", 3, "wide");
    ASSERT_EQ(shot.memory.size(), size_t(B) * wide.T * 3 * wide.C);
    ASSERT_EQ(shot.read.size(), size_t(B) * wide.T * wide.C);
    std::set<std::pair<double, double>> rects;
    for (const json& cell : shot.memory) rects.insert({cell["x"].get<double>(), cell["y"].get<double>()});
    EXPECT_LE(rects.size(), shot.memory.size() / 2);  // at least two floats a cell
    check_pixels(shot, shot.memory, "qkv", wide);
    check_pixels(shot, shot.read, "qkv", wide);
}

}  // namespace
