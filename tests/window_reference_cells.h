// Test support for the window's heads grid against the double-precision
// reference (family_reference.h): each cell of a screenshot's grid through
// viridis, or the mask's hatch where the key is hidden; and the fixture of
// the window tests on the round-two families' folders.
#pragma once
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "family_reference.h"
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
// The same against the reference `want` of a text of T tokens, already computed.
void expect_reference_cells(const WindowShot& shot, const FamilySpec& spec, const FamilyReference& want, int T,
                            int layer);

// Each attention map cell of `cells` (read_layout's entries of the heads,
// model or mask tab, each naming its layer and head) at its centre in
// `image`: hatched where the causal mask or its layer's window hides the
// key, else the weight of `want` (of one text of T tokens) through viridis.
// Returns how many cells the window alone hid.
int expect_map_cells(const Image& image, const nlohmann::json& cells, const FamilySpec& spec,
                     const FamilyReference& want, int T);

// Whether some of the model's layers are windowed and others not (Gemma's local and global layers).
bool layers_differ(const FamilySpec& spec);

// The window on the round-two families' Hugging Face folders (Gemma 2 and
// 3, Phi-3, OLMo 2, and the mixtures Mixtral, OLMoE, Qwen 3 MoE, gpt-oss),
// written for each suite (test_window_round_two, test_window_round_two_tabs).
class RoundTwoWindows : public ::testing::Test {
protected:
    static void SetUpTestSuite();
    static void TearDownTestSuite();
    // The window on `model` with `args`; its JSON export (the token ids) in `exported` when asked.
    static WindowShot shoot(const std::string& name, const std::string& model, std::vector<std::string> args,
                            nlohmann::json* exported = nullptr);

    static TempDir* dir_;
    static std::map<std::string, FamilyCheckpoint> checkpoints_;
    const std::string text_ = "It was soft.";  // 20 tokens of the cut vocabularies, 5 of OLMo 2's
};

}  // namespace headscope::test
