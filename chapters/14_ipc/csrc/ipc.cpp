#include <14_ipc/csrc/ipc.h>

#include <01_minimal_ops/csrc/exception.h>
#include <01_minimal_ops/csrc/runtime.h>
#include <07_memory/csrc/caching_allocator.h>

#include <c10/core/DeviceGuard.h>
#include <c10/core/StorageImpl.h>
#include <c10/util/Exception.h>

#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <map>
#include <mutex>
#include <random>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

namespace accinte {
namespace {

// LITERALINCLUDE START: CH14_COUNTER_PAGE
/** The counters of one page: 4 KiB of 64-bit counters. */
constexpr int64_t kCounterSlots = 512;
constexpr size_t kCounterPageBytes = kCounterSlots * sizeof(int64_t);
/** Far beyond any real slot number: a malformed handle's slot must not
 * overflow an offset. */
constexpr int64_t kMaxCounterSlot = int64_t{1} << 40;

// NB: the counters are updated by several processes through their own
// mappings of one page, which needs atomics that work on memory by address
// alone, with no lock inside the object.
static_assert(std::atomic<int64_t>::is_always_lock_free);
static_assert(sizeof(std::atomic<int64_t>) == sizeof(int64_t));

/** The name of a counter file: what a consumer checks before trusting it. */
std::string counterFileName(uint64_t nonce) {
  char name[64];
  std::snprintf(name, sizeof(name), "accinte-ipc-counters-%016llx",
                static_cast<unsigned long long>(nonce));
  return name;
}

class CounterPage;

/**
 * The reference counters a producer shares with its consumers: one file,
 * grown a page of kCounterSlots counters at a time, whose released counters
 * serve later sends.
 *
 * NB: the file is an anonymous memory file (memfd): it has no name in the
 * file system, so nothing is left behind when the processes end, however
 * they end. A consumer opens it through `/proc/<producer>/fd/<fd>`, which
 * the kernel allows to processes of the same user; CUDA's PyTorch keeps its
 * counters in named shared-memory files instead.
 * NB: one file for all the counters, kept open for the process's life: a
 * descriptor per page would grow with the tensors in flight, and a process
 * may open only so many files (1024 by default). The file is as large as
 * the most counters in use at once.
 */
class CounterFile {
 public:
  /** A free counter, set to 1 for the message, and (in `page`) its page. */
  RefCounterHandle take(std::shared_ptr<CounterPage>* page);
  /** Counter `slot` was released (is 0): a later send may take it. */
  void give(int64_t slot) {
    free_.push_back(slot);
  }

 private:
  /** Adds a page of free counters. */
  void grow();

  int fd_ = -1;
  uint64_t nonce_ = 0;
  /** The file's pages, in order, mapped. */
  std::vector<std::shared_ptr<CounterPage>> pages_;
  /** The counters no send holds. */
  std::vector<int64_t> free_;
};
// LITERALINCLUDE END: CH14_COUNTER_PAGE

/**
 * One page of a producer's counter file, mapped: counters first() to
 * first() + kCounterSlots - 1.
 */
class CounterPage {
 public:
  // LITERALINCLUDE START: CH14_PAGE_OPEN
  /** The page of the producer's counter file that holds the counter
   * `handle` names, mapped into this process (once per page: later calls
   * share the first mapping). */
  static std::shared_ptr<CounterPage> open(const RefCounterHandle& handle) {
    static std::mutex mutex;
    static std::map<std::tuple<pid_t, uint64_t, int64_t>,
                    std::weak_ptr<CounterPage>>
        opened;
    const int64_t first = handle.slot - handle.slot % kCounterSlots;
    std::lock_guard<std::mutex> lock(mutex);
    for (auto it = opened.begin(); it != opened.end();) {
      it = it->second.expired() ? opened.erase(it) : std::next(it);
    }
    auto& cached = opened[{handle.pid, handle.nonce, first}];
    if (auto page = cached.lock()) {
      return page;
    }
    const std::string path = "/proc/" + std::to_string(handle.pid) + "/fd/" +
                             std::to_string(handle.fd);
    const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
    // NB: the descriptor number may belong to another file by now, if the
    // producer exited or forked; the file's name says whether it is still
    // the counters, and its size whether it holds the page.
    char target[256] = {};
    const ssize_t length = readlink(path.c_str(), target, sizeof(target) - 1);
    const std::string expected = "/memfd:" + counterFileName(handle.nonce);
    struct stat status {};
    const bool valid =
        fd >= 0 && length > 0 &&
        std::string(target, static_cast<size_t>(length)).rfind(expected, 0) ==
            0 &&
        fstat(fd, &status) == 0 &&
        status.st_size >=
            static_cast<off_t>((first + kCounterSlots) * sizeof(int64_t));
    void* mapping = valid ? mapPage(fd, first) : MAP_FAILED;
    if (fd >= 0) {
      ::close(fd); // the mapping keeps the page
    }
    if (mapping == MAP_FAILED) {
      return nullptr;
    }
    auto page = std::shared_ptr<CounterPage>(new CounterPage(mapping, first));
    cached = page;
    return page;
  }
  // LITERALINCLUDE END: CH14_PAGE_OPEN

