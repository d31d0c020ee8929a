// Headscope installed, as a user gets it: `cmake --install` of this build
// into an empty prefix, then the installed programs run from an unrelated
// folder with an empty HOME and no HEADSCOPE_* variables, so they can only
// find their data beside themselves (installation.h). And the Debian package
// CPack makes of the same install: what it holds and what it depends on.
#include <gtest/gtest.h>

#include <array>
#include <cctype>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>

#include "headscope/compute/cuda_backend.h"
#include "model_writer.h"
#include "process.h"
#include "screenshot.h"

using namespace headscope;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

// Every run of `text` that starts with `prefix` and goes on while `inside`
// holds of its characters (std::regex trips GCC 12's -Wmaybe-uninitialized
// under the sanitizers).
std::vector<std::string> runs_from(const std::string& text, const std::string& prefix, bool (*inside)(char)) {
    std::vector<std::string> runs;
    for (size_t at = text.find(prefix); at != std::string::npos; at = text.find(prefix, at + 1)) {
        size_t end = at + prefix.size();
        while (end < text.size() && inside(text[end])) ++end;
        runs.push_back(text.substr(at, end - at));
    }
    return runs;
}

class Installed : public ::testing::Test {
protected:
    void SetUp() override {
        prefix_ = dir_.path / "prefix";
        const test::ProcessRun install = test::run_program(
            {HEADSCOPE_CMAKE, "--install", HEADSCOPE_BUILD_DIR, "--prefix", prefix_.string()}, dir_.path);
        ASSERT_EQ(install.status, 0) << install.out << install.err;
        fs::create_directories(home_);
        fs::create_directories(elsewhere_);
        previous_dir_ = fs::current_path();
        fs::current_path(elsewhere_);
    }
    void TearDown() override { fs::current_path(previous_dir_); }

    test::ProcessRun cli(std::vector<std::string> args) {
        args.insert(args.begin(), (prefix_ / "bin" / "headscope-cli").string());
        return test::run_program(args, dir_.path);
    }

    test::TempDir dir_;
    fs::path prefix_, previous_dir_, home_ = dir_.path / "home", elsewhere_ = dir_.path / "elsewhere";
    const test::ScopedEnv home{"HOME", home_.string()}, xdg{"XDG_CONFIG_HOME", std::nullopt},
        data{"HEADSCOPE_DATA", std::nullopt}, builtin{"HEADSCOPE_BUILTIN_MODEL", std::nullopt},
        examples{"HEADSCOPE_EXAMPLES", std::nullopt};
};

TEST_F(Installed, CliFindsTheBuiltInModelBesideItself) {
    const test::ProcessRun heads = cli({"heads"});
    ASSERT_EQ(heads.status, 0) << heads.err;
    // The same scores as the build tree's program on the source's model; only the model's path differs.
    const test::ProcessRun built = test::run_program({test::cli_program(), "heads"}, dir_.path);
    ASSERT_EQ(built.status, 0) << built.err;
    json installed_scores = json::parse(heads.out), built_scores = json::parse(built.out);
    EXPECT_EQ(fs::canonical(installed_scores["path"].get<std::string>()),
              fs::canonical(prefix_ / "share" / "headscope" / "builtin"));
    installed_scores.erase("path"), built_scores.erase("path");
    EXPECT_EQ(installed_scores, built_scores);
    EXPECT_FALSE(installed_scores["heads"].empty());

    EXPECT_TRUE(fs::is_empty(elsewhere_)) << "the CLI wrote into the working folder";
}

