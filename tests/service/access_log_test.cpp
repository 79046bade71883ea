// The access log's batch (service/platform/log_batch.hpp, log.cpp): held lines are written when the oldest
// has waited the interval (on an injected clock: nothing waits here), when the batch is full, before any
// other line, on flush() and at exit.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "platform/log.hpp"
#include "platform/log_batch.hpp"

extern char** environ;

namespace {

namespace log = folio::service::log;
using log::line_batch;
using namespace std::chrono_literals;

TEST(AccessLog, HeldLinesAreDueWhenTheOldestHasWaitedTheInterval) {
  line_batch b(1024, 1s);
  const line_batch::clock::time_point t0{};  // the injected clock's times
  EXPECT_FALSE(b.deadline());
  EXPECT_FALSE(b.due(t0 + 10s));  // nothing held
  EXPECT_FALSE(b.add("one\n", t0));
  ASSERT_TRUE(b.deadline());
  EXPECT_EQ(*b.deadline(), t0 + 1s);
  EXPECT_FALSE(b.add("two\n", t0 + 900ms));  // a later line does not move the deadline
  EXPECT_EQ(*b.deadline(), t0 + 1s);
  EXPECT_FALSE(b.due(t0 + 1s - 1ns));
  EXPECT_TRUE(b.due(t0 + 1s));
  EXPECT_EQ(b.held(), "one\ntwo\n");
  b.clear();
  EXPECT_FALSE(b.deadline());
  EXPECT_FALSE(b.add("three\n", t0 + 5s));  // the next batch's interval runs from its first line
  EXPECT_FALSE(b.due(t0 + 5s + 999ms));
  EXPECT_TRUE(b.due(t0 + 6s));
}

TEST(AccessLog, AFullBatchIsDueAtOnce) {
  line_batch b(10, 1s);
  const line_batch::clock::time_point t0{};
  EXPECT_FALSE(b.add("12345\n", t0));
  EXPECT_TRUE(b.add("6789\n", t0));  // 11 bytes held: at least the capacity
  b.clear();
  EXPECT_TRUE(b.held().empty());
}

/// What `f` writes on stderr, through a file in place of descriptor 2.
template <class F>
std::string stderr_of(F&& f) {
  const std::filesystem::path path = std::filesystem::temp_directory_path() / ("folio-access-log-" + std::to_string(getpid()));
  std::fflush(stderr);
  const int saved = dup(2), fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  dup2(fd, 2);
  close(fd);
  f();
  std::fflush(stderr);
  dup2(saved, 2);
  close(saved);
  std::stringstream text;
  text << std::ifstream(path).rdbuf();
  std::filesystem::remove(path);
  return text.str();
}

const log::access_entry entry{.method = "POST", .endpoint = "/v2/crdt/get", .code = "OK", .key_id = "", .status = 200, .duration_ms = 1};

TEST(AccessLog, HeldLinesAreWrittenOnFlushAndBeforeAnyOtherLine) {
  const std::string flushed = stderr_of([] {
    log::access(entry);
    log::flush();
  });
  EXPECT_NE(flushed.find(R"("event":"request","method":"POST","endpoint":"/v2/crdt/get","status":200)"), std::string::npos) << flushed;

  const std::string both = stderr_of([] {
    log::access(entry);
    log::write("error", "internal_error", "after the request");
  });
  const std::size_t request = both.find(R"("event":"request")"), error = both.find(R"("event":"internal_error")");
  ASSERT_NE(request, std::string::npos) << both;
  ASSERT_NE(error, std::string::npos) << both;
  EXPECT_LT(request, error);  // the log keeps its order
}

// Run as a child process (below): one access line, then exit at once, long before the flusher's second.
TEST(AccessLog, ChildLogsOneLineAndExits) {
  if (!std::getenv("FOLIO_ACCESS_LOG_CHILD")) GTEST_SKIP() << "run by HeldLinesAreWrittenAtExit";
  log::access(entry);
  std::exit(0);
}

TEST(AccessLog, HeldLinesAreWrittenAtExit) {
  const std::filesystem::path out = std::filesystem::temp_directory_path() / ("folio-access-log-child-" + std::to_string(getpid()));
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 2, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  std::string filter = "--gtest_filter=AccessLog.ChildLogsOneLineAndExits", self = "/proc/self/exe", marker = "FOLIO_ACCESS_LOG_CHILD=1";
  char* argv[] = {self.data(), filter.data(), nullptr};
  char* envp[] = {marker.data(), nullptr};
  pid_t pid = 0;
  ASSERT_EQ(posix_spawn(&pid, self.c_str(), &actions, nullptr, argv, envp), 0);
  posix_spawn_file_actions_destroy(&actions);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  std::stringstream text;
  text << std::ifstream(out).rdbuf();
  std::filesystem::remove(out);
  EXPECT_NE(text.str().find(R"("endpoint":"/v2/crdt/get")"), std::string::npos) << text.str();
}

}  // namespace