  // LITERALINCLUDE START: CH14_PAGE_REST
  ~CounterPage() {
    munmap(counters_, kCounterPageBytes);
  }
  CounterPage(const CounterPage&) = delete;
  CounterPage& operator=(const CounterPage&) = delete;

  /** Counter `slot` of the file (checked: it must be on this page). */
  std::atomic<int64_t>& at(int64_t slot) {
    TORCH_CHECK(slot >= first_ && slot < first_ + kCounterSlots,
                "accinte: reference counter slot ", slot, " out of range");
    return counters_[slot - first_];
  }

 private:
  friend class CounterFile;

  CounterPage(void* mapping, int64_t first)
      : counters_(static_cast<std::atomic<int64_t>*>(mapping)), first_(first) {}

  /** Maps the page of `fd` that starts at counter `first`; MAP_FAILED if
   * it cannot. */
  static void* mapPage(int fd, int64_t first) {
    return mmap(
        nullptr, kCounterPageBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
        static_cast<off_t>(first * static_cast<int64_t>(sizeof(int64_t))));
  }

  std::atomic<int64_t>* counters_;
  int64_t first_;
};

RefCounterHandle CounterFile::take(std::shared_ptr<CounterPage>* page) {
  if (free_.empty()) {
    grow();
  }
  const int64_t slot = free_.back();
  free_.pop_back();
  *page = pages_[static_cast<size_t>(slot / kCounterSlots)];
  (*page)->at(slot).store(1);
  return RefCounterHandle{getpid(), fd_, nonce_, slot};
}

void CounterFile::grow() {
  if (fd_ < 0) {
    std::random_device random;
    const uint64_t nonce = (uint64_t{random()} << 32) | random();
    fd_ = memfd_create(counterFileName(nonce).c_str(), MFD_CLOEXEC);
    TORCH_CHECK(fd_ >= 0,
                "accinte: cannot create the reference counters of "
                "shared tensors: ",
                std::strerror(errno));
    nonce_ = nonce;
  }
  const auto first = static_cast<int64_t>(pages_.size()) * kCounterSlots;
  TORCH_CHECK(ftruncate(fd_, static_cast<off_t>((first + kCounterSlots) *
                                                sizeof(int64_t))) == 0,
              "accinte: cannot grow the reference counters of shared "
              "tensors: ",
              std::strerror(errno));
  void* mapping = CounterPage::mapPage(fd_, first);
  TORCH_CHECK(mapping != MAP_FAILED,
              "accinte: cannot map the reference counters of shared "
              "tensors: ",
              std::strerror(errno));
  pages_.push_back(
      std::shared_ptr<CounterPage>(new CounterPage(mapping, first)));
  for (int64_t slot = first + kCounterSlots; slot > first; --slot) {
    free_.push_back(slot - 1); // the lowest taken first
  }
}
// LITERALINCLUDE END: CH14_PAGE_REST

/** Destroys an emulator event when it goes out of scope. */
struct EventHolder {
  accinteEvent_t event = nullptr;
  EventHolder() = default;
  EventHolder(const EventHolder&) = delete;
  EventHolder& operator=(const EventHolder&) = delete;
  EventHolder(EventHolder&& other) noexcept
      : event(std::exchange(other.event, nullptr)) {}
  EventHolder& operator=(EventHolder&& other) noexcept {
    std::swap(event, other.event); // `other` destroys the one held here
    return *this;
  }
  ~EventHolder() {
    if (event != nullptr) {
      (void)accinteEventDestroy(event);
    }
  }
};

// LITERALINCLUDE START: CH14_SENT
/** One send of a storage's memory: what its consumer opens and releases. */
struct Send {
  /** The event recorded for the send, which the consumer opens. */
  EventHolder event;
  /** The counter the consumer decrements: slot `slot` of `page`. */
  std::shared_ptr<CounterPage> page;
  int64_t slot = 0;

