// The real window driven as a person drives it: on its own Xvfb screen,
// xdotool clicks into the empty text box, types a sentence and clicks the causal
// checkbox off; the screen is then read back through Xlib and every drawn
// cell must show the colormap of headscope-cli's weight for the typed
// sentence with the causal mask off.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <thread>

#include "model_writer.h"
#include "process.h"
#include "screenshot.h"

// Last: Xlib defines macros (None, Bool, Status) that clash with C++ headers.
#include <X11/Xlib.h>
#include <X11/Xutil.h>

using namespace headscope;
using nlohmann::json;

namespace {

void pause_ms(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

// An Xvfb server on the first free display from :90 (as xvfb-run -a picks
// one): a display whose lock file exists, or whose server exits at once, is
// skipped.
class VirtualScreen {
public:
    VirtualScreen() {
        for (int n = 90; n < 190 && name_.empty(); ++n) {
            if (std::filesystem::exists("/tmp/.X" + std::to_string(n) + "-lock")) continue;
            const std::string display = std::string(":").append(std::to_string(n));
            server_ = std::make_unique<test::Child>(
                std::vector<std::string>{"Xvfb", display, "-screen", "0", "1280x800x24", "-nolisten", "tcp"});
            for (int tries = 0; tries < 100 && name_.empty() && !server_->ended(); ++tries) {
                pause_ms(50);
                if (Display* open = XOpenDisplay(display.c_str())) {
                    XCloseDisplay(open);
                    name_ = display;
                }
            }
        }
    }
    const std::string& name() const { return name_; }  // empty if no Xvfb started

private:
    std::unique_ptr<test::Child> server_;  // ends with this
    std::string name_;
};

// The screen's pixels, read through Xlib.
test::Image grab_screen(const std::string& display_name) {
    test::Image image;
    Display* display = XOpenDisplay(display_name.c_str());
    if (!display) return image;
    const Window root = DefaultRootWindow(display);
    XWindowAttributes attributes;
    XGetWindowAttributes(display, root, &attributes);
    XImage* x = XGetImage(display, root, 0, 0, attributes.width, attributes.height, AllPlanes, ZPixmap);
    image.width = attributes.width;
    image.height = attributes.height;
    for (int y = 0; y < image.height; ++y)
        for (int px = 0; px < image.width; ++px) {
            const unsigned long pixel = XGetPixel(x, px, y);
            image.rgba.insert(image.rgba.end(), {static_cast<unsigned char>((pixel & x->red_mask) >> 16),
                                                 static_cast<unsigned char>((pixel & x->green_mask) >> 8),
                                                 static_cast<unsigned char>(pixel & x->blue_mask), 255});
        }
    XDestroyImage(x);
    XCloseDisplay(display);
    return image;
}

TEST(WindowEndToEnd, TypingAndTogglingTheCausalMaskRedrawTheMaps) {
    test::TempDir dir;
    const std::string model = (dir.path / "model").string();
    test::write_test_model(model, {.n_layer = 1, .n_head = 2, .n_embd = 16, .n_positions = 32});
    const std::string typed = "Dogs chase the cat";

    // Where the text box and the checkbox are, from a screenshot run's layout.
    const auto first_layout = dir.path / "first.json";
    ASSERT_EQ(test::run_window({"--model", model, "--text", "A", "--screenshot", (dir.path / "first.png").string(),
                                "--layout", first_layout.string()},
                               dir.path).status,
              0);
    json controls;
    for (const json& cell : json::parse(test::read_file(first_layout)))
        if (cell["view"] == "control") controls[cell["name"].get<std::string>()] = cell;
    ASSERT_TRUE(controls.contains("text") && controls.contains("causal mask"));
    auto centre = [&](const char* name) {
        const json& c = controls[name];
        return std::vector<std::string>{std::to_string(static_cast<int>(c["x"].get<double>() + c["w"].get<double>() / 2)),
                                        std::to_string(static_cast<int>(c["y"].get<double>() + c["h"].get<double>() / 2))};
    };

    const VirtualScreen screen;
    ASSERT_FALSE(screen.name().empty()) << "Xvfb did not start";
    const test::ScopedEnv display("DISPLAY", screen.name());
    const auto layout = dir.path / "layout.json";
    // An empty text box to type into: no key chords, which ImGui 1.86 can miss
    // when press and release fall in one frame of a busy machine.
    test::Child window({HEADSCOPE_WINDOW, "--model", model, "--text", "", "--layout", layout.string()});
    auto xdotool = [&](std::vector<std::string> args) {
        args.insert(args.begin(), {"timeout", "20", "xdotool"});
        return test::run_program(args, dir.path);
    };
    const test::ProcessRun found = xdotool({"search", "--sync", "--onlyvisible", "--name", "^Headscope$"});
    ASSERT_EQ(found.status, 0) << "no window: " << found.err;

    const std::vector<std::string> text = centre("text"), checkbox = centre("causal mask");
    EXPECT_EQ(xdotool({"mousemove", text[0], text[1], "click", "1"}).status, 0);
    pause_ms(300);
    EXPECT_EQ(xdotool({"type", "--delay", "20", typed}).status, 0);
    pause_ms(300);
    EXPECT_EQ(xdotool({"mousemove", checkbox[0], checkbox[1], "click", "1"}).status, 0);
    // The compute and the head scores run in the background: wait until the
    // screen stops changing (at most 20 s), which the layout written on exit describes.
    test::Image shot = grab_screen(screen.name());
    for (int tries = 0; tries < 40; ++tries) {
        pause_ms(500);
        test::Image next = grab_screen(screen.name());
        if (next.rgba == shot.rgba) break;
        shot = std::move(next);
    }
    EXPECT_EQ(xdotool({"key", "ctrl+q"}).status, 0);
    ASSERT_EQ(window.wait(), 0);
    ASSERT_EQ(shot.width, 1280);

    const test::ProcessRun cli =
        test::run_program({HEADSCOPE_CLI, "attention", "--model", model, "--text", typed, "--causal", "off"}, dir.path);
    ASSERT_EQ(cli.status, 0) << cli.err;
    const json attention = json::parse(cli.out);
    const int T = attention["seq_len"];
    int cells = 0, upper = 0;
    for (const json& cell : json::parse(test::read_file(layout))) {
        if (cell["view"] != "heads") continue;
        const int h = cell["head"], i = cell["query"], j = cell["key"];
        ASSERT_LT(i, T) << "the window shows more tokens than the typed sentence has";
        const int x = static_cast<int>(cell["x"].get<double>() + cell["w"].get<double>() / 2);
        const int y = static_cast<int>(cell["y"].get<double>() + cell["h"].get<double>() / 2);
        const double weight = attention["attention"][0][0][h][i][j];
        const std::array<double, 3> want = test::viridis(weight);
        const std::array<int, 3> got = shot.at(x, y);
        for (int c = 0; c < 3; ++c) EXPECT_NEAR(got[c], want[c], 2.0) << "head " << h << " cell " << i << "," << j;
        ++cells;
        upper += j > i;
    }
    EXPECT_EQ(cells, 2 * T * T);
    EXPECT_EQ(upper, 2 * T * (T - 1) / 2);  // drawn as weights, not masked
}

}  // namespace
