#pragma once

#include <accinte/runtime.h>

#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

namespace accinte::emulator {

/**
 * Who a process is: its pid and its start time, so that a pid the kernel
 * has reused for another process is not taken for the original one.
 */
struct ProcessIdentity {
  /** The process id. */
  int32_t pid = 0;
  /** Field 22 of `/proc/<pid>/stat`: start time after boot, in clock ticks. */
  uint64_t startTime = 0;
};

/** The calling process's identity (computed once). */
const ProcessIdentity& selfIdentity();

/** True while the process `identity` names runs (not a zombie, and its pid
 * not reused). */
bool processIsAlive(const ProcessIdentity& identity);

/** 64 random bits that name one exported memfd. */
uint64_t newIpcNonce();

/** The memfd name of an exported object: `prefix` then `nonce` in hex. */
std::string ipcMemfdName(const char* prefix, uint64_t nonce);

/** memfd name prefix of exported device memory. */
constexpr const char* kIpcMemPrefix = "accinte-ipc-";
/** memfd name prefix of the pages of a process's interprocess events. */
constexpr const char* kIpcEventPrefix = "accinte-ipc-event-";

/**
 * Creates a memfd of `size` bytes named ipcMemfdName(prefix, nonce);
 * returns its descriptor (close-on-exec) or -1, errno saying why.
 */
int createIpcMemfd(const char* prefix, uint64_t nonce, size_t size);

/**
 * What a failure to make or map the memfd of an IPC object reports, given
 * its errno: ::accinteErrorOperatingSystem when the process or the system
 * is out of open files (the device is not the cause), else
 * ::accinteErrorMemoryAllocation.
 */
accinteError_t ipcResourceError(int error);

/**
 * Opens descriptor `fd` of the process `owner` through `/proc/<pid>/fd/<fd>`
 * and checks that it is still the memfd named ipcMemfdName(prefix, nonce) of
 * at least `minSize` bytes. Returns a descriptor of this process
 * (close-on-exec) or -1 if the process, the descriptor or the file is gone
 * or has been replaced.
 */
int openPeerMemfd(const ProcessIdentity& owner, int fd, const char* prefix,
                  uint64_t nonce, size_t minSize);

/** What a memory handle carries. */
struct IpcMemHandleData {
  /** kIpcMemMagic. */
  uint32_t magic;
  /** kIpcHandleVersion. */
  uint32_t version;
  /** The exporting process. */
  int32_t pid;
  /** The memfd's descriptor number in the exporting process. */
  int32_t fd;
  /** The exporting process's start time (ProcessIdentity). */
  uint64_t startTime;
  /** The nonce in the memfd's name. */
  uint64_t nonce;
  /** The size the allocation was requested with. */
  uint64_t size;
  /** The size of its mapping (the memfd's size). */
  uint64_t mappedSize;
  /** The device it belongs to. */
  int32_t device;
  /** Zero. */
  uint32_t padding;
};

/** What an event handle carries. */
struct IpcEventHandleData {
  /** kIpcEventMagic. */
  uint32_t magic;
  /** kIpcHandleVersion. */
  uint32_t version;
  /** The exporting process. */
  int32_t pid;
  /** The descriptor number, in the exporting process, of the memfd that
   * holds the shared page (SharedEventPool). */
  int32_t fd;
  /** The exporting process's start time. */
  uint64_t startTime;
  /** The nonce in the memfd's name. */
  uint64_t nonce;
  /** Where the event's page starts in the memfd, in bytes. */
  uint64_t offset;
  /** The event's SharedEventPage::eventId. */
  uint64_t eventId;
};

/** First bytes of a memory handle ("AIPM"). */
constexpr uint32_t kIpcMemMagic = 0x4d504941;
/** First bytes of an event handle ("AIPE"). */
constexpr uint32_t kIpcEventMagic = 0x45504941;
/** The handle layout's version (2: an event handle names its page's
 * offset). */
constexpr uint32_t kIpcHandleVersion = 2;

static_assert(sizeof(IpcMemHandleData) <= ACCINTE_IPC_HANDLE_SIZE,
              "a memory handle's contents must fit its bytes");
static_assert(sizeof(IpcEventHandleData) <= ACCINTE_IPC_HANDLE_SIZE,
              "an event handle's contents must fit its bytes");

/**
 * One record of an interprocess event, as SharedEventPage keeps it.
 *
 * NB: record `g` lives in slot `g % kSharedEventSlots`, and a slot is taken
 * over by a later record only once its own record completed. So a slot that
 * holds a later generation than the one a waiter looks for tells it that its
 * record completed, without any counter of "completed so far": records of
 * one event made on different streams (or in different processes) complete
 * in any order, and each wait concerns one record only.
 */
struct SharedEventSlot {
  /** The record's generation shifted left by one, plus 1 once it completed
   * (kSlotDone); 0 if the slot never held a record. One word, so that a
   * reader never sees the generation of one record with the state of
   * another. */
  std::atomic<uint64_t> state;
  /** Who made the record (packRecorder()): read only while `state` still
   * says the record is pending, and checked again after (see
   * SharedEventState::query()). */
  std::atomic<uint64_t> recorder;
};

/** The bit of SharedEventSlot::state that says the record completed. */
constexpr uint64_t kSlotDone = 1;

/** How many records of one interprocess event may be outstanding (made and
 * not yet complete) at a time; the page holds one slot for each. */
constexpr size_t kSharedEventSlots = 240;

/**
 * The page an interprocess event shares between the processes that have it:
 * the exporter and every importer map the same memfd page.
 *
 * NB: only lock-free atomics live here. A process-shared mutex would stay
 * locked forever if its owner died holding it; these cannot.
 */
struct SharedEventPage {
  /** kIpcEventMagic once initialised. */
  uint64_t magic;
  /** Which event holds the page: random, drawn anew for each event the
   * page serves; 0 while the page is free. A handle carries it, so that the
   * handle of a destroyed event does not open its page's next event. */
  std::atomic<uint64_t> eventId;
  /** The generation of the latest record (1, 2, ...); 0 if never recorded.
   * Published once the record holds its slot. */
  std::atomic<uint64_t> recorded;
  /** Bumped on each completion; waiters sleep on it (a shared futex). */
  std::atomic<uint32_t> futexWord;
  /** The records, by generation modulo kSharedEventSlots. */
  SharedEventSlot slots[kSharedEventSlots];
};

static_assert(sizeof(SharedEventPage) <= 4096,
              "an interprocess event's records must fit the smallest page");

static_assert(std::atomic<uint64_t>::is_always_lock_free &&
                  std::atomic<uint32_t>::is_always_lock_free,
              "atomics shared between processes must be lock-free");

/** Packs `identity` as SharedEventPage::recorder does. */
uint64_t packRecorder(const ProcessIdentity& identity);

/** True while the process packed in `recorder` runs. */
bool recorderIsAlive(uint64_t recorder);

/** Wakes every process waiting on `word` (a shared futex). */
void futexWakeAll(std::atomic<uint32_t>* word);

/** Sleeps while `*word == expected`, at most `timeoutMs` milliseconds (or
 * until a wake or a signal). */
void futexWait(std::atomic<uint32_t>* word, uint32_t expected, int timeoutMs);

} // namespace accinte::emulator