  bool released() const {
    return page->at(slot).load() == 0;
  }
};

/**
 * The memory of a storage that was sent, as the producer keeps it.
 *
 * NB: what must outlive the consumers is the memory, not the storage: a
 * storage may let its bytes go while it lives on (`resize_(0)`, as FSDP
 * frees parameters, a `resize_` that grows, `set_data_ptr`). So, as CUDA's
 * CudaIPCSentData, the first send moves the storage's DataPtr (the caching
 * allocator's block) in here, and gives the storage a DataPtr of the same
 * bytes whose deleter is releaseSentMemory(): wherever the storage's bytes
 * go, this object follows them, and the block goes back to the allocator
 * only once the storage has let them go and every send is released.
 */
struct SentMemory {
  /** The storage's own DataPtr before the first send. */
  c10::DataPtr original;
  /** The sends a consumer may still hold, oldest first. */
  std::vector<Send> sends;
  /** Whether a storage still holds these bytes (the DataPtr whose context
   * this is lives); once not, the memory waits in the *limbo* until its
   * sends are released. */
  bool inStorage = true;
};
// LITERALINCLUDE END: CH14_SENT

// LITERALINCLUDE START: CH14_LIMBO
/**
 * Every sent memory that a storage holds or a consumer may still hold, and
 * the page whose next slot the next send takes.
 *
 * NB: leaked on purpose, like the emulator's registries: the memory it
 * holds at exit must not be freed after the allocator is gone.
 */
struct SentStorages {
  std::mutex mutex;
  std::unordered_map<SentMemory*, std::unique_ptr<SentMemory>> memories;
  CounterFile counters;

  static SentStorages& instance() {
    return *current();
  }

  /** The process's instance. NB: a child of fork() gets a new, empty one
   * (forgetInForkedChild()). */
  static SentStorages*& current() {
    static auto* sentStorages = new SentStorages();
    return sentStorages;
  }

