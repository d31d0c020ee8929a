// Head probes: scores that say what kind of head each is, computed from its
// attention weights (causal, the model's own heads and scale). Defined in
// docs/cli.md (Head probes); the window labels heads with them.
#pragma once
#include <cstdint>
#include <vector>

#include "headscope/base/progress.h"
#include "headscope/compute/backend.h"

namespace headscope {

struct HeadScores {
    double previous_token = 0;  // mean weight on position i-1
    double first_token = 0;     // mean weight on position 0
    double current_token = 0;   // mean weight on position i
    double induction = 0;       // on a random run repeated: weight to the token after the earlier occurrence
    double entropy = 0;         // mean row entropy, nats
};

struct ProbeReport {
    int n_layer = 0, n_head = 0;
    std::vector<HeadScores> heads;  // (L, NH)
    size_t rows = 0;                // text query rows averaged over (each row i >= 1)
    ComputedOn computed_on;         // the device of the forwards (together())

    const HeadScores& head(int layer, int h) const { return heads[static_cast<size_t>(layer) * n_head + h]; }
};

// The entropy in nats of one attention row of n weights (zeros add nothing).
double row_entropy(const float* row, int n);

// Scores every head: previous/first/current token and entropy over `texts`
// (rows i >= 1 of each; row 0 can only attend to itself), induction over
// `induction_runs` random token runs of length R = min(64, n_positions / 2)
// each followed by its repeat (seeded, the end-of-text id excluded).
// The text heads are scored on by default: the model's validation.txt, else
// the built-in model's, cut into consecutive windows of min(128, n_positions)
// tokens, at most `max_windows` of them. Throws Error when there is none.
std::vector<std::vector<int32_t>> validation_windows(const Model& model, size_t max_windows = 32);

// `progress` hears "scoring heads" in forwards (one per text and per
// induction run), before the first and after each; Cancelled thrown by it
// ends the scoring.
ProbeReport probe_heads(Backend& backend, const Model& model, const std::vector<std::vector<int32_t>>& texts,
                        int induction_runs = 8, uint64_t seed = 42, const Progress& progress = {});

// probe_heads on validation_windows(model, max_windows), with a CPU backend
// of its own (so a caller's busy backend is left alone).
ProbeReport probe_validation(const Model& model, size_t max_windows, const Progress& progress = {});

}  // namespace headscope
