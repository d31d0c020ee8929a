// The tokens tab: the selected text drawn as wrapped tokens, each token's
// background the colormap of the weight a head (or the layer's average of
// its heads) gives it from the selected query rows: the row under the
// mouse, else the row clicked (--query), else the last token, plus the rows
// shift-clicked, summed. Readable at any length: the tokens wrap and the
// view scrolls; a long text's rows (no map kept) are computed exactly from
// its kept queries and keys (long_maps.h's query_row) when asked. For --layout each drawn token is {"view": "token",
// "token", "text", "weight" (null where the masks hide it)} with its rectangle. An encoder–decoder's follow the
// attention selector: the cross-attention's target tokens (the queries: hover or click one) above the source's tokens
// coloured by the weight each gets; the encoder's, the source's tokens alone.
#pragma once
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "widgets/ui.h"

namespace headscope {

// Where each of `ids` goes when wrapped at `line_width`: its x, its width
// (`width` of its text) and its line; tokens `gap` apart, a line feed
// ending a line. The window and the SVG figure wrap by it.
struct WrappedToken {
    float x, width;
    int line;
    std::string text;  // as drawn (shown_token)
};
std::vector<WrappedToken> wrap_tokens(const Tokenizer& tokenizer, const std::vector<int32_t>& ids,
                                      const std::function<float(const std::string&)>& width, float line_width,
                                      float gap);

class TokensView {
public:
    // In its tab the view shows the selected head; `beside` the maps, the
    // head of the map last under the mouse, until another is selected.
    void draw(WindowState& state, const Session& session, Ui& ui, bool beside = false);
    // What the last frame drew, for the SVG figure: the line above the
    // tokens, the query rows, each token's weight (NaN where masked; past the
    // text's end unused) and colour.
    const std::string& description() const { return description_; }
    const std::vector<int>& queries() const { return key_.queries; }
    const std::vector<float>& weights() const { return weights_; }
    const std::vector<Rgb>& colours() const { return colours_; }

private:
    std::pair<int, int> head_shown(const WindowState& state, bool beside);
    // The weights each key gets from the query rows (NaN where masked), and their colours.
    void update_weights(const Session& session, Ui& ui, int layer, int head, const std::vector<int>& queries);
    // Draws `ids` wrapped, each on its weight's colour where `weights` is
    // given, the queries outlined; records each as `view` for --layout.
    // Scrolls to token `scroll_to` where the view does not show it (-1: none).
    // Returns the hovered token, or -1; the tokens on screen into drawn_.
    int draw_tokens(const Session& session, Ui& ui, const std::vector<int32_t>& ids, const std::vector<float>* weights,
                    const std::vector<int>& queries, const char* view, int scroll_to = -1);
    // The query rows: the selected one (the source's for an encoder's maps), then those shift-clicked.
    std::vector<int> query_rows(const Session& session, const ShownMaps& maps) const;
    // A hovered query token: shown in the maps' panels, kept on click, added on shift-click.
    void pick_query(WindowState& state, const ShownMaps& maps, int hovered);

    bool average_ = false;         // the layer's average over its heads, not state.head
    std::set<int> added_queries_;  // shift-clicked rows, summed with the selected one
    int source_query_ = -1;        // an encoder's maps: the source token clicked; -1: its last
    int scrolled_query_ = -1;      // the query row (clicked, --query) last scrolled to, once
    std::pair<int, int> drawn_;    // [first, end): the tokens draw_tokens drew on screen
    bool ui_tooltips_ = true;      // the frame's Ui::tooltips, for pick_query
    struct Key {
        uint64_t generation = 0, compared = 0;  // the shown forward's and the comparison's (a patched run shown)
        int b = -1, layer = -1, head = -1;
        bool average = false;
        std::vector<int> queries;
        Colormap colormap{};
        AttentionKind kind = AttentionKind::decoder;
        bool operator==(const Key&) const = default;
    };
    Key key_;
    std::vector<float> weights_;  // (keys)
    std::vector<Rgb> colours_;    // (keys)
    std::string description_;
    // Beside the maps: the map last hovered, and the selection it was hovered under.
    std::optional<std::pair<std::pair<int, int>, std::pair<int, int>>> followed_;
};

}  // namespace headscope
