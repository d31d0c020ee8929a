// write-test-model DIR: writes a GPT-2-layout model with random weights and
// GPT-2's real vocabulary into DIR (by default 2 layers, 4 heads, C=64, 256
// positions; --layers 12 --heads 12 --embd 768 --positions 1024 is GPT-2
// small's shape, for the benchmarks). --family NAME writes one of the
// families' test checkpoints instead (family_models.h: llama, qwen3, mistral,
// gpt_neox_parallel, ...), to look at in the window; --encoder NAME one of
// the encoders' (encoder_models.h: bert, bert_tanh_gelu, roberta,
// distilbert), shaped by --layers, --heads, --embd and --positions when given
// (the MLP 4 x --embd); --seq2seq NAME one of the encoder–decoders'
// (seq2seq_models.h: t5, flan_t5, bart, marian), shaped likewise (--layers
// each stack's, the heads' size --embd / --heads).
#include <CLI/CLI.hpp>

#include "encoder_models.h"
#include "family_models.h"
#include "model_writer.h"
#include "seq2seq_models.h"

int main(int argc, char** argv) {
    CLI::App cli{"Write a random GPT-2-layout model", "write-test-model"};
    std::string dir;
    headscope::test::TestModelSpec spec{.n_embd = 64, .n_positions = 256};
    bool f16 = false;
    std::string family, encoder, seq2seq;
    cli.add_option("dir", dir)->required();
    cli.add_option("--encoder", encoder, "an encoder test checkpoint by name (bert, roberta, distilbert, ...)");
    cli.add_option("--seq2seq", seq2seq, "an encoder-decoder test checkpoint by name (t5, flan_t5, bart, marian)");
    cli.add_option("--family", family, "a family test checkpoint by name (llama, qwen3, mistral, ...)");
    cli.add_option("--layers", spec.n_layer);
    cli.add_option("--heads", spec.n_head);
    cli.add_option("--embd", spec.n_embd);
    cli.add_option("--positions", spec.n_positions);
    cli.add_flag("--f16", f16, "store the weights as F16 (half the disk)");
    CLI11_PARSE(cli, argc, argv);
    if (!family.empty()) {
        headscope::test::write_family_model(dir, headscope::test::family_variant(family));
        return 0;
    }
    if (!encoder.empty()) {
        headscope::test::EncoderSpec e = headscope::test::encoder_variant(encoder);
        if (cli.count("--layers")) e.n_layer = spec.n_layer;
        if (cli.count("--heads")) e.n_head = spec.n_head;
        if (cli.count("--embd")) e.n_embd = spec.n_embd, e.mlp_dim = 4 * spec.n_embd;
        if (cli.count("--positions"))
            e.max_positions = spec.n_positions + (e.family == headscope::test::Encoder::roberta ? 2 : 0);
        headscope::test::write_encoder_checkpoint(dir, headscope::test::make_encoder_checkpoint(e));
        return 0;
    }
    if (!seq2seq.empty()) {
        headscope::test::Seq2SeqSpec s = headscope::test::seq2seq_variant(seq2seq);
        if (cli.count("--layers")) s.encoder_layers = s.decoder_layers = spec.n_layer;
        if (cli.count("--heads")) s.n_head = spec.n_head;
        if (cli.count("--embd")) s.n_embd = spec.n_embd, s.mlp_dim = 4 * spec.n_embd;
        if (cli.count("--heads") || cli.count("--embd")) s.head_dim = s.n_embd / s.n_head;
        if (cli.count("--positions")) s.max_positions = spec.n_positions;
        headscope::test::write_seq2seq_checkpoint(dir, headscope::test::make_seq2seq_checkpoint(s));
        return 0;
    }
    if (f16) spec.dtype = headscope::test::FileDType::F16;
    headscope::test::write_test_model(dir, spec);
    return 0;
}