  /** Drops the released sends of `memory`; returns the memory itself,
   * removed from the registry, if nothing needs it any more (for the
   * caller to free outside the lock). */
  std::unique_ptr<SentMemory> collect(SentMemory& memory) {
    auto& sends = memory.sends;
    const auto released = std::stable_partition(
        sends.begin(), sends.end(),
        [](const Send& send) { return !send.released(); });
    for (auto it = released; it != sends.end(); ++it) {
      counters.give(it->slot);
    }
    sends.erase(released, sends.end());
    if (memory.inStorage || !sends.empty()) {
      return nullptr;
    }
    return std::move(memories.extract(&memory).mapped());
  }
};

/** The deleter of the DataPtr a sent storage holds: the storage lets the
 * bytes go; they wait in the limbo if a consumer may still use them. */
void releaseSentMemory(void* context) {
  auto* memory = static_cast<SentMemory*>(context);
  std::unique_ptr<SentMemory> unused;
  {
    auto& sentStorages = SentStorages::instance();
    std::lock_guard<std::mutex> lock(sentStorages.mutex);
    // NB: a child of fork() frees its copy of a parent's storage: the
    // memory is the parent's, in the registry the child forgot; leaked.
    if (sentStorages.memories.count(memory) == 0) {
      return;
    }
    memory->inStorage = false;
    unused = sentStorages.collect(*memory);
  }
  // NB: outside the lock: freeing the block takes the caching allocator's.
}
// LITERALINCLUDE END: CH14_LIMBO

/** What a consumer tells its user when a handle no longer opens. */
[[noreturn]] void producerGone(pid_t producer) {
  TORCH_CHECK(false, "accinte: cannot map the tensor that process ", producer,
              " sent: that process has exited, or freed the tensor, before "
              "this one received it. Keep a producer running until its "
              "consumers have received their tensors (as with CUDA).");
}

/** Makes `device`'s current stream wait for the event of `shared`. */
void waitForProducer(const SharedStorage& shared, pid_t producer) {
  accinteIpcEventHandle_t handle{};
  TORCH_CHECK(shared.eventHandle.size() == sizeof(handle.reserved),
              "accinte: an IPC event handle has ", sizeof(handle.reserved),
              " bytes, not ", shared.eventHandle.size());
  std::memcpy(handle.reserved, shared.eventHandle.data(),
              sizeof(handle.reserved));
  EventHolder event;
  const accinteError_t status = accinteIpcOpenEventHandle(&event.event, handle);
  if (status == accinteErrorInvalidIpcHandle) {
    producerGone(producer);
  }
  ACCINTE_CHECK(status);
  // NB: a wait, not a synchronize: the host goes on at once, and the
  // consumer's work on the tensor, enqueued after it, runs after the
  // producer's work that wrote it.
  ACCINTE_CHECK(accinteStreamWaitEvent(
      nativeStream(currentStream(shared.device)), event.event));
}

/** The counter page of `shared`, mapped; fails as producerGone(). */
std::shared_ptr<CounterPage> counterPage(const SharedStorage& shared,
                                         pid_t producer) {
  TORCH_CHECK(shared.counter.slot >= 0 && shared.counter.slot < kMaxCounterSlot,
              "accinte: reference counter slot ", shared.counter.slot,
              " out of range");
  auto page = CounterPage::open(shared.counter);
  if (!page) {
    producerGone(producer);
  }
  return page;
}

// LITERALINCLUDE START: CH14_RECEIVED
/** What a consumer's storage holds besides its bytes. */
struct ReceivedStorage {
  /** What accinteIpcOpenMemHandle() returned: the segment's base. */
  void* base;
  std::shared_ptr<CounterPage> page;
  int64_t slot;
  /** Set once releaseReceivedStoragesAtExit() released it. */
  bool released = false;
};

/** The received storages still alive, for releaseReceivedStoragesAtExit().
 * Leaked on purpose, like SentStorages. */
struct ReceivedStorages {
  std::mutex mutex;
  std::unordered_set<ReceivedStorage*> live;

  static ReceivedStorages& instance() {
    return *current();
  }

