// headscope-cli's inputs from its options: the texts' token ids, an
// encoder's sentence pairs, an encoder–decoder's sources and targets.
// Bad input throws Error naming the option.
#pragma once
#include <string>
#include <vector>

#include "cli/cli_options.h"
#include "headscope/compute/text_batch.h"

namespace headscope {

// "I,J,..." as integers; an item that is not one fails naming `flag` and `what` it expects.
std::vector<int> parse_ints(const std::string& flag, const std::string& word, const std::string& what);

// Each --text with its --text-pair: the pair template's ids and token types (an encoder's).
TextBatch pair_batch(const Model& model, const CliOptions& opt);

// The texts as the JSON names them: --text's, or the --token-ids text decoded.
std::vector<std::string> input_texts(const Model& model, const CliOptions& opt,
                                     const std::vector<std::vector<int32_t>>& ids);

// What a forward reads: the texts (or --token-ids), an encoder's pairs, or
// an encoder–decoder's sources (--text) with the decoder's inputs (--target
// after the start token); with --truncate, each cut to the model's positions
// (saying so on stderr), which the forward otherwise refuses.
TextBatch forward_batch(const Model& model, const CliOptions& opt);

}  // namespace headscope