// The window on an example of the installed examples.json, with the
// installed font: each drawn cell has the colour of the installed CLI's weight.
TEST_F(Installed, WindowOpensAnInstalledExampleAndDrawsItsWeights) {
    const json example = json::parse(test::read_file(prefix_ / "share" / "headscope" / "examples.json")).at(0);
    ASSERT_EQ(example["texts"].size(), 1u);
    const fs::path exported = dir_.path / "attention.json";
    const test::WindowShot shot =
        test::shoot_window({"--example", example["title"].get<std::string>(), "--export-json", exported.string()},
                           dir_.path, "shot", prefix_ / "bin" / "headscope");
    ASSERT_EQ(shot.run.status, 0) << shot.run.err;
    EXPECT_EQ(json::parse(test::read_file(exported))["texts"], example["texts"]);

    const test::ProcessRun attention = cli({"attention", "--text", example["texts"][0].get<std::string>()});
    ASSERT_EQ(attention.status, 0) << attention.err;
    json cells = json::array();
    for (const json& cell : shot.layout)
        if (cell["view"] == "heads") cells.push_back(cell);
    ASSERT_FALSE(cells.empty());
    test::check_heatmap_cells(shot.image, cells, json::parse(attention.out), true);
    EXPECT_TRUE(fs::is_empty(elsewhere_)) << "the window wrote into the working folder";
}

TEST_F(Installed, VersionSaysWhetherCudaIsBuiltIn) {
    const std::string cuda = cuda_built_in() ? " (CUDA backend: built in)\n" : " (CUDA backend: not built in)\n";
    for (const std::string program : {"headscope", "headscope-cli"}) {
        const test::ProcessRun version =
            test::run_program({(prefix_ / "bin" / program).string(), "--version"}, dir_.path);
        EXPECT_EQ(version.status, 0) << version.err;
        EXPECT_EQ(version.out, program + " " HEADSCOPE_VERSION + cuda);
    }
}

// $HEADSCOPE_DATA wins, and is checked; a program with no data beside it says where it looked.
TEST_F(Installed, DataComesFromHeadscopeDataOrIsNamedMissing) {
    {
        const test::ScopedEnv moved("HEADSCOPE_DATA", (prefix_ / "share" / "headscope").string());
        EXPECT_EQ(cli({"info"}).status, 0);
    }
    {
        const test::ScopedEnv empty("HEADSCOPE_DATA", elsewhere_.string());
        test::expect_one_line_error(cli({"info"}), "headscope-cli", "HEADSCOPE_DATA=" + elsewhere_.string());
    }
    const fs::path alone = dir_.path / "alone" / "headscope-cli";
    fs::create_directories(alone.parent_path());
    fs::copy_file(prefix_ / "bin" / "headscope-cli", alone);
    test::expect_one_line_error(test::run_program({alone.string(), "info"}, dir_.path), "headscope-cli",
                                "nor " + (alone.parent_path() / "share" / "headscope").string());
}

// Nothing absolute from the build machine is in the programs of a Release
// build. Other builds name their sources for assert() and debug information.
TEST_F(Installed, ProgramsHoldNoPathOfTheBuildMachine) {
#ifdef HEADSCOPE_SOURCE_PATHS_IN_PROGRAMS
    GTEST_SKIP() << "this build's programs name their sources (asserts or debug information)";
#endif
    for (const char* program : {"headscope", "headscope-cli"}) {
        const std::string bytes = test::read_file(prefix_ / "bin" / program);
        for (const std::string path : {HEADSCOPE_SOURCE_DIR, HEADSCOPE_BUILD_DIR})
            EXPECT_EQ(bytes.find(path), std::string::npos) << program << " holds " << path;
    }
}

// The menu entry: valid by the freedesktop specification, running the
// program on PATH with the installed icon.
TEST_F(Installed, DesktopEntryIsValidAndNamesTheProgramAndIcon) {
    const fs::path entry = prefix_ / "share" / "applications" / "headscope.desktop";
    const test::ProcessRun validate = test::run_program({"desktop-file-validate", entry.string()}, dir_.path);
    if (validate.status == 127) GTEST_SKIP() << "desktop-file-validate cannot be run: run tools/setup";
    EXPECT_EQ(validate.status, 0) << validate.out << validate.err;
    const std::string text = test::read_file(entry);
    for (const char* line :
         {"\nName=Headscope\n", "\nExec=headscope\n", "\nIcon=headscope\n", "\nCategories=Education;Science;\n"})
        EXPECT_NE(text.find(line), std::string::npos) << line << " not in:\n" << text;
}

