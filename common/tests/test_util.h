#pragma once

/**
 * @file
 * Helpers shared by the emulator's tests: status assertions, a kernel that
 * blocks until released (to make "not ready" deterministic), RAII buffers,
 * and scenarios run in a child process with their own environment.
 */

#include <accinte/kernel.h>
#include <accinte/runtime.h>

#include <gtest/gtest.h>

#include <sys/types.h>

#include <cstdio>
#include <future>
#include <string>
#include <vector>

/** Prints error codes by name in assertion failures. */
inline void PrintTo(accinteError_t error, std::ostream* os) {
  *os << accinteGetErrorName(error);
}

#define ASSERT_OK(expr) ASSERT_EQ((expr), accinteSuccess)
#define EXPECT_OK(expr) EXPECT_EQ((expr), accinteSuccess)

namespace accinte::testing {

/**
 * A kernel that blocks its stream until released.
 *
 * NB: this is how the tests observe "work still running" without sleeping:
 * everything enqueued behind the gate is guaranteed not to have run until
 * release(). The destructor releases, so a failing assertion cannot leave a
 * worker blocked forever.
 */
class Gate {
 public:
  Gate() : released_(releasePromise_.get_future().share()) {}
  ~Gate() {
    release();
  }
  Gate(const Gate&) = delete;
  Gate& operator=(const Gate&) = delete;

  /** Enqueues the blocking kernel on `stream`. */
  accinteError_t block(accinteStream_t stream) {
    auto released = released_;
    return accinte::launchKernel(stream, {}, [released] { released.wait(); });
  }

  /** Unblocks every kernel enqueued by block(). */
  void release() {
    if (!isReleased_) {
      isReleased_ = true;
      releasePromise_.set_value();
    }
  }

 private:
  std::promise<void> releasePromise_;
  std::shared_future<void> released_;
  bool isReleased_ = false;
};

/** Device memory freed at the end of the scope. */
class DeviceBuffer {
 public:
  /** Allocates `size` bytes on the current device; check ptr(). */
  explicit DeviceBuffer(size_t size) {
    status_ = accinteMalloc(&ptr_, size);
  }
  ~DeviceBuffer() {
    if (ptr_ != nullptr) {
      accinteFree(ptr_);
    }
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  /** The allocation, or NULL if it failed. */
  void* ptr() const {
    return ptr_;
  }
  /** The allocation as `T*`. */
  template <typename T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }
  /** Result of the allocation. */
  accinteError_t status() const {
    return status_;
  }

 private:
  void* ptr_ = nullptr;
  accinteError_t status_ = accinteSuccess;
};

/** A test body run in a separate process: returns its exit code. */
using ScenarioFn = int (*)();

/** Registers a scenario under `name` at static-initialisation time. */
struct ScenarioRegistrar {
  ScenarioRegistrar(const char* name, ScenarioFn fn);
};

/**
 * Runs scenario `name` in a fresh process of this test binary.
 *
 * The child sees this process's environment minus every `ACCINTE_*`
 * variable, plus `env` (entries of the form "NAME=value"). Returns the exit
 * code, or 128 + the signal number if the child was killed.
 */
int runScenario(const std::string& name, const std::vector<std::string>& env);

/** Starts scenario `name` as runScenario() does, without waiting for it;
 * returns the child's pid, or -1. The child inherits the descriptors that
 * are not close-on-exec. */
pid_t startScenario(const std::string& name,
                    const std::vector<std::string>& env);

/** Waits for a child of startScenario(): its exit code, 128 + the signal
 * number if it was killed, or -1. */
int waitScenario(pid_t pid);

} // namespace accinte::testing

/** Defines a scenario: a function body returning 0 on success. */
#define ACCINTE_SCENARIO(name)                                        \
  static int name##Scenario();                                        \
  static const ::accinte::testing::ScenarioRegistrar name##Registrar( \
      #name, &name##Scenario);                                        \
  static int name##Scenario()

/** In a scenario: fails with a message if `cond` is false. */
#define SCENARIO_CHECK(cond)                                                \
  do {                                                                      \
    if (!(cond)) {                                                          \
      std::fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, \
                   #cond);                                                  \
      return 1;                                                             \
    }                                                                       \
  } while (false)
