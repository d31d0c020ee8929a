// The documentation's links: every relative link or image in README.md and
// docs/*.md names a file that exists, and README.md stays short enough to
// read (at most 300 lines; the manuals are under docs/).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

const fs::path repository = fs::path(HEADSCOPE_TESTS_DIR).parent_path();

std::string read_text(const fs::path& file) {
    std::ifstream in(file);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
}

// README.md and every docs/*.md.
std::vector<fs::path> markdown_files() {
    std::vector<fs::path> files = {repository / "README.md"};
    for (const auto& entry : fs::directory_iterator(repository / "docs"))
        if (entry.is_regular_file() && entry.path().extension() == ".md") files.push_back(entry.path());
    return files;
}

// The targets of `[text](target)` and `![alt](target)` that name a file of
// the repository: not a web or mail address, not an anchor of the same page;
// an anchor after the file is dropped.
std::vector<std::string> relative_targets(const std::string& markdown) {
    static const std::regex link(R"(\]\(([^()\s]+)(\s+"[^"]*")?\))");
    static const std::regex external(R"(^(https?:|mailto:|#))");
    std::vector<std::string> targets;
    for (auto it = std::sregex_iterator(markdown.begin(), markdown.end(), link); it != std::sregex_iterator(); ++it) {
        const std::string target = (*it)[1].str();
        if (std::regex_search(target, external)) continue;
        targets.push_back(target.substr(0, target.find('#')));
    }
    return targets;
}

TEST(DocsLinks, EveryRelativeLinkNamesAFileThatExists) {
    int links = 0;
    for (const fs::path& file : markdown_files())
        for (const std::string& target : relative_targets(read_text(file))) {
            ++links;
            EXPECT_TRUE(fs::exists(file.parent_path() / target))
                << fs::relative(file, repository) << " links to " << target << ", which does not exist";
        }
    EXPECT_GE(links, 20) << "too few links found: is the parse broken?";
}

TEST(DocsLinks, TheParseKeepsFilesAndSkipsAddressesAndAnchors) {
    const std::vector<std::string> targets = relative_targets(
        "[a](docs/cli.md#head-probes) ![b](docs/images/heads.png) [c](https://example.org/x.md) [d](#top) "
        "[e](mailto:a@b.c)");
    EXPECT_EQ(targets, (std::vector<std::string>{"docs/cli.md", "docs/images/heads.png"}));
}

TEST(DocsLinks, TheReadmeIsAtMost300Lines) {
    const std::string readme = read_text(repository / "README.md");
    ASSERT_FALSE(readme.empty());
    EXPECT_LE(std::count(readme.begin(), readme.end(), '\n'), 300);
}

}  // namespace
