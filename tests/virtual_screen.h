// An X server of the tests' own (Xvfb) and its pixels read back through Xlib.
#pragma once
#include <memory>
#include <string>

#include "process.h"
#include "screenshot.h"

namespace headscope::test {

void pause_ms(int ms);

// An Xvfb server of its own on the first free display from :90: a display
// whose lock file exists, or whose server exits at once, is skipped. The
// lock file must name this server's process: a test running alongside may
// have taken the display a moment before, and its server would answer, then
// vanish when that test ends. (xvfb-run is not used: its clean-up, racing
// the server's "ready" signal after the window's exit, has failed a run.)
// -noreset: an X server resets when its last client leaves, and a window
// connecting during that reset (just after this class's own check) failed
// a run with "could not initialise".
class VirtualScreen {
public:
    explicit VirtualScreen(const std::string& size = "1280x800");
    const std::string& name() const { return name_; }  // empty if no Xvfb started

private:
    std::unique_ptr<Child> server_;  // ends with this
    std::string name_;
};

// The screen's pixels, read through Xlib.
Image grab_screen(const std::string& display_name);

}  // namespace headscope::test
