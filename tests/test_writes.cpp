// Every file Headscope writes is written whole or not at all
// (write_file_atomically). Each writer writes a good file and then meets the
// ways a write fails: its target a directory, a read-only directory, a full
// disk. Each failure is one line naming the file; the previous file stays as
// it was, and no temporary file is left beside it.
#include <gtest/gtest.h>
#include <linux/capability.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <functional>
#include <map>
#include <ostream>

#include "bpe_trainer.h"
#include "headscope/base/error.h"
#include "headscope/io/files.h"
#include "headscope/io/safetensors.h"
#include "headscope/model/model.h"
#include "model_writer.h"
#include "process.h"
#include "screenshot.h"
#include "state/settings.h"

using namespace headscope;
namespace fs = std::filesystem;

namespace {

// What a write meets.
enum class Obstacle {
    none,
    read_only,  // a directory's missing write permission holds, even for root
    full_disk,  // files grow to at most 512 bytes; a write past that fails (EFBIG) as on a full disk
};

const char* reason_of(Obstacle obstacle) {
    return obstacle == Obstacle::read_only ? "Permission denied" : "File too large";
}

// A program run under `obstacle`: the command that runs it (with its own
// arguments after). Root may write anywhere by CAP_DAC_OVERRIDE, dropped here.
std::vector<std::string> under(Obstacle obstacle) {
    if (obstacle == Obstacle::read_only && geteuid() == 0) return {"setpriv", "--bounding-set=-dac_override", "--"};
    // SIGXFSZ ignored, so that the write fails rather than the program being killed.
    if (obstacle == Obstacle::full_disk)
        return {"sh", "-c", "trap '' XFSZ && exec prlimit --fsize=512 -- \"$@\"", "sh"};
    return {};
}

// What `under` does, for a child process of this one.
void meet(Obstacle obstacle) {
    if (obstacle == Obstacle::read_only) {
        __user_cap_header_struct header = {_LINUX_CAPABILITY_VERSION_3, 0};
        __user_cap_data_struct caps[2] = {};
        syscall(SYS_capget, &header, caps);
        caps[0].effective &= ~(1u << CAP_DAC_OVERRIDE);
        syscall(SYS_capset, &header, caps);
    }
    if (obstacle == Obstacle::full_disk) {
        signal(SIGXFSZ, SIG_IGN);
        const rlimit limit = {512, 512};
        setrlimit(RLIMIT_FSIZE, &limit);
    }
}

// A writer called in this process, its Error as a program's error line; in
// a child process that meets the obstacle, if any.
test::ProcessRun call(Obstacle obstacle, const std::function<void()>& writer) {
    auto run = [&]() -> test::ProcessRun {
        try {
            writer();
        } catch (const Error& e) {
            return {2, "", e.what() + std::string("\n")};
        }
        return {0, "", ""};
    };
    if (obstacle == Obstacle::none) return run();
    int fds[2];
    if (pipe(fds) != 0) throw std::runtime_error("pipe failed");
    const pid_t pid = fork();
    if (pid == 0) {  // sends the error line back
        close(fds[0]);
        meet(obstacle);
        const std::string err = run().err;  // one short line: one write
        _exit(write(fds[1], err.data(), err.size()) == static_cast<ssize_t>(err.size()) ? 0 : 1);
    }
    close(fds[1]);
    std::string err;
    char chunk[4096];
    for (ssize_t n; (n = read(fds[0], chunk, sizeof chunk)) > 0;) err.append(chunk, static_cast<size_t>(n));
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return {-1, "", "the child process failed: " + err};
    return {err.empty() ? 0 : 2, "", err};
}

// A failed write: exit status 2 and one line "<program>: error: <target>:
// cannot write ...: <reason>" on stderr (without the program's part from a
// writer called in this process).
void expect_cannot_write(const test::ProcessRun& r, const std::string& program, const fs::path& target,
                         const std::string& reason) {
    const std::string start = (program.empty() ? "" : program + ": error: ") + target.string() + ": cannot write ";
    EXPECT_EQ(r.status, 2) << r.err;
    EXPECT_EQ(r.err.rfind(start, 0), 0u) << "expected '" << start << "...' in: " << r.err;
    EXPECT_TRUE(r.err.ends_with(": " + reason + "\n")) << "expected '" << reason << "' in: " << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

// write_file_atomically names its temporary files "<target>.tmp-<pid>-<n>".
void expect_no_temporary_files(const fs::path& dir) {
    for (const fs::directory_entry& entry : fs::recursive_directory_iterator(dir))
        EXPECT_EQ(entry.path().filename().string().find(".tmp-"), std::string::npos) << entry.path();
}

// The contents of the files `names` in `dir`, to compare after a failed write.
std::map<std::string, std::string> contents_of(const fs::path& dir, const std::vector<std::string>& names) {
    std::map<std::string, std::string> contents;
    for (const std::string& name : names) contents[name] = test::read_file(dir / name);
    return contents;
}

void expect_unchanged(const fs::path& dir, const std::map<std::string, std::string>& previous) {
    for (const auto& [name, contents] : previous) EXPECT_TRUE(test::read_file(dir / name) == contents) << name;
}

void make_read_only(const fs::path& dir, bool read_only) {
    fs::permissions(dir, read_only ? fs::perms::owner_read | fs::perms::owner_exec : fs::perms::owner_all);
}

// The checks every writer gets. `write(target, obstacle)` writes the file
// at target, by `program` ("" for a writer called in this process): a good
// file, and a second over it; then the target a directory, its directory
// read-only and a full disk, each one line naming the file, with the
// previous file intact and no temporary file left.
void check_writer(const std::string& program, const std::string& name,
                  const std::function<test::ProcessRun(const fs::path&, Obstacle)>& write) {
    test::TempDir dir;
    const fs::path target = dir.path / name;
    const test::ProcessRun first = write(target, Obstacle::none);
    ASSERT_EQ(first.status, 0) << first.err;
    const test::ProcessRun second = write(target, Obstacle::none);
    ASSERT_EQ(second.status, 0) << "over the first: " << second.err;
    const std::map<std::string, std::string> previous = contents_of(dir.path, {name});
    ASSERT_GT(previous.at(name).size(), 512u) << "more than the full disk takes";

    const fs::path directory = dir.path / "taken" / name;
    fs::create_directories(directory);
    expect_cannot_write(write(directory, Obstacle::none), program, directory, "Is a directory");
    EXPECT_TRUE(fs::is_empty(directory));

    for (Obstacle obstacle : {Obstacle::read_only, Obstacle::full_disk}) {
        make_read_only(dir.path, obstacle == Obstacle::read_only);
        const test::ProcessRun r = write(target, obstacle);
        make_read_only(dir.path, false);
        expect_cannot_write(r, program, target, reason_of(obstacle));
        expect_unchanged(dir.path, previous);
    }
    expect_no_temporary_files(dir.path);
}

test::ProcessRun run_cli(const std::vector<std::string>& args, Obstacle obstacle, const fs::path& scratch) {
    std::vector<std::string> command = under(obstacle);
    command.push_back(test::cli_program());
    command.insert(command.end(), args.begin(), args.end());
    return test::run_program(command, scratch);
}

void write_data(const fs::path& target) {
    write_file_atomically(target, "the data", [](std::ostream& out) { out << std::string(4096, 'x'); });
}

TEST(WriteFileAtomically, WritesWholeOrNotAtAll) {
    check_writer("", "data.txt",
                 [](const fs::path& target, Obstacle obstacle) { return call(obstacle, [&] { write_data(target); }); });
}

TEST(WriteFileAtomically, AnExceptionWhileWritingLeavesThePreviousFile) {
    test::TempDir dir;
    const fs::path target = dir.path / "data.txt";
    write_file_atomically(target, "the data", [](std::ostream& out) { out << "before"; });
    try {
        write_file_atomically(target, "the data", [](std::ostream& out) {
            out << "half";
            throw Error("the writer gave up");
        });
        ADD_FAILURE() << "no exception";
    } catch (const Error& e) {
        EXPECT_STREQ(e.what(), "the writer gave up");
    }
    EXPECT_EQ(test::read_file(target), "before");
    expect_no_temporary_files(dir.path);
}

// A replaced file keeps its permissions, and a link keeps pointing at the
// file it named, which now holds the new contents.
TEST(WriteFileAtomically, KeepsPermissionsAndLinks) {
    test::TempDir dir;
    const fs::path file = dir.path / "file.txt", link = dir.path / "link.txt";
    write_file_atomically(file, "the data", [](std::ostream& out) { out << "first"; });
    fs::permissions(file, fs::perms::owner_read | fs::perms::owner_write);
    fs::create_symlink(file, link);
    write_file_atomically(link, "the data", [](std::ostream& out) { out << "second"; });
    EXPECT_TRUE(fs::is_symlink(link));
    EXPECT_EQ(test::read_file(file), "second");
    EXPECT_EQ(fs::status(file).permissions(), fs::perms::owner_read | fs::perms::owner_write);
    expect_no_temporary_files(dir.path);
}

// A device has no contents to keep and must not be replaced by a file:
// /dev/full is a full disk, /dev/null takes everything.
TEST(WriteFileAtomically, DevicesAreWrittenInPlace) {
    expect_cannot_write(call(Obstacle::none, [] { write_data("/dev/full"); }), "", "/dev/full",
                        "No space left on device");
    EXPECT_EQ(call(Obstacle::none, [] { write_data("/dev/null"); }).status, 0);
    EXPECT_TRUE(fs::is_character_file("/dev/null"));
}

TEST(Writers, Settings) {
    Settings settings;
    settings.texts = {std::string(600, 'a')};  // more than the full disk takes
    check_writer("", "settings.json", [&](const fs::path& target, Obstacle obstacle) {
        return call(obstacle, [&] { write_settings(target, settings); });
    });
}

TEST(Writers, Safetensors) {
    const std::vector<float> weights(256, 0.5f);
    check_writer("", "model.safetensors", [&](const fs::path& target, Obstacle obstacle) {
        return call(obstacle, [&] { write_safetensors(target, {{"w", {16, 16}, weights}}); });
    });
}

TEST(Writers, Tokenizer) {
    const BpeVocab vocab = train_bpe({}, 256);
    check_writer("", "vocab.json", [&](const fs::path& target, Obstacle obstacle) {
        return call(obstacle, [&] { write_gpt2_tokenizer(vocab, target.parent_path()); });
    });
}

TEST(Writers, CliJson) {
    test::TempDir scratch;
    check_writer("headscope-cli", "attention.json", [&](const fs::path& target, Obstacle obstacle) {
        return run_cli({"attention", "--text", "The cat sat on the mat", "--out", target.string()}, obstacle,
                       scratch.path);
    });
    expect_cannot_write(run_cli({"info", "--out", "/dev/full"}, Obstacle::none, scratch.path), "headscope-cli",
                        "/dev/full", "No space left on device");
}

TEST(Writers, CliNpy) {
    test::TempDir scratch;
    check_writer("headscope-cli", "attention.npy", [&](const fs::path& target, Obstacle obstacle) {
        return run_cli({"attention", "--text", "The cat sat on the mat", "--format", "npy", "--out", target.string()},
                       obstacle, scratch.path);
    });
}

TEST(Writers, WindowScreenshot) {
    test::TempDir scratch;
    check_writer("headscope", "shot.png", [&](const fs::path& target, Obstacle obstacle) {
        return test::run_window({"--screenshot", target.string()}, scratch.path, under(obstacle));
    });
}

// The window's exports and layout, written after its screenshot: each
// target in turn a directory, then their directory read-only.
TEST(Writers, WindowExportsAndLayout) {
    test::TempDir dir;
    const fs::path out = dir.path / "out", taken = dir.path / "taken";
    const std::vector<std::string> names = {"attention.json", "attention.npy", "figure.svg", "layout.json"};
    auto window = [&](const std::vector<fs::path>& targets, Obstacle obstacle) {
        return test::run_window(
            {"--screenshot", (dir.path / "shot.png").string(), "--export-json", targets[0].string(), "--export-npy",
             targets[1].string(), "--export-svg", targets[2].string(), "--layout", targets[3].string()},
            dir.path, under(obstacle));
    };
    std::vector<fs::path> targets;
    for (const std::string& name : names) targets.push_back(out / name);
    fs::create_directories(out);
    const test::ProcessRun good = window(targets, Obstacle::none);
    ASSERT_EQ(good.status, 0) << good.err;
    const std::map<std::string, std::string> previous = contents_of(out, names);
    EXPECT_EQ(previous.at("attention.npy").substr(1, 5), "NUMPY");
    EXPECT_EQ(previous.at("figure.svg").rfind("<?xml", 0), 0u);

    make_read_only(out, true);
    const test::ProcessRun read_only = window(targets, Obstacle::read_only);
    make_read_only(out, false);
    expect_cannot_write(read_only, "headscope", targets[0], "Permission denied");
    expect_unchanged(out, previous);

    for (size_t i = 0; i < names.size(); ++i) {
        std::vector<fs::path> with_directory = targets;
        with_directory[i] = taken / names[i];
        fs::create_directories(with_directory[i]);
        expect_cannot_write(window(with_directory, Obstacle::none), "headscope", with_directory[i], "Is a directory");
    }
    expect_no_temporary_files(dir.path);
}

// With --settings on the window saves settings.json and imgui.ini as it
// closes; when it cannot, a warning line for each, the previous files intact.
TEST(Writers, WindowSettings) {
    test::TempDir dir;
    test::ScopedEnv xdg("XDG_CONFIG_HOME", dir.path.string());
    const fs::path config = dir.path / "headscope";
    auto window = [&](Obstacle obstacle) {
        return test::run_window({"--settings", "on", "--screenshot", (dir.path / "shot.png").string()}, dir.path,
                                under(obstacle));
    };
    const test::ProcessRun good = window(Obstacle::none);
    ASSERT_EQ(good.status, 0) << good.err;
    const std::map<std::string, std::string> previous = contents_of(config, {"settings.json", "imgui.ini"});
    EXPECT_NE(previous.at("imgui.ini").find("[Window]"), std::string::npos);

    make_read_only(config, true);
    const test::ProcessRun read_only = window(Obstacle::read_only);
    make_read_only(config, false);
    EXPECT_EQ(read_only.status, 0);
    EXPECT_EQ(read_only.err, "headscope: warning: " + (config / "settings.json").string() +
                                 ": cannot write the settings: Permission denied\n"
                                 "headscope: warning: " +
                                 (config / "imgui.ini").string() +
                                 ": cannot write the window layout: Permission denied\n");
    expect_unchanged(config, previous);
    expect_no_temporary_files(dir.path);
}

// headscope-train's model directory: a good one that loads; then a target a
// directory, the directory read-only (the loss log, written first, fails)
// and a full disk (the first weights written, the probe checkpoint's, fail),
// the previous model intact. The loss log is the latest run's, from its start.
TEST(Writers, TrainersModelAndRecord) {
    test::TempDir dir;
    fs::create_directories(dir.path / "tokenizer");
    PieceCounts pieces;
    count_pieces("ab ab ab", pieces);
    write_gpt2_tokenizer(train_bpe(pieces, 257), dir.path / "tokenizer");  // the 256 bytes, "ab" and <|endoftext|>
    fs::create_directories(dir.path / "corpus");
    std::string corpus;
    for (int i = 0; i < 20; ++i) corpus += "The cat sat on the mat number " + std::to_string(i) + ".\n<|endoftext|>\n";
    for (const char* name : {"train.txt", "val.txt"})
        write_file_atomically(dir.path / "corpus" / name, "the corpus", [&](std::ostream& out) { out << corpus; });
    auto train = [&](const fs::path& out, Obstacle obstacle) {
        std::vector<std::string> command = under(obstacle);
        command.insert(command.end(), {HEADSCOPE_TRAIN,
                                       "--corpus",
                                       (dir.path / "corpus").string(),
                                       "--tokenizer",
                                       (dir.path / "tokenizer").string(),
                                       "--out",
                                       out.string(),
                                       "--layers",
                                       "1",
                                       "--heads",
                                       "1",
                                       "--embd",
                                       "8",
                                       "--context",
                                       "8",
                                       "--batch",
                                       "1",
                                       "--steps",
                                       "2",
                                       "--warmup",
                                       "1",
                                       "--eval-every",
                                       "2",
                                       "--short-context",
                                       "8",
                                       "--short-context-steps",
                                       "0"});
        return test::run_program(command, dir.path);
    };
    const fs::path model = dir.path / "model";
    const test::ProcessRun good = train(model, Obstacle::none);
    ASSERT_EQ(good.status, 0) << good.err;
    EXPECT_EQ(load_model(model.string()).config.n_layer, 1);
    const std::vector<std::string> files = {"config.json",       "loss_log.csv",   "merges.txt",
                                            "model.safetensors", "validation.txt", "vocab.json"};
    std::vector<std::string> written;
    for (const fs::directory_entry& entry : fs::directory_iterator(model))
        written.push_back(entry.path().filename().string());
    std::sort(written.begin(), written.end());
    EXPECT_EQ(written, files);
    std::map<std::string, std::string> previous = contents_of(model, files);

    const fs::path taken = dir.path / "taken";
    fs::create_directories(taken / "config.json");
    expect_cannot_write(train(taken, Obstacle::none), "headscope-train", taken / "config.json", "Is a directory");

    make_read_only(model, true);
    const test::ProcessRun read_only = train(model, Obstacle::read_only);
    make_read_only(model, false);
    expect_cannot_write(read_only, "headscope-train", model / "loss_log.csv", "Permission denied");
    expect_unchanged(model, previous);

    expect_cannot_write(train(model, Obstacle::full_disk), "headscope-train",
                        model / "probe-checkpoint" / "model.safetensors", "File too large");
    previous.erase("loss_log.csv");
    expect_unchanged(model, previous);
    expect_no_temporary_files(dir.path);
}

}  // namespace
