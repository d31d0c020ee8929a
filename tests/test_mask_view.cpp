// The mask view as a user sees it: headscope renders `--view mask` for a
// batch of a short and a long text under Xvfb, and every mask cell it reports
// drawing is checked pixel by pixel against the colour the mask rules give,
// written here independently of core (causal: key j <= query i; padding:
// j < the text's length; combined: both, and a pad query row i >= length
// empty). The lengths come from headscope-cli. Rows with nothing to attend to
// must be outlined, the selected head's attention hatched across them, and
// the rows and columns labelled with the text's tokens and its pads.
// The checks view, on the same batch, must show core's figures: batched and
// looped heads agreeing, causality exact only with the causal mask, and the
// parameter table of headscope-cli info.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "model_writer.h"
#include "process.h"
#include "screenshot.h"

using namespace headscope;
using nlohmann::json;

namespace {

// The mask colours documented in app/views/mask_view.h.
constexpr std::array<int, 3> allowed_rgb = {236, 190, 72}, blocked_rgb = {52, 58, 70}, empty_row_rgb = {235, 80, 60};

bool near(const std::array<int, 3>& got, const std::array<int, 3>& want) {
    for (int c = 0; c < 3; ++c)
        if (std::abs(got[c] - want[c]) > 2) return false;
    return true;
}

class MaskViewTest : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        dir_ = new test::TempDir;
        test::write_test_model(dir_->path / "model", {.n_layer = 2, .n_head = 4, .n_embd = 32, .n_positions = 32});
    }
    static void TearDownTestSuite() { delete dir_; }

    struct Shot {
        test::Image image;
        json cells;                // the layout's cells
        std::vector<int> lengths;  // per text, from the CLI
        int T = 0;
        std::vector<std::string> tokens;  // of the first (shown) text, from the CLI
    };

    Shot shoot(const std::string& name, const std::string& causal, const std::string& padding_mask,
               const std::string& view = "mask") {
        const std::string model = (dir_->path / "model").string();
        const test::WindowShot shot = test::shoot_window({"--model", model, "--view", view, "--text", short_, "--text",
                                                          long_, "--causal", causal, "--padding-mask", padding_mask},
                                                         dir_->path, name);
        EXPECT_EQ(shot.run.status, 0);
        const test::ProcessRun cli = test::run_program(
            {test::cli_program(), "attention", "--model", model, "--text", short_, "--text", long_, "--format", "none"},
            dir_->path);
        EXPECT_EQ(cli.status, 0) << cli.err;
        const json meta = json::parse(cli.out);
        return {shot.image, shot.layout, meta["lengths"].get<std::vector<int>>(), meta["seq_len"].get<int>(),
                meta["tokens"][0].get<std::vector<std::string>>()};
    }

    // Checks every mask cell's colour; returns the count of cells per mask and allowed/blocked.
    std::map<std::string, int> check_mask_cells(const Shot& shot, bool causal, bool padding_mask) {
        EXPECT_EQ(shot.image.width, 1280);
        std::map<std::string, int> counts;
        for (const json& cell : shot.cells) {
            if (cell["view"] != "mask") continue;
            const std::string mask = cell["mask"];
            const int b = cell["b"], i = cell["query"], j = cell["key"];
            const int length = shot.lengths.at(b);
            bool allowed = false;
            if (mask == "causal")
                allowed = !causal || j <= i;
            else if (mask == "padding")
                allowed = !padding_mask || j < length;
            else if (mask == "combined")
                allowed = (!causal || j <= i) && (!padding_mask || (i < length && j < length));
            else
                ADD_FAILURE() << "unknown mask " << mask;
            const int x = static_cast<int>(cell["x"].get<double>() + cell["w"].get<double>() / 2);
            const int y = static_cast<int>(cell["y"].get<double>() + cell["h"].get<double>() / 2);
            const std::array<int, 3> got = shot.image.at(x, y);
            EXPECT_TRUE(near(got, allowed ? allowed_rgb : blocked_rgb))
                << mask << " text " << b << " cell " << i << "," << j << " should be "
                << (allowed ? "allowed" : "blocked") << " but is " << got[0] << "," << got[1] << "," << got[2];
            ++counts[mask + (allowed ? " allowed" : " blocked")];
            ++counts[mask];
        }
        return counts;
    }

    // The query rows of the shown (first, shorter) text that have nothing to attend to.
    static std::set<int> empty_rows(const Shot& shot, bool padding_mask) {
        std::set<int> rows;
        if (padding_mask)
            for (int i = shot.lengths[0]; i < shot.T; ++i) rows.insert(i);
        return rows;
    }

    // Just left of each combined row: the outline colour exactly on the empty rows.
    void check_outlines(const Shot& shot, const std::set<int>& empty) {
        int rows_seen = 0;
        for (const json& cell : shot.cells) {
            if (cell["view"] != "mask" || cell["mask"] != "combined" || cell["key"] != 0) continue;
            const int i = cell["query"];
            const int x = static_cast<int>(cell["x"].get<double>()) - 2;
            const int y = static_cast<int>(cell["y"].get<double>() + cell["h"].get<double>() / 2);
            EXPECT_EQ(near(shot.image.at(x, y), empty_row_rgb), empty.count(i) == 1) << "row " << i;
            ++rows_seen;
        }
        EXPECT_EQ(rows_seen, shot.T);
    }

    // Along the causal mask: left of each row its query token, then "<pad>";
    // above each column its key token, and one "<pad> x N" over the pad keys;
    // each label in its row's or column's band and drawn in the text colour,
    // and each key's place ending before the next label of its line begins.
    void check_token_labels(const Shot& shot) {
        std::map<int, json> rows, columns;  // causal cells of key 0, of query 0
        for (const json& cell : shot.cells) {
            if (cell["view"] != "mask" || cell["mask"] != "causal") continue;
            if (cell["key"] == 0) rows[cell["query"]] = cell;
            if (cell["query"] == 0) columns[cell["key"]] = cell;
        }
        const int L = shot.lengths[0];
        int queries = 0, keys = 0;
        std::map<int, json> key_labels;  // by index; the pad keys' label at L
        for (const json& label : shot.cells)
            if (label["view"] == "mask label" && label["axis"] == "key") key_labels[label["index"]] = label;
        for (const auto& [t, label] : key_labels) {
            // The next label of its line: the key two on, or the pad keys' (on the even keys' line).
            auto next = key_labels.find(t + 2);
            if (next == key_labels.end() && t + 1 == L && t % 2 == 0) next = key_labels.find(L);
            if (t < L && next != key_labels.end()) {
                EXPECT_LT(label["x"].get<double>() + label["w"].get<double>(), next->second["x"].get<double>())
                    << "key " << t << "'s label runs into the next of its line";
            }
        }
        for (const json& label : shot.cells) {
            if (label["view"] != "mask label") continue;
            const int t = label["index"];
            const double x = label["x"], y = label["y"], w = label["w"], h = label["h"];
            EXPECT_EQ(test::label_fault(label["shown"], label["text"]), "");
            if (label["axis"] == "query") {
                ++queries;
                EXPECT_EQ(label["text"], t < L ? shot.tokens.at(t) : "<pad>") << "row " << t;
                EXPECT_EQ(y, rows.at(t)["y"].get<double>()) << "row " << t;
                EXPECT_LT(x + w, rows.at(t)["x"].get<double>()) << "row " << t;
            } else {
                ++keys;
                EXPECT_EQ(label["text"], t < L ? shot.tokens.at(t) : "<pad> x " + std::to_string(shot.T - L))
                    << "column " << t;
                EXPECT_EQ(x, columns.at(t)["x"].get<double>()) << "column " << t;
                EXPECT_LE(y + h, columns.at(t)["y"].get<double>()) << "column " << t;
            }
            int text_pixels = 0;
            for (int py = static_cast<int>(y); py < y + h; ++py)
                for (int px = static_cast<int>(x); px < x + w; ++px) {
                    const std::array<int, 3> got = shot.image.at(px, py);
                    text_pixels += got[0] > 100 && got[1] > 100 && got[2] > 100;
                }
            EXPECT_GT(text_pixels, 0) << "no text drawn for " << label["axis"] << " " << t << ": " << label["text"];
        }
        EXPECT_EQ(queries, shot.T);
        EXPECT_EQ(keys, L + (L < shot.T ? 1 : 0));
    }

    // The head's attention beside the masks: hatched greys across every empty row.
    void check_attention_rows(const Shot& shot, const std::set<int>& empty) {
        int cells = 0;
        for (const json& cell : shot.cells) {
            if (cell["view"] != "mask_attention" || empty.count(cell["query"].get<int>()) == 0) continue;
            const int x = static_cast<int>(cell["x"].get<double>() + cell["w"].get<double>() / 2);
            const int y = static_cast<int>(cell["y"].get<double>() + cell["h"].get<double>() / 2);
            const std::array<int, 3> got = shot.image.at(x, y);
            EXPECT_TRUE(got[0] == got[1] && got[1] == got[2] &&
                        (std::abs(got[0] - 41) <= 1 || std::abs(got[0] - 77) <= 1))
                << "attention row " << cell["query"] << " key " << cell["key"] << " is " << got[0] << "," << got[1]
                << "," << got[2];
            ++cells;
        }
        EXPECT_EQ(cells, static_cast<int>(empty.size()) * shot.T);
    }

    // The checks view's figures by name ("tensor" rows by tensor name).
    static std::map<std::string, double> figures(const Shot& shot) {
        std::map<std::string, double> values;
        for (const json& cell : shot.cells)
            if (cell["view"] == "checks")
                values[cell["figure"] == "tensor" ? cell["name"].get<std::string>()
                                                  : cell["figure"].get<std::string>()] = cell["value"].get<double>();
        return values;
    }

    static test::TempDir* dir_;
    const std::string short_ = "It was soft.";
    const std::string long_ = "The cat sat on the mat because it was soft.";
};
test::TempDir* MaskViewTest::dir_ = nullptr;

