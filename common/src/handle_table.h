#pragma once

#include "stream.h"

#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <utility>

namespace accinte::emulator {

/**
 * The objects of one kind of opaque handle (`Handle`, a pointer type of the
 * C API), each a `std::shared_ptr<Value>`, by handle.
 *
 * NB: handle values come from newHandleValue(), so they are serial numbers
 * shared by every table and never reused; a null, destroyed or made-up
 * handle is simply not found. The lock is held only to read or change the
 * map: a handle is drawn before it, and a removed object is released after
 * it, so a destructor that calls back into the runtime (a kernel's argument
 * deleter) never runs under the lock.
 */
template <typename Handle, typename Value>
class HandleTable {
 public:
  /** Registers `value` under a new handle and returns the handle. */
  Handle add(std::shared_ptr<Value> value) {
    const uintptr_t key = newHandleValue();
    std::lock_guard<std::mutex> lock(mutex_);
    entries_.emplace(key, std::move(value));
    return reinterpret_cast<Handle>(key);
  }

  /** The object of `handle`, or null if there is none. */
  std::shared_ptr<Value> find(Handle handle) {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto it = entries_.find(reinterpret_cast<uintptr_t>(handle));
    return it == entries_.end() ? nullptr : it->second;
  }

  /** Forgets `handle`; false if there is no such handle. */
  bool remove(Handle handle) {
    // NB: declared before the lock, so destroyed after it is released.
    std::shared_ptr<Value> removed;
    std::lock_guard<std::mutex> lock(mutex_);
    const auto it = entries_.find(reinterpret_cast<uintptr_t>(handle));
    if (it == entries_.end()) {
      return false;
    }
    removed = std::move(it->second);
    entries_.erase(it);
    return true;
  }

 private:
  std::mutex mutex_;
  std::unordered_map<uintptr_t, std::shared_ptr<Value>> entries_;
};

} // namespace accinte::emulator