// The icon at each installed size: square, transparent in the rounded
// corners, the background's grey at the top right, the first token's yellow.
TEST_F(Installed, IconsAreDrawnAtTheirSizes) {
    for (const int size : {48, 128, 256}) {
        const std::string name = std::to_string(size) + "x" + std::to_string(size);
        const test::Image icon =
            test::load_png(prefix_ / "share" / "icons" / "hicolor" / name / "apps" / "headscope.png");
        ASSERT_EQ(icon.width, size) << name;
        ASSERT_EQ(icon.height, size) << name;
        EXPECT_EQ(icon.rgba[3], 0) << name << ": the corner is drawn";
        EXPECT_EQ(icon.at(size * 9 / 10, size / 5), (std::array<int, 3>{0x1a, 0x1a, 0x1f})) << name;
        EXPECT_EQ(icon.at(size * 16 / 100, size * 16 / 100), (std::array<int, 3>{0xfd, 0xe7, 0x25})) << name;
    }
    EXPECT_NE(
        test::read_file(prefix_ / "share" / "icons" / "hicolor" / "scalable" / "apps" / "headscope.svg").find("<svg"),
        std::string::npos);
}

// Each man page names every option its program's --help lists.
TEST_F(Installed, ManPagesNameEveryOption) {
    const std::vector<std::pair<std::string, std::vector<std::string>>> pages = {
        {"headscope", {""}},
        {"headscope-cli", {"info", "tokenize", "attention", "generate", "heads", "dance", "patch"}}};
    for (const auto& [program, commands] : pages) {
        const fs::path page = prefix_ / "share" / "man" / "man1" / (program + ".1.gz");
        const test::ProcessRun text = test::run_program({"gzip", "-dc", page.string()}, dir_.path);
        ASSERT_EQ(text.status, 0) << page << ": " << text.err;
        std::string troff = text.out;  // troff's \- as the - it prints
        for (size_t at = troff.find("\\-"); at != std::string::npos; at = troff.find("\\-", at)) troff.erase(at, 1);
        for (const std::string& command : commands) {
            std::vector<std::string> args = {(prefix_ / "bin" / program).string(), "--help"};
            if (!command.empty()) args.insert(args.begin() + 1, command);
            const test::ProcessRun help = test::run_program(args, dir_.path);
            ASSERT_EQ(help.status, 0) << help.err;
            for (const std::string& option : runs_from(
                     help.out, "--", [](char c) { return c == '-' || std::islower(static_cast<unsigned char>(c)); }))
                if (option.size() > 2 && option[2] != '-') {
                    EXPECT_NE(troff.find(option), std::string::npos) << page << " lacks " << command << " " << option;
                }
            EXPECT_TRUE(command.empty() || troff.find("\n.B " + command) != std::string::npos)
                << page << " has no entry for " << command;
        }
    }
}

// The package CPack makes of this build (tools/package makes it from a
// portable build), made once for the tests below.
class Package : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        dir_ = std::make_unique<test::TempDir>();
        const test::ProcessRun cpack =
            test::run_program({HEADSCOPE_CPACK, "--config", HEADSCOPE_BUILD_DIR "/CPackConfig.cmake", "-G", "DEB", "-B",
                               dir_->path.string()},
                              dir_->path);
        made_ = "cpack: " + std::to_string(cpack.status) + "\n" + cpack.out + cpack.err;
        if (cpack.status != 0) return;
        for (const fs::directory_entry& file : fs::directory_iterator(dir_->path))
            if (file.path().extension() == ".deb") deb_ = file.path();
    }
    static void TearDownTestSuite() { dir_.reset(); }

    void SetUp() override {
        ASSERT_EQ(deb_.filename().string().rfind("headscope_" HEADSCOPE_VERSION "_", 0), 0u) << made_;
    }

    static inline std::unique_ptr<test::TempDir> dir_;
    static inline fs::path deb_;
    static inline std::string made_;  // what cpack said
    test::TempDir scratch_;
};

