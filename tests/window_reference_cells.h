// Test support for the window tests of the families (test_window_round_two,
// test_window_round_two_tabs): a heads grid's cells, read back from the
// screenshot, against the double-precision reference's maps
// (family_reference.h) through viridis, the masked ones hatched.
#pragma once
#include <array>
#include <cstdint>
#include <vector>

#include "family_writer.h"
#include "screenshot.h"

namespace headscope::test {

// The masked cells' hatch: two greys.
bool hatched(const std::array<int, 3>& got);

// Each heads grid cell of layer `layer` in `shot` (the window on `checkpoint`
// with token ids `ids`): hatched where the causal mask or the layer's window
// hides the key, else the reference's weight through viridis; and beside the
// layer slider the layer's kind, where the model's layers differ (Gemma).
void expect_reference_cells(const WindowShot& shot, const FamilyCheckpoint& checkpoint, const std::vector<int32_t>& ids,
                            int layer);

}  // namespace headscope::test
