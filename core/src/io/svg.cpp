// SVG figures: see svg.h.
#include "headscope/io/svg.h"

#include <charconv>
#include <cmath>
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
        // The continuation bytes each lead allows (Unicode's table 3-7): no
        // overlong forms, surrogates or values past U+10FFFF.
        size_t need = 0;
        unsigned char low = 0x80, high = 0xBF;
        if (lead >= 0xC2 && lead <= 0xDF)
            need = 1;
        else if (lead >= 0xE0 && lead <= 0xEF) {
            need = 2;
            if (lead == 0xE0) low = 0xA0;
            if (lead == 0xED) high = 0x9F;
        } else if (lead >= 0xF0 && lead <= 0xF4) {
            need = 3;
            if (lead == 0xF0) low = 0x90;
            if (lead == 0xF4) high = 0x8F;
        }
        char32_t code = lead & (0x3F >> need);
        size_t k = 1;
        for (; need && k <= need && i + k < bytes.size(); ++k) {
            const auto next = static_cast<unsigned char>(bytes[i + k]);
            if (next < low || next > high) break;
            low = 0x80, high = 0xBF;
            code = code << 6 | (next & 0x3F);
        }
        // Invalid: the lead and the continuation bytes that fit it so far are one maximal subpart.
        if (!need || k <= need || code == 0xFFFE || code == 0xFFFF)
            text += replacement;
        else
            text += bytes.substr(i, k);
        i += k;
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
