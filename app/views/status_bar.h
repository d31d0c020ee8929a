// The status bar under the views (tokens and how many the prefix cache
// supplied, compute time, the device that computed and why, the head probes'
// progress when they take long) with the export bar: Save PNG (the window as drawn), Save SVG (the
// shown view's maps as a vector figure, svg_figure.h), Save JSON and Save
// NPY (the shown attention exactly as `headscope-cli attention` writes it)
// into the "save in" folder, and where the last one went.
#pragma once
#include <filesystem>
#include <string>

#include "views/svg_figure.h"

namespace headscope {

// The shown attention as the CLI's JSON or .npy for the same model, texts
// and options (one writer: core's attention_export.h). A long text's (no map
// kept) holds, for every head, what the long view shows: the region in view
// exactly ("maps": "region", as --rows/--cols), or with the whole map in view
// each map pooled to the pixels shown ("maps": "pooled", as --pool; the NPY
// its array alone); a region over 2 GiB is refused. Each file is written
// whole or not at all (write_file_atomically); these throw Error naming it.
void export_json(const Session& session, const std::filesystem::path& path);
void export_npy(const Session& session, const std::filesystem::path& path);
// The status bar's note of the device that computed the maps shown, and why
// that one ("computed on cpu (cpu chosen)"); the backend before a first compute.
std::string device_note(const Session& session);
// The framebuffer's back buffer as drawn, as PNG.
void write_screenshot(const std::filesystem::path& path, int width, int height);

class StatusBar {
public:
    explicit StatusBar(std::string export_dir) : export_dir_(std::move(export_dir)) {}
    // `shown`: the view Save SVG draws.
    void draw(const WindowState& state, Session& session, Ui& ui, FigureView shown);
    // Save PNG reads the framebuffer once the frame that asked is drawn.
    void save_png_if_asked(int width, int height);
    const std::string& export_dir() const { return export_dir_; }

private:
    // Writes headscope-DATE-TIME<extension> into the export folder with
    // `write` and says where, or why not.
    template <class Write>
    void save(const char* extension, Write write);

    std::string export_dir_;
    std::string export_message_;  // where the last export went, or why it failed
    bool export_failed_ = false;
    bool png_asked_ = false;
};

}  // namespace headscope
