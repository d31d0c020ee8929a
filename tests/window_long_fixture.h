// test_window_long's fixture, shared with test_window_long_exports: a
// 2-layer, 4-head GPT-2-layout model of 2,304 positions, a text of 2,100
// one-token words in a file, and core's forward of it keeping every map
// (the independent computation the window's long view is checked against).
#pragma once
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "headscope/compute/backend.h"
#include "headscope/model/model.h"
#include "model_writer.h"

namespace headscope::test {

constexpr int layers = 2, heads = 4;

class WindowLong : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        dir_ = new TempDir;
        write_test_model(dir_->path / "model", {.n_layer = layers,
                                                .n_head = heads,
                                                .n_embd = 32,
                                                .n_positions = 2304,
                                                .transformer_prefix = false,
                                                .seed = 7});
        model_ = new Model(load_model(model_dir()));
        // Words of one token each, drawn by a fixed linear congruence: 2,100 tokens.
        const char* words[] = {" the", " cat",   " sat", " on",  " mat", " and", " dog", " ran",
                               " to",  " house", " a",   " big", " red", " in",  " of",  " it"};
        uint32_t seed = 12345;
        for (int w = 0; w < 2100; ++w) {
            seed = seed * 1664525u + 1013904223u;
            text_ += words[(seed >> 16) % 16];
        }
        std::ofstream(text_path()) << text_;
        auto backend = make_cpu_backend();
        backend->load_weights(*model_);
        full_ = new AttentionResult;
        batch_ = new Batch{model_->tokenizer.encode_texts({text_}), model_->config.pad_id()};
        backend->forward(*batch_, AttentionOptions{}, *full_);
    }
    static void TearDownTestSuite() {
        delete full_;
        delete batch_;
        delete model_;
        delete dir_;
    }
    static std::string model_dir() { return (dir_->path / "model").string(); }
    static std::string text_path() { return (dir_->path / "long.txt").string(); }
    static int length() { return static_cast<int>(batch_->token_ids[0].size()); }
    static double weight(int l, int h, int q, int k) { return full_->row(l, 0, h, q)[k]; }

    static inline TempDir* dir_ = nullptr;
    static inline Model* model_ = nullptr;
    static inline std::string text_;
    static inline Batch* batch_ = nullptr;
    static inline AttentionResult* full_ = nullptr;  // every map
};

}  // namespace headscope::test
