// Test support for the window's heads grid against the double-precision
// reference (family_reference.h): each cell of a screenshot's grid through
// viridis, or the mask's hatch where the key is hidden.
#pragma once
#include <array>
#include <cstdint>
#include <vector>

#include "family_writer.h"
#include "screenshot.h"

namespace headscope::test {

// The masked cells' hatch (test_window_families.cpp's): two greys.
bool hatched(const std::array<int, 3>& got);

// Each heads grid cell of layer `layer` in `shot` (the window on
// `checkpoint`'s model showing the text of `ids`): hatched where the causal
// mask or the layer's window hides the key, else the reference's weight
// through viridis; beside the layer slider, the shown layer's kind (local
// or global) where the model's layers differ.
void expect_reference_cells(const WindowShot& shot, const FamilyCheckpoint& checkpoint, const std::vector<int32_t>& ids,
                            int layer);

}  // namespace headscope::test
