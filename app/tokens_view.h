// The tokens tab: the selected text drawn as wrapped tokens, each token's
// background the colormap of the weight a head (or the layer's average of
// its heads) gives it from the selected query rows: the row under the
// mouse, else the row clicked (--query), else the last token, plus the rows
// shift-clicked, summed. Readable at any length: the tokens wrap and the
// view scrolls. For --layout each drawn token is {"view": "token", "token",
// "text", "weight" (null where the masks hide it)} with its rectangle.
#pragma once
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "ui.h"

namespace headscope {

// Where each token of the selected text goes when wrapped at `line_width`:
// its x, its width (`width` of its text) and its line; tokens `gap` apart,
// a line feed ending a line. The window and the SVG figure wrap by it.
struct WrappedToken {
    float x, width;
    int line;
    std::string text;  // as drawn (shown_token)
};
std::vector<WrappedToken> wrap_tokens(const Session& session, const std::function<float(const std::string&)>& width,
                                      float line_width, float gap);

class TokensView {
public:
    // In its tab the view shows the selected head; `beside` the maps, the
    // head of the map last under the mouse, until another is selected.
    void draw(Session& session, Ui& ui, bool beside = false);
    // What the last frame drew, for the SVG figure: the line above the
    // tokens, the query rows, each token's weight (NaN where masked; past the
    // text's end unused) and colour.
    const std::string& description() const { return description_; }
    const std::vector<int>& queries() const { return key_.queries; }
    const std::vector<float>& weights() const { return weights_; }
    const std::vector<Rgb>& colours() const { return colours_; }

private:
    std::pair<int, int> head_shown(const Session& session, bool beside);
    // The weights each key gets from the query rows (NaN where masked), and their colours.
    void update_weights(const Session& session, Ui& ui, int layer, int head, const std::vector<int>& queries);
    int draw_tokens(const Session& session, Ui& ui, const std::vector<int>& queries);

    bool average_ = false;         // the layer's average over its heads, not session.head
    std::set<int> added_queries_;  // shift-clicked rows, summed with the selected one
    struct Key {
        uint64_t generation = 0;
        int b = -1, layer = -1, head = -1;
        bool average = false;
        std::vector<int> queries;
        Colormap colormap{};
        bool operator==(const Key&) const = default;
    };
    Key key_;
    std::vector<float> weights_;  // (T)
    std::vector<Rgb> colours_;    // (T)
    std::string description_;
    // Beside the maps: the map last hovered, and the selection it was hovered under.
    std::optional<std::pair<std::pair<int, int>, std::pair<int, int>>> followed_;
};

}  // namespace headscope