TEST_F(MaskViewTest, CausalAndPaddingMasksOfTheShorterText) {
    const Shot shot = shoot("causal-padding", "on", "on");
    ASSERT_EQ(shot.lengths.size(), 2u);
    ASSERT_LT(shot.lengths[0], shot.lengths[1]);
    ASSERT_EQ(shot.lengths[1], shot.T);
    const int T = shot.T, L = shot.lengths[0];
    const std::map<std::string, int> counts = check_mask_cells(shot, true, true);
    EXPECT_EQ(counts.at("causal"), T * T);
    EXPECT_EQ(counts.at("padding"), 2 * T + T + T * T);  // both texts' rows, the selected text's row and its broadcast
    EXPECT_EQ(counts.at("combined"), T * T);
    EXPECT_EQ(counts.at("padding blocked"), (T - L) + (T - L) + T * (T - L));
    EXPECT_EQ(counts.at("combined allowed"), L * (L + 1) / 2);
    check_outlines(shot, empty_rows(shot, true));
    check_attention_rows(shot, empty_rows(shot, true));
    check_token_labels(shot);
}

TEST_F(MaskViewTest, CausalOffLeavesOnlyThePadding) {
    const Shot shot = shoot("padding-only", "off", "on");
    const int T = shot.T, L = shot.lengths[0];
    const std::map<std::string, int> counts = check_mask_cells(shot, false, true);
    EXPECT_EQ(counts.count("causal blocked"), 0u);
    EXPECT_EQ(counts.at("combined allowed"), L * L);
    check_outlines(shot, empty_rows(shot, true));
    check_attention_rows(shot, empty_rows(shot, true));
    EXPECT_EQ(T, shot.lengths[1]);
}

