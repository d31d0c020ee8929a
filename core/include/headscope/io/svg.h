// A small SVG 1.1 writer for figures: filled rectangles, a hatch pattern for
// masked cells, and text, every string written as valid, escaped XML. The
// window's Save SVG draws its figures with it; the layout is the caller's.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <iosfwd>
#include <string>
#include <string_view>
#include <utility>

namespace headscope {

struct Rgb {
    uint8_t r = 0, g = 0, b = 0;
    bool operator==(const Rgb&) const = default;
};

// "#rrggbb".
std::string hex_colour(Rgb colour);

// `bytes` as XML character data (or an attribute value): each maximal
// subpart of invalid UTF-8 (Unicode's recommended practice, as nlohmann's
// dump replaces them) and each character XML 1.0 forbids (the C0 controls,
// U+FFFE, U+FFFF) becomes U+FFFD; & < > " ' become entities.
std::string xml_text(std::string_view bytes);

// The masked cells' look: diagonal stripes ("\" on screen) `stripe` units
// wide, alternating two greys.
struct Hatch {
    Rgb dark, light;
    int stripe = 4;
};

enum class TextAnchor { start, middle, end };

// Writes one SVG document to `out`: the constructor its header (a white
// background and the hatch as the pattern "masked"), finish() its end. The
// caller checks `out` for errors (write_file_atomically does). Coordinates
// are user units, y down; whitespace in text is kept (xml:space="preserve").
class SvgWriter {
public:
    SvgWriter(std::ostream& out, double width, double height, const Hatch& hatch);
    void rect(double x, double y, double w, double h, Rgb fill);
    void masked_rect(double x, double y, double w, double h);  // filled with the hatch
    // `bytes` with its baseline at y, anchored at x; turned `degrees` about
    // (x, y); in `fill` (black, SVG's own, writes no attribute).
    void text(double x, double y, std::string_view bytes, double size, TextAnchor anchor = TextAnchor::start,
              double degrees = 0, Rgb fill = {});
    // <g> with these attributes (values escaped), until end_group.
    void begin_group(std::initializer_list<std::pair<const char*, std::string>> attributes);
    void end_group();
    void finish();

private:
    std::ostream& out_;
};

}  // namespace headscope
