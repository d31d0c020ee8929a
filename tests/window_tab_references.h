// Test support for the window's tabs on a family's model against the
// double-precision reference (family_reference.h) of the text it shows:
// what each tab draws from the family's forward (a map's cells, the lens's
// probabilities, the router's choices, the effects grid's loss changes, the
// tokens' weights, the patching tab's answer, the predictions) or from core
// (the checks tab's figures), read from its screenshot and layout
// (screenshot.h). The window shows layer `layer`, head 0 selected, its
// predictions at the text's last token.
#pragma once
#include <cstdint>
#include <vector>

#include "family_reference.h"
#include "family_writer.h"
#include "screenshot.h"

namespace headscope::test {

struct TabReference {
    const FamilyCheckpoint& checkpoint;
    std::vector<int32_t> ids;  // the text's tokens, as the window's JSON export has them
    int layer = 0;             // the layer shown
    FamilyReference forward;   // with the model's own window
    std::vector<double> lens;  // (L, T, V): each layer's residual stream through the final norm and output embedding
    int T() const { return static_cast<int>(ids.size()); }
};
TabReference tab_reference(const FamilyCheckpoint& checkpoint, std::vector<int32_t> ids, int layer);

// Heads: the layer's maps (window_reference_cells.h), a learned sink's
// column the share of each row its keys leave (a model without sinks draws
// none), and the predictions panel's ten bars the last layer's top 10.
void expect_heads_tab(const WindowShot& shot, const TabReference& want);
// Model: every layer's thumbnails the reference's maps, each row named for
// its layer and, where the layers differ, its kind (local or global).
void expect_model_tab(const WindowShot& shot, const TabReference& want);
// Tokens: each token's weight from the last query in head 0 of the layer;
// none on the keys the masks hide from it.
void expect_tokens_tab(const WindowShot& shot, const TabReference& want);
// Logit lens: each (layer, position) cell's token the top token there, and
// the cell the colormap of its probability.
void expect_lens_tab(const WindowShot& shot, const TabReference& want);
// Router: each (layer, position) cell the colour of the expert chosen first at its weight; dense layers grey.
void expect_router_tab(const WindowShot& shot, const TabReference& want);
// What heads do (its grid computed): each cell the change in the text's
// loss with that head's output zeroed, and the attribution grid drawn.
void expect_effects_tab(const WindowShot& shot, const TabReference& want);
// Patching (a compare text of as many tokens): the metric's answer the text's top next token.
void expect_patching_tab(const WindowShot& shot, const TabReference& want);
// Mask: the selected head's attention beside the masks, the reference's map.
void expect_mask_tab(const WindowShot& shot, const TabReference& want);
// Dance: its first step's view (1, T, ...) and the memory of the buffer it views drawn, whole token rows.
void expect_dance_tab(const WindowShot& shot, const TabReference& want);
// Checks: the batched heads and the per-head loop agree up to float
// round-off, the causality check's earlier rows exactly, the parameters the
// checkpoint's values; the model's table within the window.
void expect_checks_tab(const WindowShot& shot, const TabReference& want);

}  // namespace headscope::test
