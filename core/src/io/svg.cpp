// SVG figures: see svg.h.
#include "headscope/io/svg.h"

#include <utf8proc.h>
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <ostream>

namespace headscope {

namespace {

constexpr std::string_view replacement = "\xEF\xBF\xBD";  // U+FFFD

// `value` to a hundredth of a unit, as the shortest decimal that reads back the same.
std::string number(double value) {
    char text[32];
    const auto [end, ec] = std::to_chars(text, text + sizeof text, std::round(value * 100) / 100);
    return std::string(text, end);
}

// The character that starts `bytes` (not empty): its code point and length,
// or, where no well-formed one starts (utf8proc refuses overlong forms,
// surrogates and values past U+10FFFF), -1 and the length of the maximal
// subpart there: the longest start of a well-formed character, or one byte.
struct Utf8Char {
    int32_t code_point;
    size_t length;
};

Utf8Char utf8_char(std::string_view bytes) {
    const auto* data = reinterpret_cast<const utf8proc_uint8_t*>(bytes.data());
    utf8proc_int32_t code_point = -1;
    const utf8proc_ssize_t length = utf8proc_iterate(data, static_cast<utf8proc_ssize_t>(bytes.size()), &code_point);
    if (length > 0) return {code_point, static_cast<size_t>(length)};
    // Its first k bytes start a well-formed character when continuation bytes
    // after them complete one: the first two bytes decide, and the rest need
    // only be continuation bytes.
    const auto announced = static_cast<size_t>(utf8proc_utf8class[data[0]]);  // 0: no lead byte
    size_t subpart = 1;
    for (size_t k = 2; k < announced && k <= bytes.size(); ++k) {
        utf8proc_uint8_t completed[4] = {0x80, 0x80, 0x80, 0x80};
        std::copy_n(data, k, completed);
        if (utf8proc_iterate(completed, static_cast<utf8proc_ssize_t>(announced), &code_point) < 0) break;
        subpart = k;
    }
    return {-1, subpart};
}

}  // namespace

std::string hex_colour(Rgb colour) {
    char text[8];
    std::snprintf(text, sizeof text, "#%02x%02x%02x", colour.r, colour.g, colour.b);
    return text;
}

std::string xml_text(std::string_view bytes) {
    std::string text;
    size_t i = 0;
    while (i < bytes.size()) {
        const auto lead = static_cast<unsigned char>(bytes[i]);
        if (lead < 0x80) {
            switch (lead) {
                case '&': text += "&amp;"; break;
                case '<': text += "&lt;"; break;
                case '>': text += "&gt;"; break;
                case '"': text += "&quot;"; break;
                case '\'': text += "&apos;"; break;
                default:
                    if (lead < 0x20)
                        text += replacement;
                    else
                        text += static_cast<char>(lead);
            }
            ++i;
            continue;
        }
        const Utf8Char c = utf8_char(bytes.substr(i));
        if (c.code_point < 0 || c.code_point == 0xFFFE || c.code_point == 0xFFFF)
            text += replacement;
        else
            text += bytes.substr(i, c.length);
        i += c.length;
    }
    return text;
}

SvgWriter::SvgWriter(std::ostream& out, double width, double height, const Hatch& hatch) : out_(out) {
    const std::string w = number(width), h = number(height), s = number(hatch.stripe), p = number(2 * hatch.stripe);
    out_ << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
         << "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"" << w << "\" height=\"" << h
         << "\" viewBox=\"0 0 " << w << ' ' << h
         << "\" xml:space=\"preserve\" font-family=\"DejaVu Sans, sans-serif\" shape-rendering=\"crispEdges\">\n"
         // Tiles of 2 stripes: light, with the dark stripe where (x - y) mod 2s < s.
         << "<defs><pattern id=\"masked\" patternUnits=\"userSpaceOnUse\" width=\"" << p << "\" height=\"" << p
         << "\"><rect width=\"" << p << "\" height=\"" << p << "\" fill=\"" << hex_colour(hatch.light)
         << "\"/><path fill=\"" << hex_colour(hatch.dark) << "\" d=\"M0 0H" << s << "L" << p << ' ' << s << "V" << p
         << "ZM0 " << s << "L" << s << ' ' << p << "H0Z\"/></pattern></defs>\n"
         << "<rect width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>\n";
}

void SvgWriter::rect(double x, double y, double w, double h, Rgb fill) {
    out_ << "<rect x=\"" << number(x) << "\" y=\"" << number(y) << "\" width=\"" << number(w) << "\" height=\""
         << number(h) << "\" fill=\"" << hex_colour(fill) << "\"/>\n";
}

void SvgWriter::masked_rect(double x, double y, double w, double h) {
    out_ << "<rect x=\"" << number(x) << "\" y=\"" << number(y) << "\" width=\"" << number(w) << "\" height=\""
         << number(h) << "\" fill=\"url(#masked)\"/>\n";
}

void SvgWriter::text(double x, double y, std::string_view bytes, double size, TextAnchor anchor, double degrees,
                     Rgb fill) {
    static const char* const anchors[] = {"start", "middle", "end"};
    const std::string at_x = number(x), at_y = number(y);
    out_ << "<text x=\"" << at_x << "\" y=\"" << at_y << "\" font-size=\"" << number(size) << '"';
    if (anchor != TextAnchor::start) out_ << " text-anchor=\"" << anchors[static_cast<int>(anchor)] << '"';
    if (degrees != 0) out_ << " transform=\"rotate(" << number(degrees) << ' ' << at_x << ' ' << at_y << ")\"";
    if (fill != Rgb{}) out_ << " fill=\"" << hex_colour(fill) << '"';  // black is SVG's own
    out_ << '>' << xml_text(bytes) << "</text>\n";
}

void SvgWriter::begin_group(std::initializer_list<std::pair<const char*, std::string>> attributes) {
    out_ << "<g";
    for (const auto& [name, value] : attributes) out_ << ' ' << name << "=\"" << xml_text(value) << '"';
    out_ << ">\n";
}

void SvgWriter::end_group() { out_ << "</g>\n"; }

void SvgWriter::finish() { out_ << "</svg>\n"; }

}  // namespace headscope