TEST_F(MaskViewTest, PaddingMaskOffLetsPadsAttend) {
    const Shot shot = shoot("causal-only", "on", "off");
    const int T = shot.T;
    const std::map<std::string, int> counts = check_mask_cells(shot, true, false);
    EXPECT_EQ(counts.count("padding blocked"), 0u);
    EXPECT_EQ(counts.at("combined allowed"), T * (T + 1) / 2);
    check_outlines(shot, empty_rows(shot, false));
}

TEST_F(MaskViewTest, ChecksViewShowsTheLoopCausalityAndParameters) {
    const std::map<std::string, double> on = figures(shoot("checks-causal", "on", "on", "checks"));
    ASSERT_EQ(on.count("weight_diff"), 1u) << "the figures were not shown";
    EXPECT_LT(on.at("weight_diff"), 1e-5);
    EXPECT_LT(on.at("output_diff"), 1e-4);
    EXPECT_EQ(on.at("earlier_rows_diff"), 0.0);
    EXPECT_GT(on.at("changed_row_diff"), 1e-3);

    const std::map<std::string, double> off = figures(shoot("checks-bidirectional", "off", "on", "checks"));
    EXPECT_LT(off.at("weight_diff"), 1e-5);
    EXPECT_GT(off.at("earlier_rows_diff"), 1e-3);

    const test::ProcessRun info =
        test::run_program({test::cli_program(), "info", "--model", (dir_->path / "model").string()}, dir_->path);
    ASSERT_EQ(info.status, 0) << info.err;
    const json model = json::parse(info.out);
    double total = 0;
    for (const json& tensor : model["tensors"]) {
        double count = 1;
        for (const json& size : tensor["shape"]) count *= size.get<double>();
        EXPECT_EQ(on.at(tensor["name"].get<std::string>()), count) << tensor["name"];
        total += count;
    }
    EXPECT_EQ(on.at("parameters"), total);
    EXPECT_EQ(on.at("parameters"), model["params"].get<double>());
}

}  // namespace
