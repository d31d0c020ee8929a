// The live forward on the worker (as the window runs it): results equal a
// direct forward, the newest request wins, overtaken requests never come
// back, refusals come back as errors, submit() returns while a long compute
// runs, and a job asked to stop sees it.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "headscope/base/error.h"
#include "headscope/base/worker.h"
#include "headscope/compute/live.h"
#include "model_writer.h"

using namespace headscope;

namespace {

class LiveTest : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        dir_ = new test::TempDir;
        test::write_test_model(dir_->path, {.n_layer = 2, .n_head = 4, .n_embd = 32, .n_positions = 512});
        model_ = new Model(load_model(dir_->path.string()));
    }
    static void TearDownTestSuite() {
        delete model_;
        delete dir_;
    }

    using Live = Worker<LiveResult>;
    // Queues the live forward of `texts` on `live`, as the window does.
    static uint64_t submit(Live& live, Backend& backend, std::vector<std::string> texts,
                           AttentionOptions options = {}) {
        return live.submit([&backend, request = LiveRequest{std::move(texts), std::move(options)}](std::stop_token) {
            return compute_live(backend, *model_, request);
        });
    }
    // Waits (bounded) for the worker to go idle, then takes its outcome.
    static std::optional<Live::Outcome> settle(Live& live) {
        for (int i = 0; i < 2000 && live.busy(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
        return live.take();
    }

    static test::TempDir* dir_;
    static Model* model_;
};
test::TempDir* LiveTest::dir_ = nullptr;
Model* LiveTest::model_ = nullptr;

TEST_F(LiveTest, ResultEqualsADirectForward) {
    auto backend = make_cpu_backend();
    backend->load_weights(*model_);
    Live live;
    AttentionOptions options;
    options.causal = false;
    const uint64_t generation = submit(live, *backend, {"The cat sat", "on the mat"}, options);
    const std::optional<Live::Outcome> got = settle(live);
    ASSERT_TRUE(got.has_value());
    EXPECT_EQ(got->generation, generation);
    EXPECT_EQ(got->error, "");

    auto direct = make_cpu_backend();
    direct->load_weights(*model_);
    AttentionResult want;
    direct->forward(Batch{{model_->tokenizer.encode("The cat sat"), model_->tokenizer.encode("on the mat")}, 50256},
                    options, want);
    EXPECT_EQ(got->result.attention.weights, want.weights);
    EXPECT_EQ(got->result.attention.fully_masked, want.fully_masked);
    EXPECT_FALSE(live.take().has_value());  // taken once
}

// The progress of a live forward: "computing layers" before each layer, in
// order; a Cancelled thrown at a layer ends it there.
TEST_F(LiveTest, ReportsEachLayerAndStopsWhereCancelled) {
    auto backend = make_cpu_backend();
    backend->load_weights(*model_);
    std::vector<int64_t> layers;
    const LiveRequest request{{"The cat sat on the mat"}, {}};
    compute_live(*backend, *model_, request, nullptr, [&](const ProgressReport& report) {
        EXPECT_EQ(report.what, "computing layers");
        EXPECT_EQ(report.total, 2);
        EXPECT_EQ(report.unit, ProgressUnit::steps);
        layers.push_back(report.done);
    });
    EXPECT_EQ(layers, (std::vector<int64_t>{0, 1}));

    layers.clear();
    EXPECT_THROW(compute_live(*backend, *model_, request, nullptr,
                              [&](const ProgressReport& report) {
                                  layers.push_back(report.done);
                                  if (report.done == 1) throw Cancelled();
                              }),
                 Cancelled);
    EXPECT_EQ(layers, (std::vector<int64_t>{0, 1}));
}

TEST_F(LiveTest, NewestRequestWinsAndStaleResultsAreDropped) {
    auto backend = make_cpu_backend();
    backend->load_weights(*model_);
    Live live;
    std::string text;
    uint64_t last = 0;
    for (int i = 0; i < 50; ++i) {  // typing, faster than the worker
        text += " word";
        last = submit(live, *backend, {text});
    }
    const std::optional<Live::Outcome> got = settle(live);
    ASSERT_TRUE(got.has_value());
    EXPECT_EQ(got->generation, last);
    EXPECT_EQ(got->result.token_ids.front(), model_->tokenizer.encode(text));
}

TEST_F(LiveTest, RefusalIsAnErrorResult) {
    auto backend = make_cpu_backend();
    backend->load_weights(*model_);
    Live live;
    std::string long_text;
    for (int i = 0; i < 600; ++i) long_text += " a";
    submit(live, *backend, {long_text});
    std::optional<Live::Outcome> got = settle(live);
    ASSERT_TRUE(got.has_value());
    EXPECT_NE(got->error.find("more than the model's limit of 512"), std::string::npos) << got->error;
    EXPECT_TRUE(got->result.attention.weights.empty());

    AttentionOptions bad;
    bad.n_head = 5;
    submit(live, *backend, {"hi"}, bad);
    got = settle(live);
    ASSERT_TRUE(got.has_value());
    EXPECT_NE(got->error.find("does not divide"), std::string::npos) << got->error;
}

TEST_F(LiveTest, SubmitDoesNotWaitForARunningCompute) {
    auto backend = make_cpu_backend();
    backend->load_weights(*model_);
    Live live;
    std::string long_text;
    for (int i = 0; i < 500; ++i) long_text += " b";
    const std::vector<std::string> batch(8, long_text);  // a compute of many milliseconds
    submit(live, *backend, batch);
    submit(live, *backend, {"short"});
    EXPECT_TRUE(live.busy());  // submit returned while the long compute still runs
    const std::optional<Live::Outcome> got = settle(live);
    ASSERT_TRUE(got.has_value());
    EXPECT_EQ(got->result.token_ids.size(), 1u);
}

}  // namespace

