#include "virtual_screen.h"

#include <chrono>
#include <filesystem>
#include <sstream>
#include <thread>
#include <vector>

// Last: Xlib defines macros (None, Bool, Status) that clash with C++ headers.
#include <X11/Xlib.h>
#include <X11/Xutil.h>

namespace headscope::test {

void pause_ms(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

VirtualScreen::VirtualScreen(const std::string& size) {
    for (int n = 90; n < 190 && name_.empty(); ++n) {
        const std::filesystem::path lock = "/tmp/.X" + std::to_string(n) + "-lock";
        if (std::filesystem::exists(lock)) continue;
        const std::string display = std::string(":").append(std::to_string(n));
        server_ = std::make_unique<Child>(
            std::vector<std::string>{"Xvfb", display, "-screen", "0", size + "x24", "-nolisten", "tcp", "-noreset"});
        for (int tries = 0; tries < 100 && name_.empty() && !server_->ended(); ++tries) {
            pause_ms(50);
            if (Display* open = XOpenDisplay(display.c_str())) {
                int owner = 0;
                std::istringstream(read_file(lock)) >> owner;
                if (owner == server_->pid()) {
                    name_ = display;
                    // No key repeats: on a loaded machine xdotool's release of a typed
                    // key can come after the repeat delay, and the window got that
                    // character twice or more (a key held 0.8 s gave 4 more tokens).
                    XKeyboardControl control;
                    control.auto_repeat_mode = AutoRepeatModeOff;
                    XChangeKeyboardControl(open, KBAutoRepeatMode, &control);
                }
                XCloseDisplay(open);
            }
        }
    }
}

Image grab_screen(const std::string& display_name) {
    Image image;
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

}  // namespace headscope::test
