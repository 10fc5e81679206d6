// The test binary's entry point: either the GoogleTest suite, or one
// scenario when re-run by runScenario() with ACCINTE_TEST_SCENARIO set.

#include "test_util.h"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <map>

extern char** environ;

namespace accinte::testing {

namespace {

/** Name of the variable that selects a scenario in the child. */
constexpr const char* kScenarioVariable = "ACCINTE_TEST_SCENARIO";

std::map<std::string, ScenarioFn>& scenarios() {
  static std::map<std::string, ScenarioFn> registered;
  return registered;
}

} // namespace

ScenarioRegistrar::ScenarioRegistrar(const char* name, ScenarioFn fn) {
  scenarios()[name] = fn;
}

pid_t startScenario(const std::string& name,
                    const std::vector<std::string>& env) {
  std::vector<std::string> childEnv;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    if (std::strncmp(*entry, "ACCINTE_", 8) != 0) {
      childEnv.emplace_back(*entry);
    }
  }
  childEnv.insert(childEnv.end(), env.begin(), env.end());
  childEnv.push_back(std::string(kScenarioVariable) + "=" + name);

  std::vector<char*> envp;
  for (auto& entry : childEnv) {
    envp.push_back(entry.data());
  }
  envp.push_back(nullptr);
  std::string program = "/proc/self/exe";
  char* argv[] = {program.data(), nullptr};

  // NB: posix_spawn rather than fork: this process has worker threads, and a
  // fresh exec gives the scenario a runtime that reads its own environment.
  pid_t pid = 0;
  if (posix_spawn(&pid, program.c_str(), nullptr, nullptr, argv, envp.data()) !=
      0) {
    return -1;
  }
  return pid;
}

int waitScenario(pid_t pid) {
  if (pid < 0) {
    return -1;
  }
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) {
    return -1;
  }
  if (WIFSIGNALED(status)) {
    return 128 + WTERMSIG(status);
  }
  return WEXITSTATUS(status);
}

int runScenario(const std::string& name, const std::vector<std::string>& env) {
  return waitScenario(startScenario(name, env));
}

} // namespace accinte::testing

int main(int argc, char** argv) {
  if (const char* name = std::getenv(accinte::testing::kScenarioVariable)) {
    auto& registered = accinte::testing::scenarios();
    auto it = registered.find(name);
    if (it == registered.end()) {
      std::fprintf(stderr, "unknown scenario %s\n", name);
      return 2;
    }
    return it->second();
  }
  ::testing::InitGoogleTest(&argc, argv);
  // NB: the runtime runs worker threads, so death tests must re-execute the
  // binary instead of forking a multi-threaded process.
  ::testing::FLAGS_gtest_death_test_style = "threadsafe";
  return RUN_ALL_TESTS();
}