TEST(LiveWake, OnFinishedRunsOnceForEachResultHandedBack) {
    test::TempDir dir;
    test::write_test_model(dir.path, {.n_layer = 1, .n_head = 2, .n_embd = 16, .n_positions = 32});
    const Model model = load_model(dir.path.string());
    auto backend = make_cpu_backend();
    backend->load_weights(model);
    std::atomic<int> calls = 0;
    Worker<LiveResult> live([&] { ++calls; });
    for (const char* text : {"one", "two", ""}) {  // the last is refused: a result with an error
        live.submit(
            [&, request = LiveRequest{{text}, {}}](std::stop_token) { return compute_live(*backend, model, request); });
        for (int i = 0; i < 2000 && live.busy(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        // The callback runs after the result is stored: once busy() is false it may still be on its way.
        for (int i = 0; i < 2000 && !live.take(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    for (int i = 0; i < 2000 && calls < 3; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    EXPECT_EQ(calls, 3);
}

// A running job is asked to stop when a newer one comes, and its result never
// comes back; a job that throws comes back as its message.
TEST(WorkerStop, ANewerJobStopsTheRunningOneAndErrorsAreMessages) {
    Worker<int> worker;
    std::atomic<bool> started = false, saw_stop = false;
    worker.submit([&](std::stop_token stop) {
        started = true;
        for (int i = 0; i < 20000 && !stop.stop_requested(); ++i)
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        saw_stop = stop.stop_requested();
        return 1;
    });
    for (int i = 0; i < 2000 && !started; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    const uint64_t second = worker.submit([](std::stop_token) { return 2; });
    for (int i = 0; i < 2000 && worker.busy(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    EXPECT_TRUE(saw_stop);
    const std::optional<Worker<int>::Outcome> got = worker.take();
    ASSERT_TRUE(got.has_value());
    EXPECT_EQ(got->generation, second);
    EXPECT_EQ(got->result, 2);

    worker.submit([](std::stop_token) -> int { throw Error("refused"); });
    for (int i = 0; i < 2000 && worker.busy(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    const std::optional<Worker<int>::Outcome> refused = worker.take();
    ASSERT_TRUE(refused.has_value());
    EXPECT_EQ(refused->error, "refused");
}

// An outcome not taken before a newer request is dropped: take() never hands
// back an answer to anything but the newest request (after a model swap,
// the old model's maps). A request stays unanswered while it waits, runs
// or its outcome is not taken (the long lens waits for the live forward so).
TEST(WorkerStop, AnUntakenOutcomeGoesWithANewerRequest) {
    Worker<int> worker;
    EXPECT_FALSE(worker.unanswered());
    worker.submit([](std::stop_token) { return 1; });
    for (int i = 0; i < 2000 && worker.busy(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    EXPECT_TRUE(worker.unanswered());  // done, not taken
    std::atomic<bool> release = false;
    const uint64_t second = worker.submit([&](std::stop_token) {
        while (!release) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        return 2;
    });
    EXPECT_FALSE(worker.take().has_value());  // not 1: that answered an older request
    EXPECT_TRUE(worker.unanswered());         // the second runs
    release = true;
    for (int i = 0; i < 2000 && worker.busy(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    const std::optional<Worker<int>::Outcome> got = worker.take();
    ASSERT_TRUE(got.has_value());
    EXPECT_EQ(got->generation, second);
    EXPECT_EQ(got->result, 2);
    EXPECT_FALSE(worker.unanswered());
}