// Its files and the dependencies dpkg-shlibdeps found.
TEST_F(Package, DebianPackageHoldsProgramsDataMenuEntryAndDependsOnTheLibraries) {
    const test::ProcessRun info = test::run_program({"dpkg-deb", "--field", deb_.string(), "Depends"}, scratch_.path);
    ASSERT_EQ(info.status, 0) << info.err;
    for (const char* library : {"libglfw3", "libutf8proc", "libpcre2-8", "libopenblas", "libsentencepiece0"})
        EXPECT_NE(info.out.find(library), std::string::npos) << "Depends: " << info.out;
    const test::ProcessRun section =
        test::run_program({"dpkg-deb", "--field", deb_.string(), "Section"}, scratch_.path);
    EXPECT_EQ(section.out, "science\n");

    const test::ProcessRun contents = test::run_program({"dpkg-deb", "--contents", deb_.string()}, scratch_.path);
    ASSERT_EQ(contents.status, 0) << contents.err;
    std::set<std::string> files;
    for (const std::string& entry :
         runs_from(contents.out, "./usr/", [](char c) { return !std::isspace(static_cast<unsigned char>(c)); }))
        files.insert(entry.substr(2));
    for (const char* file :
         {"usr/bin/headscope", "usr/bin/headscope-cli", "usr/share/headscope/builtin/model.safetensors",
          "usr/share/headscope/builtin/config.json", "usr/share/headscope/builtin/vocab.json",
          "usr/share/headscope/builtin/merges.txt", "usr/share/headscope/builtin/validation.txt",
          "usr/share/headscope/examples.json", "usr/share/headscope/fonts/DejaVuSans.ttf",
          "usr/share/applications/headscope.desktop", "usr/share/icons/hicolor/scalable/apps/headscope.svg",
          "usr/share/icons/hicolor/48x48/apps/headscope.png", "usr/share/icons/hicolor/128x128/apps/headscope.png",
          "usr/share/icons/hicolor/256x256/apps/headscope.png", "usr/share/man/man1/headscope.1.gz",
          "usr/share/man/man1/headscope-cli.1.gz", "usr/share/doc/headscope/copyright"})
        EXPECT_TRUE(files.count(file)) << file << " not in the package:\n" << contents.out;
}

// Its copyright file (Debian's machine-readable format) gives Headscope's
// licence, MIT, and the bundled font's, word for word as the font's own
// Debian package gives it; lintian finds no error in the package.
TEST_F(Package, CopyrightNamesTheLicencesAndLintianFindsNoError) {
    const fs::path root = scratch_.path / "root";
    const test::ProcessRun extract =
        test::run_program({"dpkg-deb", "--extract", deb_.string(), root.string()}, scratch_.path);
    ASSERT_EQ(extract.status, 0) << extract.err;
    const std::string copyright = test::read_file(root / "usr" / "share" / "doc" / "headscope" / "copyright");
    EXPECT_EQ(copyright.rfind("Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n", 0), 0u);
    for (const char* words : {"\nCopyright: 2026 The Headscope authors\nLicense: Expat\n", "MIT licence",
                              "\nFiles: usr/share/headscope/fonts/*\n", "\nLicense: bitstream-vera and Arev\n"})
        EXPECT_NE(copyright.find(words), std::string::npos) << words << " not in:\n" << copyright;
    // The font's copyright file installed beside it is fonts-dejavu-core's own.
    const std::string font_copyright =
        test::read_file(root / "usr" / "share" / "headscope" / "fonts" / "DejaVuSans.copyright");
    const size_t vera = font_copyright.find("License: bitstream-vera\n");
    ASSERT_NE(vera, std::string::npos) << font_copyright;
    const std::string vera_licence = font_copyright.substr(vera, font_copyright.find("\n\n", vera) - vera);
    EXPECT_NE(copyright.find(vera_licence), std::string::npos) << vera_licence;

    const test::ProcessRun lintian = test::run_program({"lintian", "--fail-on", "error", deb_.string()}, scratch_.path);
    if (lintian.status == 127) GTEST_SKIP() << "lintian cannot be run: run tools/setup";
    EXPECT_EQ(lintian.status, 0) << lintian.out << lintian.err;
}

}  // namespace