  /** As SentStorages::current(). */
  static ReceivedStorages*& current() {
    static auto* receivedStorages = new ReceivedStorages();
    return receivedStorages;
  }
};

/**
 * In a child of fork(): starts from empty registries, leaking the parent's
 * copies whole.
 *
 * NB: what the parent sent and received is the parent's: a child that
 * collected it would free device memory (which a forked child cannot, see
 * the emulator's accinteErrorForkedChild) and warn about sends it never
 * made; and a mutex copied while another thread held it stays locked.
 */
void forgetInForkedChild() {
  SentStorages::current() = new SentStorages();
  ReceivedStorages::current() = new ReceivedStorages();
}

const bool forkHandlerRegistered = [] {
  return pthread_atfork(nullptr, nullptr, &forgetInForkedChild) == 0;
}();
// LITERALINCLUDE END: CH14_RECEIVED

// LITERALINCLUDE START: CH14_RELEASE_RECEIVED
/** Closes this process's mapping of a received storage, then tells the
 * producer. */
void release(void* base, CounterPage& page, int64_t slot) {
  // NB: close first: it returns once this process's work on the memory has
  // finished, and from the moment the counter drops, the producer may give
  // the block to another tensor.
  if (accinteIpcCloseMemHandle(base) == accinteSuccess) {
    page.at(slot).fetch_sub(1);
  }
  // NB: otherwise (a process that forked, say) the counter stays up and
  // the producer keeps the block until it exits: safe, where releasing it
  // early would let the producer overwrite memory still in use here.
}

/** The deleter of a received storage's bytes. */
void releaseReceivedStorage(void* context) {
  std::unique_ptr<ReceivedStorage> received(
      static_cast<ReceivedStorage*>(context));
  {
    auto& receivedStorages = ReceivedStorages::instance();
    std::lock_guard<std::mutex> lock(receivedStorages.mutex);
    receivedStorages.live.erase(received.get());
    if (received->released) {
      return;
    }
  }
  release(received->base, *received->page, received->slot);
}
// LITERALINCLUDE END: CH14_RELEASE_RECEIVED

// LITERALINCLUDE START: CH14_WRAP_MEMORY
/**
 * The SentMemory of the bytes `storage` holds, made at their first send:
 * the storage's DataPtr moves into it, and the storage gets a DataPtr of
 * the same bytes whose deleter is releaseSentMemory(). Called under the
 * registry's lock.
 */
SentMemory& sentMemory(SentStorages& sentStorages,
                       const c10::Storage& storage) {
  c10::StorageImpl* impl = storage.unsafeGetStorageImpl();
  const c10::DataPtr& current = impl->data_ptr();
  if (current.get_deleter() == &releaseSentMemory) {
    auto* memory = static_cast<SentMemory*>(current.get_context());
    TORCH_CHECK(sentStorages.memories.count(memory) != 0,
                "accinte: this tensor's memory was sent by the process this "
                "one was forked from, and only that process can send it");
    return *memory; // sent before: one more send of the same memory
  }
  auto owned = std::make_unique<SentMemory>();
  SentMemory& memory = *owned;
  sentStorages.memories.emplace(&memory, std::move(owned));
  // LITERALINCLUDE EMPHASIZE NEXT 2
  memory.original = impl->set_data_ptr(c10::DataPtr(
      current.get(), &memory, &releaseSentMemory, current.device()));
  return memory;
}
// LITERALINCLUDE END: CH14_WRAP_MEMORY

} // namespace

// LITERALINCLUDE START: CH14_SHARE
SharedStorage shareStorage(const c10::Storage& storage) {
  TORCH_CHECK(storage.device_type() == c10::DeviceType::PrivateUse1,
              "accinte: shareStorage takes an accinte storage, not a ",
              storage.device_type(), " one");
  TORCH_CHECK(!isReceivedStorage(storage),
              "accinte: this tensor was received from another process and "
              "cannot be sent on (CUDA refuses too); send a clone() of it");
  // NB: mutable_data() first gives a copy-on-write storage bytes of its
  // own: the consumer writes into the same memory as the producer.
  c10::Storage writable = storage;
  void* data = writable.mutable_data();
  TORCH_INTERNAL_ASSERT(data != nullptr,
                        "a storage without bytes is not "
                        "shared through a handle");
  const c10::DeviceIndex device = storage.device().index();
  const c10::DeviceGuard guard(storage.device());

  accintePointerAttributes attributes{};
  ACCINTE_CHECK(accintePointerGetAttributes(&attributes, data));
  TORCH_CHECK(attributes.type == accinteMemoryTypeDevice,
              "accinte: the storage's bytes are not device memory");
  accinteIpcMemHandle_t memory{};
  ACCINTE_CHECK(
      accinteIpcGetMemHandle(&memory, data)); // LITERALINCLUDE EMPHASIZE

  SharedStorage shared;
  shared.device = device;
  shared.memoryHandle.assign(memory.reserved, sizeof(memory.reserved));
  shared.offset = static_cast<size_t>(static_cast<char*>(data) -
                                      static_cast<char*>(attributes.base));
  shared.nbytes = storage.nbytes();

  // The consumer's work must wait for the producer's, already enqueued on
  // its current stream, that writes the storage.
  Send send;
  ACCINTE_CHECK(accinteEventCreateWithFlags(
      &send.event.event, accinteEventDisableTiming | accinteEventInterprocess));
  ACCINTE_CHECK(accinteEventRecord(send.event.event,
                                   nativeStream(currentStream(device))));
  accinteIpcEventHandle_t event{};
  ACCINTE_CHECK(accinteIpcGetEventHandle(
      &event, send.event.event)); // LITERALINCLUDE EMPHASIZE
  shared.eventHandle.assign(event.reserved, sizeof(event.reserved));

  auto& sentStorages = SentStorages::instance();
  std::lock_guard<std::mutex> lock(sentStorages.mutex);
  // LITERALINCLUDE EMPHASIZE NEXT
  shared.counter = sentStorages.counters.take(&send.page);
  send.slot = shared.counter.slot;
  sentMemory(sentStorages, writable).sends.push_back(std::move(send));
  return shared;
}
// LITERALINCLUDE END: CH14_SHARE

// LITERALINCLUDE START: CH14_OPEN
namespace {

/** Maps the memory of `shared`; the DataPtr owns the mapping and the
 * counter of `page` from then on. */
c10::DataPtr mapSharedStorage(const SharedStorage& shared, pid_t producer,
                              std::shared_ptr<CounterPage> page) {
  checkDeviceIndex(shared.device);
  const c10::Device device(c10::DeviceType::PrivateUse1, shared.device);
  const c10::DeviceGuard guard(device);
  accinteIpcMemHandle_t handle{};
  TORCH_CHECK(shared.memoryHandle.size() == sizeof(handle.reserved),
              "accinte: an IPC memory handle has ", sizeof(handle.reserved),
              " bytes, not ", shared.memoryHandle.size());
  std::memcpy(handle.reserved, shared.memoryHandle.data(),
              sizeof(handle.reserved));
  void* base = nullptr;
  const accinteError_t status =
      accinteIpcOpenMemHandle( // LITERALINCLUDE EMPHASIZE
          &base, handle, accinteIpcMemLazyEnablePeerAccess);
  if (status == accinteErrorInvalidIpcHandle) {
    producerGone(producer);
  }
  ACCINTE_CHECK(status);
  accintePointerAttributes attributes{};
  const bool fits =
      accintePointerGetAttributes(&attributes, base) == accinteSuccess &&
      shared.offset <= attributes.size &&
      shared.nbytes <= attributes.size - shared.offset;
  if (!fits) {
    (void)accinteIpcCloseMemHandle(base);
    TORCH_CHECK(false, "accinte: a shared storage of ", shared.nbytes,
                " bytes at offset ", shared.offset, " runs past its ",
                attributes.size, "-byte allocation");
  }
  auto* received =
      new ReceivedStorage{base, std::move(page), shared.counter.slot};
  {
    auto& receivedStorages = ReceivedStorages::instance();
    std::lock_guard<std::mutex> lock(receivedStorages.mutex);
    receivedStorages.live.insert(received);
  }
  return c10::DataPtr(static_cast<char*>(base) + shared.offset, received,
                      &releaseReceivedStorage, device);
}

} // namespace
// LITERALINCLUDE END: CH14_OPEN

// LITERALINCLUDE START: CH14_STORAGE_WAIT
c10::Storage openSharedStorage(const SharedStorage& shared, pid_t producer) {
  auto page = counterPage(shared, producer);
  c10::DataPtr dataPtr;
  try {
    dataPtr = mapSharedStorage(shared, producer, page);
  } catch (...) {
    // NB: the message was taken: whatever went wrong, the producer must not
    // keep the storage for it.
    page->at(shared.counter.slot).fetch_sub(1);
    throw;
  }
  // NB: not resizable: the bytes around the storage belong to other tensors
  // of the producer's segment. If the wait below raises, dropping the
  // storage closes the mapping and releases the counter.
  auto storage = c10::Storage(c10::make_storage_impl(
      c10::StorageImpl::use_byte_size_t(), c10::SymInt(shared.nbytes),
      std::move(dataPtr), /*allocator=*/nullptr, /*resizable=*/false,
      c10::Device(c10::DeviceType::PrivateUse1, shared.device)));
  const c10::DeviceGuard guard(storage.device());
  waitForProducer(shared, producer); // LITERALINCLUDE EMPHASIZE
  return storage;
}
// LITERALINCLUDE END: CH14_STORAGE_WAIT

void acceptSharedStorageAgain(const SharedStorage& shared, pid_t producer) {
  auto page = counterPage(shared, producer);
  // NB: released whatever happens: the storage this process already holds
  // keeps its own counter up.
  struct Release {
    CounterPage& page;
    int64_t slot;
    ~Release() {
      page.at(slot).fetch_sub(1);
    }
  } release{*page, shared.counter.slot};
  // NB: a storage sent and received by one process is the producer's own:
  // no handle was opened, and the emulator opens none of its own process.
  if (producer != getpid()) {
    checkDeviceIndex(shared.device);
    const c10::DeviceGuard guard(
        c10::Device(c10::DeviceType::PrivateUse1, shared.device));
    waitForProducer(shared, producer);
  }
}

bool isReceivedStorage(const c10::Storage& storage) {
  return storage.data_ptr().get_deleter() == &releaseReceivedStorage;
}

// LITERALINCLUDE START: CH14_RELEASE_AT_EXIT
void releaseReceivedStoragesAtExit() {
  struct Release {
    void* base;
    std::shared_ptr<CounterPage> page;
    int64_t slot;
  };
  std::vector<Release> releases;
  {
    auto& receivedStorages = ReceivedStorages::instance();
    std::lock_guard<std::mutex> lock(receivedStorages.mutex);
    for (ReceivedStorage* received : receivedStorages.live) {
      received->released = true; // its deleter, if it ever runs, does not
      releases.push_back({received->base, received->page, received->slot});
    }
    receivedStorages.live.clear();
  }
  for (const auto& each : releases) {
    release(each.base, *each.page, each.slot);
  }
}
// LITERALINCLUDE END: CH14_RELEASE_AT_EXIT

// LITERALINCLUDE START: CH14_COLLECT
namespace {

/** Frees the sent memory nothing needs any more; returns how many sends a
 * consumer may still hold, and sets `freed` to how many memories went back
 * to the caching allocator. */
size_t collect(size_t& freed) {
  auto& sentStorages = SentStorages::instance();
  std::vector<std::unique_ptr<SentMemory>> unused;
  size_t held = 0;
  {
    std::lock_guard<std::mutex> lock(sentStorages.mutex);
    std::vector<SentMemory*> memories;
    memories.reserve(sentStorages.memories.size());
    for (const auto& entry : sentStorages.memories) {
      memories.push_back(entry.first);
    }
    for (SentMemory* memory : memories) {
      // LITERALINCLUDE EMPHASIZE NEXT
      if (auto unneeded = sentStorages.collect(*memory)) {
        unused.push_back(std::move(unneeded));
      } else {
        held += memory->sends.size();
      }
    }
  }
  // NB: outside the lock: freeing a block returns it to the caching
  // allocator, which takes its own lock.
  freed = unused.size();
  unused.clear();
  return held;
}

// NB: the caching allocator calls it when it finds no room, before it
// raises out of memory, as CUDA's allocator calls CudaIPCCollect: memory
// every consumer released goes back to it without waiting for the next send
// or ipc_collect().
const bool collectOnOutOfMemory = [] {
  registerFreeMemoryCallback("14_ipc", [] {
    size_t freed = 0;
    collect(freed);
    return freed > 0;
  });
  return true;
}();

} // namespace

size_t collectSharedStorages() {
  size_t freed = 0;
  return collect(freed);
}
// LITERALINCLUDE END: CH14_COLLECT

} // namespace accinte
