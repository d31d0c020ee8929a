// headscope-cli's options as cli.cpp parses them: what its commands
// (cli_commands.h) run and what its inputs (cli_inputs.h) are read from.
#pragma once
#include <string>
#include <vector>

#include "headscope/compute/attention.h"
#include "headscope/compute/attention_maps.h"
#include "headscope/compute/backend.h"
#include "headscope/compute/generate.h"
#include "headscope/compute/patching.h"
#include "headscope/model/model.h"
#include "state/forward_options.h"

namespace headscope {

struct CliOptions {
    std::string model = builtin_model;
    std::vector<std::string> texts;
    std::vector<std::string> text_pairs;  // an encoder's second text of each pair, one per --text
    std::vector<std::string> targets;     // an encoder–decoder's decoder input after its start token, one per --text
    std::string token_ids;                // "I,J,K": one text's ids, in place of --text
    int top_k = 0;                        // attention: the predictions at every position
    bool logit_lens = false;              // attention: the top-1 after every returned layer
    bool contributions = false;           // attention: value-weighted maps, rollout, logit attribution
    // attention, long texts: each file's text as a --text; the row summaries;
    // the maps written (full, none), a region's rows and keys ("Q0:Q1"), or
    // every map pooled to at most pool x pool cells of pool_mode.
    std::vector<std::string> text_files;
    bool summaries = false;
    std::string maps = "full", rows, cols;
    int pool = 0;
    Pooling pool_mode = Pooling::mean;
    bool pool_given = false, pool_mode_given = false;
    std::string effects;         // attention: the effects grid's method as given; empty: no grid
    Sampling sampling;           // generate
    int tokens = 0;              // generate: how many
    AttentionOptions attention;  // the masks, scale and split; the command sets the rest
    BackendChoice backend = BackendChoice::automatic;
    std::string layers = "all", out;
    AblationWords ablation;  // attention: the heads and experts knocked out
    std::string format;      // as given; empty: table or json by where the output goes (info, heads), else json
    int heads = 0, layer = 0;
    bool heads_given = false;
    bool causal_given = false;   // else the model's own mask (a decoder's causal, an encoder's not)
    bool scale_given = false;    // else the model's own scale (1/sqrt(hs); T5's none)
    bool special = true;         // the tokenizer's special tokens (Llama 2's <s>)
    bool sliding_window = true;  // the model's own, when it has one
    bool truncate = false;       // texts past the model's positions cut to them, not refused
    // patch: the two texts (an encoder's with their pairs' second texts, an
    // encoder–decoder's sources with their targets), the answer and wrong
    // tokens' texts, the grids' words, the method; the metric, position and
    // direction into `patch`.
    std::vector<std::string> clean, corrupted, clean_pair, corrupted_pair, clean_target, corrupted_target, answer,
        wrong;
    std::string what = "heads", method = "exact";
    PatchRequest patch;
};

}  // namespace headscope
