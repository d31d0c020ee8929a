// The tests' running llama.cpp: see llama_cpp.h.
#include "llama_cpp.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

#include "headscope/io/files.h"

namespace headscope::test {
namespace {

const std::string script = (std::filesystem::path(HEADSCOPE_TESTS_DIR) / "reference" / "llama_cpp.js").string();

// node running llama_cpp.js, a request line in, an answer line out.
class LlamaCppProcess {
public:
    LlamaCppProcess() {
        int to_child[2], from_child[2];
        // Close-on-exec: no other program the tests start holds the pipes open.
        if (pipe2(to_child, O_CLOEXEC) != 0 || pipe2(from_child, O_CLOEXEC) != 0)
            throw std::runtime_error("no pipe to start " + script);
        signal(SIGPIPE, SIG_IGN);  // a node that has ended is an answer, not a signal
        std::fflush(nullptr);
        pid_ = fork();
        if (pid_ == 0) {
            if (dup2(to_child[0], STDIN_FILENO) < 0 || dup2(from_child[1], STDOUT_FILENO) < 0) _exit(127);
            execlp("node", "node", script.c_str(), static_cast<char*>(nullptr));
            _exit(127);
        }
        close(to_child[0]);
        close(from_child[1]);
        to_ = fdopen(to_child[1], "w");
        from_ = fdopen(from_child[0], "r");
    }
    ~LlamaCppProcess() {
        std::fclose(to_);  // its end of input: it exits
        std::fclose(from_);
        if (!status_) waitpid(pid_, nullptr, 0);
    }
    LlamaCppProcess(const LlamaCppProcess&) = delete;
    LlamaCppProcess& operator=(const LlamaCppProcess&) = delete;

    // Its answer to `line`; none once it has ended (exit_status() says how).
    std::optional<std::string> ask(const std::string& line) {
        if (status_) return std::nullopt;
        std::fputs((line + "\n").c_str(), to_);
        std::fflush(to_);
        char* answer = nullptr;
        size_t capacity = 0;
        const ssize_t length = getline(&answer, &capacity, from_);
        std::optional<std::string> out;
        if (length > 0) out.emplace(answer, static_cast<size_t>(length));
        std::free(answer);
        if (!out) {
            int status = 0;
            waitpid(pid_, &status, 0);
            status_ = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        }
        return out;
    }
    int exit_status() const { return status_.value_or(0); }

private:
    pid_t pid_;
    FILE* to_;
    FILE* from_;
    std::optional<int> status_;  // once it has ended
};

// FNV-1a, 64 bits: the answers' names.
uint64_t fnv1a(const std::string& bytes, uint64_t hash = 0xcbf29ce484222325ull) {
    for (const unsigned char byte : bytes) hash = (hash ^ byte) * 0x100000001b3ull;
    return hash;
}

// Where llama.cpp's answer to `request` is kept: named by the bytes of the
// file it names (every request names one, as "tokenize" or "next_tokens"),
// the request without the file's path, and the script.
std::filesystem::path answer_path(const nlohmann::json& request) {
    nlohmann::json question = request;
    std::string file_bytes;
    for (const char* key : {"tokenize", "next_tokens"})
        if (question.contains(key)) {
            file_bytes = headscope::read_file(question[key].get<std::string>());
            question[key] = "";
        }
    static const uint64_t script_hash = fnv1a(headscope::read_file(script));
    const uint64_t hash = fnv1a(question.dump(), fnv1a(file_bytes, script_hash));
    char name[32];
    std::snprintf(name, sizeof name, "%016llx.json", static_cast<unsigned long long>(hash));
    return std::filesystem::path(HEADSCOPE_LLAMA_CPP_ANSWERS) / name;
}

// llama.cpp's answer line, asked of the running process.
std::optional<std::string> asked(const nlohmann::json& request) {
    static LlamaCppProcess llama_cpp;
    const std::optional<std::string> line = llama_cpp.ask(request.dump(-1, ' ', true));
    if (!line && llama_cpp.exit_status() != 127)
        throw std::runtime_error("tests/reference/llama_cpp.js ended with status " +
                                 std::to_string(llama_cpp.exit_status()));
    return line;
}

}  // namespace

std::optional<nlohmann::json> ask_llama_cpp(const nlohmann::json& request) {
    const std::filesystem::path kept = answer_path(request);
    if (std::filesystem::exists(kept)) return nlohmann::json::parse(headscope::read_file(kept));
    const std::optional<std::string> line = asked(request);
    if (!line) return std::nullopt;  // no node to run
    nlohmann::json answer = nlohmann::json::parse(*line);
    if (answer.is_object() && answer.contains("error"))
        throw std::runtime_error("tests/reference/llama_cpp.js failed: " + answer["error"].get<std::string>());
    // Written whole, then renamed: a program beside this one reads all of it or none.
    std::filesystem::create_directories(kept.parent_path());
    const std::filesystem::path part = kept.string() + "." + std::to_string(getpid());
    std::ofstream(part, std::ios::binary) << *line;
    std::filesystem::rename(part, kept);
    return answer;
}

}  // namespace headscope::test
